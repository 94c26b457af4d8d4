"""A k per batch size as vLLM's schedule reads it, which runner honours one, acceptance traces."""

from __future__ import annotations

import os
import random
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.common import vllm_names
from helpers.common.configs import read_json
from helpers.common.counters import Meter, SpecCounters
from helpers.common.prompts import as_messages
from helpers.engine.compat import QUIRKS

__all__ = [
    "best_k",
    "schedule_ranges",
    "dense_lookup",
    "acceptance_traces",
    "iid_traces",
    "COUNTER",
    "forwards_by_batch",
    "start_failure",
    "recorded_runners",
    "quirk_lines",
    "trace_tau",
]

_RECORDED: Path = Path(__file__).parent / "data" / "gpu-schedule-check.json"
#: What vLLM does with a schedule on each runner (`helpers.engine.compat.QUIRKS`).
_QUIRKS = ("mrv2_schedule_capture", "mrv2_schedule_ignored", "v1_schedule_piecewise")


def best_k(
    taus: Mapping[int, float], costs: Mapping[int, float], k0: float = 1.0
) -> tuple[int, float]:
    """The k of the highest τ(k) / c(k) and that speed-up; k = 0 counts `k0` (plain: 1)."""
    options = {0: k0} | {k: taus[k] / costs[k] for k in costs if k in taus}
    k = max(options, key=options.get)
    return k, options[k]


def schedule_ranges(best: Mapping[int, int]) -> list[tuple[int, int, int]]:
    """vLLM ranges from the best k at measured batch sizes (from 1, equal neighbours merged)."""
    ranges: list[tuple[int, int, int]] = []
    for batch, k in sorted(best.items()):  # a range starts after the last; an equal k extends it
        if ranges and ranges[-1][2] == k:
            ranges[-1] = (ranges[-1][0], batch, k)
        else:
            ranges.append((ranges[-1][1] + 1 if ranges else 1, batch, k))
    return ranges


def dense_lookup(ranges: Sequence[Sequence[int]], max_batch: int, k: int) -> list[int]:
    """vLLM's own expansion of a schedule: index b holds the k a batch of b drafts."""
    from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

    return build_dynamic_sd_schedule_lookup([list(r) for r in ranges], max_batch, k)


def _request_trace(output: Any, k: int) -> list[int] | None:
    """Drafts accepted per verify step that drafted all k (vLLM's detailed metrics), else None."""
    metrics = getattr(output, vllm_names.PER_REQUEST.output_attr, None)
    accepted = getattr(metrics, vllm_names.PER_REQUEST.per_step_accepted, None)
    drafted = getattr(metrics, vllm_names.PER_REQUEST.per_step_drafted, None)
    if not accepted or drafted is None:
        return None
    return [a for a, d in zip(accepted, drafted) if d == k]


def _counters_trace(counters: SpecCounters, steps: int, seed: int = 0) -> list[int]:
    """A trace drawn step by step with the per-position acceptance of pooled counters."""
    reach = [a / counters.num_drafts for a in counters.accepted_per_pos]  # P(accepted ≥ i + 1)
    rng = random.Random(seed)
    draws = [rng.random() for _ in range(steps)]  # a step accepts while u < reach[j]
    return [next((j for j, r in enumerate(reach) if u >= r), len(reach)) for u in draws]


def acceptance_traces(
    llm: Any, prompts: Sequence[str], k: int, params: Any
) -> tuple[list[list[int]], str]:
    """Per-request traces of drafts accepted per step on an engine drafting k, and how read."""
    with Meter(llm) as meter:
        outs = llm.chat([as_messages(p) for p in prompts], params, use_tqdm=False)
    traces = [_request_trace(o.outputs[0], k) for o in outs]
    if all(t is not None for t in traces):
        return traces, "per verify step and request (vLLM's detailed per-request metrics)"
    per_request = max(1, meter.delta.num_drafts // len(prompts))
    drawn = [_counters_trace(meter.delta, per_request, seed=i) for i in range(len(prompts))]
    return drawn, "drawn from the pooled per-position counters (no per-step record in this vLLM)"


def iid_traces(alpha: float, requests: int, steps: int, k: int, seed: int = 0) -> list[list[int]]:
    """Traces of a drafter whose every draft is accepted with probability α, independently."""
    rng = random.Random(seed)  # a step stops at its first rejected draft, else accepts all k
    return [
        [next((j for j in range(k) if rng.random() >= alpha), k) for _ in range(steps)]
        for _ in range(requests)
    ]


class _ForwardCounter:
    """vLLM worker extension (`worker_extension_cls=COUNTER`): counts forward passes."""

    def ch06_count_forwards(self: Any, on: bool) -> dict[str, int]:
        """on=True hooks the verifier's and the drafter's forwards to count them; False unhooks."""
        if not on:
            for hook in getattr(self, "_ch06_hooks", []):
                hook.remove()
            self._ch06_hooks = []
            return dict(getattr(self, "_ch06_counts", {}))
        runner = self.model_runner  # V1/CPU: `drafter.model`, V2: `speculator.model`
        models = [
            getattr(getattr(runner, n, None), "model", None) for n in ("drafter", "speculator")
        ]
        drafter = next((m for m in models if hasattr(m, "register_forward_pre_hook")), None)
        counts = self._ch06_counts = {"verifier": 0, "drafter": 0}
        self._ch06_hooks = [
            module.register_forward_pre_hook(lambda *_, _k=key: counts.update({_k: counts[_k] + 1}))
            for key, module in (("verifier", runner.get_model()), ("drafter", drafter))
            if module is not None
        ]
        return dict(counts)


#: The dotted name vLLM loads the counting extension by (`worker_extension_cls`).
COUNTER = f"{__name__}.{_ForwardCounter.__qualname__}"


def forwards_by_batch(llm: Any, prompts: Sequence[str], params: Any) -> dict[int, dict[str, float]]:
    """Per batch (one prompt, all): drafter passes per verifier pass and draft tokens scheduled."""
    out = {}
    for batch in (prompts[:1], prompts):
        llm.collective_rpc("ch06_count_forwards", args=(True,))
        with Meter(llm) as meter:
            llm.chat([as_messages(p) for p in batch], params, use_tqdm=False)
        counts = llm.collective_rpc("ch06_count_forwards", args=(False,))[0]
        d, verifier = meter.delta, counts["verifier"]
        out[len(batch)] = {
            "drafter_per_step": counts["drafter"] / verifier if verifier else 0.0,
            "scheduled_per_step": d.num_draft_tokens / d.num_drafts if d.num_drafts else 0.0,
        }
    return out


def start_failure(err: BaseException) -> str:
    """Why an engine did not start, in one line: the exception and vLLM's innermost frame."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if "vllm" in f.filename]
    path = frames[-1].filename.replace(os.sep, "/").split("/vllm/", 1)[-1] if frames else ""
    where = f" at {path}:{frames[-1].name}" if frames else ""
    message = str(err).strip().splitlines()
    return f"{type(err).__name__}{where}" + (f": {message[-1][:160]}" if message else "")


def recorded_runners(path: Path = _RECORDED) -> pd.DataFrame:
    """The schedule check a GPU run recorded, its how, gpu and date in `.attrs`."""
    record = read_json(path)
    table = pd.DataFrame(record["rows"])
    table.attrs.update(how=record["how"], gpu=record["gpu"], date=record["date"])
    return table


def quirk_lines() -> list[str]:
    """Per schedule quirk: what a vLLM does, where it was seen, what the workbook does instead."""
    quirks = [QUIRKS[name] for name in _QUIRKS]
    return [f"{q.what} (seen in {', '.join(q.seen_in)}): {q.instead}" for q in quirks]


def trace_tau(trace: Sequence[int], k: int) -> float:
    """τ at k replayed from a k_max trace: mean of 1 + the accepted prefix of the first k drafts."""
    return sum(1 + min(j, k) for j in trace) / len(trace)
