"""Speculative-decoding counters: snapshots, deltas and acceptance statistics (notebooks 02–04).

vLLM's spec-decode counters are cumulative over the engine's life, so every experiment takes a
snapshot before and after and works on the difference. Names and formulas follow vLLM's
`examples/offline_inference/spec_decode.py` and the JSON of `vllm bench serve` (the names live in
`helpers.common.vllm_names`):
acceptance length τ = 1 + accepted / drafts; per-position rate = accepted_at_pos / drafts;
acceptance rate (%) = 100 · accepted / draft_tokens.

Per request, a vLLM with `per_request_spec_decode_metrics` (see helpers.engine.compat for which)
keeps a histogram of verify steps by how many drafts each accepted; `RequestAcceptance` holds it,
and the requests of a batch add up to exactly the counter delta of that batch (`counters_of`),
which is how the two views reconcile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from helpers.common import vllm_names

__all__ = [
    "SpecCounters",
    "snapshot",
    "acceptance_stats",
    "Meter",
    "RequestAcceptance",
    "request_acceptance",
    "counters_of",
]


@dataclass(frozen=True)
class SpecCounters:
    """Cumulative (or differenced) spec-decode counters of one engine."""

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_pos: tuple[int, ...] = field(default_factory=tuple)

    def _combine(self, other: SpecCounters, sign: int) -> SpecCounters:
        """Element-wise self + sign * other (per-position lists padded with zeros)."""
        n = max(len(self.accepted_per_pos), len(other.accepted_per_pos))
        a = list(self.accepted_per_pos) + [0] * (n - len(self.accepted_per_pos))
        b = list(other.accepted_per_pos) + [0] * (n - len(other.accepted_per_pos))
        return SpecCounters(
            self.num_drafts + sign * other.num_drafts,
            self.num_draft_tokens + sign * other.num_draft_tokens,
            self.num_accepted_tokens + sign * other.num_accepted_tokens,
            tuple(x + sign * y for x, y in zip(a, b)),
        )

    def __sub__(self, before: SpecCounters) -> SpecCounters:
        """The counts accumulated between `before` and this snapshot."""
        return self._combine(before, -1)

    def __add__(self, other: SpecCounters) -> SpecCounters:
        """Counts of two experiments pooled (for an overall τ across categories)."""
        return self._combine(other, +1)


def _counters_from_values(values: dict[str, Any]) -> SpecCounters:
    """Build counters from metric name -> value (names with or without the `vllm:` prefix)."""
    prefix = vllm_names.METRIC_PREFIX
    v = {name if name.startswith(prefix) else prefix + name: val for name, val in values.items()}
    names = vllm_names.METRICS
    per_pos = v.get(names.accepted_per_pos) or ()
    return SpecCounters(
        int(v.get(names.num_drafts) or 0),
        int(v.get(names.num_draft_tokens) or 0),
        int(v.get(names.num_accepted_tokens) or 0),
        tuple(int(x) for x in per_pos),
    )


def snapshot(llm: Any) -> SpecCounters:
    """The spec-decode counters of an in-process `vllm.LLM` now (all zero without a drafter)."""
    values = {}
    for m in llm.get_metrics():
        if m.name.startswith(vllm_names.SPEC_DECODE_PREFIX):
            values[m.name] = m.values if hasattr(m, "values") else m.value
    return _counters_from_values(values)


def acceptance_stats(c: SpecCounters) -> dict[str, Any]:
    """The statistics `vllm bench serve` reports, computed from a counter delta."""
    drafts = c.num_drafts
    return {
        vllm_names.STATS.num_drafts: drafts,
        vllm_names.STATS.draft_tokens: c.num_draft_tokens,
        vllm_names.STATS.accepted_tokens: c.num_accepted_tokens,
        vllm_names.STATS.tau: 1 + c.num_accepted_tokens / drafts if drafts else 0.0,
        vllm_names.STATS.acceptance_rate: 100 * c.num_accepted_tokens / c.num_draft_tokens
        if c.num_draft_tokens
        else 0.0,
        vllm_names.STATS.per_position_rates: [a / drafts for a in c.accepted_per_pos]
        if drafts
        else [],
    }


class Meter:
    """Measure the counters accumulated by a block: `with Meter(llm) as m: ...; m.stats`."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.delta = SpecCounters()

    def __enter__(self) -> Meter:
        self.before = snapshot(self.llm)
        return self

    def __exit__(self, *exc: object) -> None:
        self.delta = snapshot(self.llm) - self.before

    @property
    def stats(self) -> dict[str, Any]:
        """acceptance_stats of the measured block."""
        return acceptance_stats(self.delta)


@dataclass(frozen=True)
class RequestAcceptance:
    """One request's verify steps counted by accepted drafts: histogram[j] = steps accepting j."""

    histogram: tuple[int, ...]
    num_draft_tokens: int
    #: Draft tokens proposed at each verify step, in order (vLLM's `detailed` record; else empty).
    per_step_drafted: tuple[int, ...] = ()

    @property
    def counters(self) -> SpecCounters:
        """The same request as counters: drafts, draft tokens, accepted, accepted per position."""
        h = self.histogram
        accepted = sum(j * n for j, n in enumerate(h))
        per_pos = tuple(sum(h[i + 1 :]) for i in range(len(h) - 1))
        return SpecCounters(sum(h), self.num_draft_tokens, accepted, per_pos)


def request_acceptance(output: Any) -> RequestAcceptance | None:
    """A vLLM CompletionOutput's per-request metrics (None when the engine did not record them)."""
    metrics = getattr(output, vllm_names.PER_REQUEST.output_attr, None)
    if metrics is None:
        return None
    steps = tuple(
        int(n) for n in getattr(metrics, vllm_names.PER_REQUEST.per_step_drafted, None) or ()
    )
    return RequestAcceptance(tuple(metrics.histogram), int(metrics.num_draft_tokens), steps)


def counters_of(requests: list[RequestAcceptance]) -> SpecCounters:
    """Requests pooled into counters: equal to the engine's counter delta over the same batch."""
    return sum((r.counters for r in requests), SpecCounters())
