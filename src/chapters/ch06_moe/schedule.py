"""What to do when the answer depends on the batch: a k for each batch size, written as vLLM's
schedule, and the per-step acceptance traces that notebook 06's cells replay static k, the schedule
and a utility controller on (section 6 says why a schedule needs its k = 0 ranges).

`num_speculative_tokens_per_batch_size` is a list of inclusive (first batch, last batch, k)
ranges starting at 1; batch sizes in a gap take the range before's k, and above the last range
the last range's k (vLLM's `build_dynamic_sd_schedule_lookup`, which `dense_lookup` calls).

A trace is the drafts accepted at each verify step of requests drafted with k_max tokens; a chain
of k < k_max drafts is the first k of that chain, so `trace_tau` replays τ at k from it.

Which runner honours a schedule is a fact of the vLLM version (`helpers.engine.compat.QUIRKS`):
`forwards_by_batch` counts what the drafter computed (its forward passes per verifier pass), not
what the scheduler asked for, and `model_runner` picks the runner an engine starts on.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import traceback
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.common import vllm_names
from helpers.common.counters import Meter, SpecCounters
from helpers.common.paths import DATA_DIR
from helpers.common.prompts import as_messages

__all__ = [
    "best_k",
    "schedule_ranges",
    "dense_lookup",
    "acceptance_traces",
    "iid_traces",
    "COUNTER",
    "forwards_by_batch",
    "model_runner",
    "start_failure",
    "recorded_runners",
    "trace_tau",
]

#: The schedule check of a GPU run, recorded (notebook 06 shows it where no GPU runs).
_RECORDED_FILE: Path = DATA_DIR / "measurements" / "gpu-schedule-check.json"
#: vLLM's switch between its two GPU model runners ("0": V1, "1": V2; unset: vLLM's choice).
_RUNNER_ENV = "VLLM_USE_V2_MODEL_RUNNER"


def best_k(
    taus: Mapping[int, float], costs: Mapping[int, float], k0: float = 1.0
) -> tuple[int, float]:
    """The k with the highest τ(k) / c(k), and that speed-up; k = 0 counts `k0` (1 is plain
    decoding without a schedule; a schedule's k = 0 entry costs more: `answer.k0_cost`)."""
    options = {0: k0} | {k: taus[k] / costs[k] for k in costs if k in taus}
    k = max(options, key=options.get)
    return k, options[k]


def schedule_ranges(best: Mapping[int, int]) -> list[tuple[int, int, int]]:
    """vLLM ranges from the best k at measured batch sizes: each measured size covers the sizes
    above the previous one (a batch of 10 takes the k chosen for 16), the first starts at 1,
    equal neighbours merge, and k = 0 ranges stay (vLLM gives larger batches the last k)."""
    ranges: list[tuple[int, int, int]] = []
    start = 1
    for batch in sorted(best):
        k = best[batch]
        if ranges and ranges[-1][2] == k:
            ranges[-1] = (ranges[-1][0], batch, k)
        else:
            ranges.append((start, batch, k))
        start = batch + 1
    return ranges


def dense_lookup(ranges: Sequence[Sequence[int]], max_batch: int, k: int) -> list[int]:
    """vLLM's own expansion of a schedule: index b holds the k a batch of b requests drafts
    (index 0 unused). Raises vLLM's error for a schedule it would refuse."""
    from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

    return build_dynamic_sd_schedule_lookup([list(r) for r in ranges], max_batch, k)


def _request_trace(output: Any, k: int) -> list[int] | None:
    """Drafts accepted at each verify step of a finished request that drafted all k (vLLM's
    `detailed` per-request metrics; steps cut short by max_tokens left out), else None."""
    metrics = getattr(output, vllm_names.PER_REQUEST.output_attr, None)
    accepted = getattr(metrics, vllm_names.PER_REQUEST.per_step_accepted, None)
    drafted = getattr(metrics, vllm_names.PER_REQUEST.per_step_drafted, None)
    if not accepted or drafted is None:
        return None
    return [a for a, d in zip(accepted, drafted) if d == k]


def _counters_trace(counters: SpecCounters, steps: int, seed: int = 0) -> list[int]:
    """A trace drawn step by step with the per-position acceptance of pooled counters (what a
    vLLM without per-step records gives): the order of steps is lost, their mix is kept."""
    reach = [a / counters.num_drafts for a in counters.accepted_per_pos]  # P(accepted ≥ i + 1)
    rng = random.Random(seed)
    out = []
    for _ in range(steps):
        u, j = rng.random(), 0
        while j < len(reach) and u < reach[j]:
            j += 1
        out.append(j)
    return out


def acceptance_traces(
    llm: Any, prompts: Sequence[str], k: int, params: Any
) -> tuple[list[list[int]], str]:
    """Per-request traces of drafts accepted per step for chat prompts on an engine drafting k,
    and how they were read: per step from vLLM's detailed per-request metrics, else drawn from
    the pooled counters (one trace per request, as many steps as it took)."""
    with Meter(llm) as meter:
        outs = llm.chat([as_messages(p) for p in prompts], params, use_tqdm=False)
    traces = [_request_trace(o.outputs[0], k) for o in outs]
    if all(t is not None for t in traces):
        return traces, "per verify step and request (vLLM's detailed per-request metrics)"
    per_request = max(1, meter.delta.num_drafts // len(prompts))
    drawn = [_counters_trace(meter.delta, per_request, seed=i) for i in range(len(prompts))]
    return drawn, "drawn from the pooled per-position counters (no per-step record in this vLLM)"


def iid_traces(alpha: float, requests: int, steps: int, k: int, seed: int = 0) -> list[list[int]]:
    """Traces of a drafter whose every draft is accepted with probability α, independently (the
    E[tokens per step] = 1 + α + … + α^k): a weaker drafter than a measured one, on demand.
    """
    rng = random.Random(seed)
    traces = []
    for _ in range(requests):
        trace = []
        for _ in range(steps):
            j = 0
            while j < k and rng.random() < alpha:
                j += 1
            trace.append(j)
        traces.append(trace)
    return traces


def _drafter_module(worker: Any) -> Any | None:
    """Inside a vLLM worker: the drafter's model (the V1 runner's and the CPU runner's
    `drafter.model`, Model Runner V2's `speculator.model`), None without one."""
    for name in ("drafter", "speculator"):
        model = getattr(getattr(worker.model_runner, name, None), "model", None)
        if model is not None and hasattr(model, "register_forward_pre_hook"):
            return model
    return None


def _count_forwards(worker: Any, on: bool) -> dict[str, int]:
    """Inside a vLLM worker: from on=True, count the verifier's and the drafter's forward passes
    (hooks on their Python `forward`, which a replayed full CUDA graph skips); on=False removes the
    hooks and returns the counts."""
    if on:
        counts = {"verifier": 0, "drafter": 0}
        parts = (
            ("verifier", worker.model_runner.get_model()),
            ("drafter", _drafter_module(worker)),
        )
        worker._ch06_counts = counts
        worker._ch06_hooks = [
            module.register_forward_pre_hook(
                lambda *_, _key=key: counts.update({_key: counts[_key] + 1})
            )
            for key, module in parts
            if module is not None
        ]
        return dict(counts)
    for hook in getattr(worker, "_ch06_hooks", []):
        hook.remove()
    worker._ch06_hooks = []
    return dict(getattr(worker, "_ch06_counts", {}))


class _ForwardCounter:
    """vLLM worker extension (`worker_extension_cls=COUNTER`): counts forward passes."""

    def ch06_count_forwards(self, on: bool) -> dict[str, int]:
        """_count_forwards of this worker."""
        return _count_forwards(self, on)


#: The dotted name vLLM loads the counting extension by (`worker_extension_cls`).
COUNTER = f"{__name__}.{_ForwardCounter.__qualname__}"


def forwards_by_batch(llm: Any, prompts: Sequence[str], params: Any) -> dict[int, dict[str, float]]:
    """With the first prompt alone and then all at once: the drafter's forward passes per verifier
    pass (what it computed: one pass per draft token) and the draft tokens the scheduler asked for
    per verify step (vLLM's counters). The engine needs `worker_extension_cls=COUNTER`."""
    out = {}
    for batch in (prompts[:1], prompts):
        llm.collective_rpc("ch06_count_forwards", args=(True,))
        with Meter(llm) as meter:
            llm.chat([as_messages(p) for p in batch], params, use_tqdm=False)
        counts = llm.collective_rpc("ch06_count_forwards", args=(False,))[0]
        d = meter.delta
        out[len(batch)] = {
            "drafter_per_step": counts["drafter"] / counts["verifier"]
            if counts["verifier"]
            else 0.0,
            "scheduled_per_step": d.num_draft_tokens / d.num_drafts if d.num_drafts else 0.0,
        }
    return out


@contextlib.contextmanager
def model_runner(runner: str | None) -> Iterator[None]:
    """Engines started inside run on vLLM's V1 runner ("V1"), Model Runner V2 ("V2") or vLLM's
    choice (None): VLLM_USE_V2_MODEL_RUNNER, with vLLM's cache of its environment cleared so the
    engine reads it; the variable is restored afterwards."""
    before = os.environ.get(_RUNNER_ENV)
    if runner is None:
        os.environ.pop(_RUNNER_ENV, None)
    else:
        os.environ[_RUNNER_ENV] = {"V1": "0", "V2": "1"}[runner]
    from vllm import envs

    envs.disable_envs_cache()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(_RUNNER_ENV, None)
        else:
            os.environ[_RUNNER_ENV] = before
        envs.disable_envs_cache()


def start_failure(err: BaseException) -> str:
    """Why an engine did not start, in one line: the exception and the innermost frame of vLLM's
    it came from (an assert without a message says nothing else)."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if "vllm" in f.filename]
    where = ""
    if frames:
        path = frames[-1].filename.replace(os.sep, "/")
        where = f" at {path.split('/vllm/', 1)[-1]}:{frames[-1].name}"
    message = str(err).strip().splitlines()
    return f"{type(err).__name__}{where}" + (f": {message[-1][:160]}" if message else "")


def recorded_runners(path: Path = _RECORDED_FILE) -> pd.DataFrame:
    """The schedule check as a GPU run recorded it (rows as notebook 06's table), with the run's
    conditions in `.attrs["how"]` and the GPU and date in `.attrs["gpu"]`, `.attrs["date"]`."""
    record = json.loads(path.read_text(encoding="utf-8"))
    table = pd.DataFrame(record["rows"])
    table.attrs.update(how=record["how"], gpu=record["gpu"], date=record["date"])
    return table


def _tokens_at(accepted: int, k: int) -> int:
    """Tokens a step emits at k when the k_max chain had `accepted` drafts accepted: the
    accepted prefix of the first k drafts, plus the verifier's own token."""
    return 1 + min(accepted, k)


def trace_tau(trace: Sequence[int], k: int) -> float:
    """τ at k replayed from a trace: mean tokens per step."""
    return sum(_tokens_at(j, k) for j in trace) / len(trace)
