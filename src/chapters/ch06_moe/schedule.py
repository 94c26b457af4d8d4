"""What to do when the answer depends on the batch: a k for each batch size, written as vLLM's
schedule, and adaptive speculation replayed on measured per-step acceptance (notebook 06, section
6, says why a schedule needs its k = 0 ranges).

`num_speculative_tokens_per_batch_size` is a list of inclusive (first batch, last batch, k)
ranges starting at 1; batch sizes in a gap take the range before's k, and above the last range
the last range's k (vLLM's `build_dynamic_sd_schedule_lookup`, which `dense_lookup` calls).

The replay: a trace is the drafts accepted at each verify step of requests drafted with k_max
tokens. A chain of k < k_max drafts is the first k of that chain, so the step would have accepted
min(j, k); the measured c(k, B) prices each step. Speed-up = tokens / cost. Where the next step
starts stays as recorded, which a real run at another k would change.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from helpers.common import vllm_names
from helpers.common.counters import Meter, SpecCounters
from helpers.common.prompts import as_messages
from helpers.common.tables import COLUMNS

__all__ = [
    "best_k",
    "schedule_ranges",
    "dense_lookup",
    "acceptance_traces",
    "iid_traces",
    "drafts_by_batch",
    "trace_tau",
    "replay_table",
]


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


def drafts_by_batch(llm: Any, prompts: Sequence[str], params: Any) -> dict[int, float]:
    """Draft tokens per verify step an engine proposed with the first prompt alone and with all
    of them at once (0 when it did not speculate): how a running engine read its schedule."""
    out = {}
    for batch in (prompts[:1], prompts):
        with Meter(llm) as meter:
            llm.chat([as_messages(p) for p in batch], params, use_tqdm=False)
        d = meter.delta
        out[len(batch)] = d.num_draft_tokens / d.num_drafts if d.num_drafts else 0.0
    return out


def _tokens_at(accepted: int, k: int) -> int:
    """Tokens a step emits at k when the k_max chain had `accepted` drafts accepted: the
    accepted prefix of the first k drafts, plus the verifier's own token."""
    return 1 + min(accepted, k)


def trace_tau(trace: Sequence[int], k: int) -> float:
    """τ at k replayed from a trace: mean tokens per step."""
    return sum(_tokens_at(j, k) for j in trace) / len(trace)


@dataclass
class _UtilityController:
    """Speculation utility after Cascade (arXiv 2506.20675): expected tokens per step ÷ the step's
    cost; draft the k with the highest utility while it beats plain decoding (utility 1), else
    decode plainly; every `probe_every`-th step drafts k_max to test the positions the chosen k
    leaves unseen (Cascade alternates short test phases with long set phases).

    The estimate: per draft position i, the share of steps that accepted position i among those
    that drafted it with positions before it accepted (a Beta(½, ½) prior), so τ(k) = 1 +
    Σ_{i≤k} Π_{j≤i} p_j; only positions that were drafted are observed, as in a real engine. A
    request's first step drafts k_max, so short requests learn from their first step on."""

    costs: Mapping[int, float]
    probe_every: int = 16

    def __post_init__(self) -> None:
        self.k_max = max(self.costs)
        self.hits = [0.5] * self.k_max
        self.tries = [1.0] * self.k_max
        self.since_probe = self.probe_every - 1  # the first step probes

    def expected_tokens(self, k: int) -> float:
        """τ(k) from the running per-position estimates."""
        total, reach = 1.0, 1.0
        for i in range(k):
            reach *= self.hits[i] / self.tries[i]
            total += reach
        return total

    def choose(self) -> int:
        """The k for the next step (0 = plain)."""
        self.since_probe += 1
        if self.since_probe >= self.probe_every:
            self.since_probe = 0
            return self.k_max
        return best_k({k: self.expected_tokens(k) for k in self.costs}, self.costs)[0]

    def observe(self, k: int, accepted: int) -> None:
        """Learn from a step that drafted k and accepted `accepted` of them."""
        for i in range(min(k, accepted + 1)):
            self.tries[i] += 1
            self.hits[i] += i < accepted


def _replay_static(trace: Sequence[int], k: int, cost: float) -> float:
    """Speed-up of a fixed k over a trace: τ(k) / c(k) (k = 0: 1)."""
    return trace_tau(trace, k) / cost if k else 1.0


def _replay_rule(
    traces: Sequence[Sequence[int]], costs: Mapping[int, float], probe_every: int = 16
) -> tuple[float, float]:
    """Speed-up of the utility controller over requests' traces, and the share of steps it
    speculated. One controller learns over the requests in turn, as an engine-wide estimate
    would: Cascade keeps one per request, which needs requests long enough to learn within."""
    tokens = cost = speculated = steps = 0.0
    ctl = _UtilityController(costs, probe_every)
    for trace in traces:
        for j in trace:
            k = ctl.choose()
            tokens += _tokens_at(j, k) if k else 1
            cost += costs[k] if k else 1.0
            speculated += k > 0
            steps += 1
            if k:
                ctl.observe(k, min(j, k))
    return tokens / cost, speculated / steps


def replay_table(
    traces: Mapping[str, Sequence[Sequence[int]]],
    costs: Mapping[int, Mapping[int, float]],
    ranges: Mapping[str, Sequence[Sequence[int]]],
    probe_every: int = 16,
    k0_cost: Callable[[int], float] | None = None,
) -> pd.DataFrame:
    """Per trace and batch size: the speed-up of every static k, of the trace's batch schedule
    (`ranges[trace]`, read as vLLM reads it), and of the utility controller.

    `costs[batch][k]` is the measured c(k, batch) (plain steps per speculative step);
    `k0_cost(batch)` is what a step of the schedule's k = 0 entry costs in plain steps (a
    schedule that does not draft still costs more than no speculation), 1 without it."""
    rows = []
    for name, reqs in traces.items():
        flat = [j for t in reqs for j in t]
        for batch, by_k in costs.items():
            ks = sorted(by_k)
            row = {"trace": name, "batch": batch}
            for k in ks:
                row[f"k={k}"] = _replay_static(flat, k, by_k[k])
            lookup = dense_lookup(ranges[name], max(costs), max(ks))
            k_sched = lookup[batch]
            row[f"{COLUMNS.k} (schedule)"] = k_sched
            plain = k0_cost(batch) if k0_cost else 1.0
            row["schedule"] = _replay_static(flat, k_sched, by_k[k_sched]) if k_sched else 1 / plain
            row["utility"], row["speculated_share"] = _replay_rule(reqs, by_k, probe_every)
            rows.append(row)
    return pd.DataFrame(rows)
