"""Uncertainty of acceptance and speed figures: bootstrap intervals over whole requests, and rankings
stated with them.

τ is a ratio of sums (1 + Σ accepted / Σ steps over the requests of a run), and the tokens of one
request are not independent of each other (a drafter that fits an answer fits all of it), so the
unit of resampling is the request: draw as many requests as were run, with replacement, add their
histograms, compute the statistic; repeat; the 2.5 % and 97.5 % quantiles bound a 95 % interval.
With 4-16 requests per group these intervals are wide, and that is the point: they say which
differences a run of this size can tell apart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from helpers.common import vllm_names
from helpers.common.counters import RequestAcceptance

__all__ = [
    "LEVEL",
    "BOOTSTRAP_SAMPLES",
    "Interval",
    "histogram_matrix",
    "resampled_histograms",
    "tau_of",
    "position_rates_of",
    "conditional_rates_of",
    "interval",
    "tau_interval",
    "position_intervals",
    "ranking",
    "spread",
]

#: Two-sided coverage of every interval the workbook prints.
LEVEL = 0.95
#: Bootstrap resamples: enough that the interval's ends move by well under 0.01 in τ between seeds.
BOOTSTRAP_SAMPLES = 2000


@dataclass(frozen=True)
class Interval:
    """An estimate with its interval (low, high) and how many requests it rests on."""

    estimate: float
    low: float
    high: float
    n: int = 0

    def __str__(self) -> str:
        return f"{self.estimate:.2f} [{self.low:.2f}, {self.high:.2f}]"

    @property
    def bounded(self) -> bool:
        """True when the interval has ends (NaN where vLLM kept no per-request acceptance)."""
        return not (math.isnan(self.low) or math.isnan(self.high))

    def above(self, other: Interval) -> bool:
        """True when this interval lies entirely above the other one (no overlap)."""
        return self.low > other.high

    def exceeds(self, other: Interval) -> bool:
        """Above beyond both intervals where both have ends; otherwise the estimates decide."""
        if self.bounded and other.bounded:
            return self.above(other)
        return self.estimate > other.estimate

    def overlaps(self, other: Interval) -> bool:
        """True when the two intervals share any value: the run cannot order them."""
        return not (self.above(other) or other.above(self))


def histogram_matrix(requests: Sequence[RequestAcceptance]) -> np.ndarray:
    """One row per request: verify steps by number of accepted drafts (columns 0..k)."""
    width = max(len(r.histogram) for r in requests)
    return np.array([list(r.histogram) + [0] * (width - len(r.histogram)) for r in requests])


def resampled_histograms(
    requests: Sequence[RequestAcceptance], samples: int = BOOTSTRAP_SAMPLES, seed: int = 0
) -> np.ndarray:
    """Summed histograms of `samples` resamples of the requests (with replacement), one per row."""
    h = histogram_matrix(requests)
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(len(h), np.full(len(h), 1 / len(h)), size=samples)
    return weights @ h


def tau_of(hist: np.ndarray) -> np.ndarray:
    """Acceptance length τ = 1 + accepted / steps of summed histograms (last axis: j = 0..k)."""
    j = np.arange(hist.shape[-1])
    with np.errstate(invalid="ignore", divide="ignore"):  # a resample of requests with no steps
        return 1 + (hist * j).sum(-1) / hist.sum(-1)


def position_rates_of(hist: np.ndarray) -> np.ndarray:
    """vLLM's per-position rate: steps whose draft at position i was accepted / steps (i = 1..k)."""
    at_least = np.flip(np.cumsum(np.flip(hist, -1), -1), -1)  # steps accepting >= j drafts
    with np.errstate(invalid="ignore", divide="ignore"):
        return at_least[..., 1:] / hist.sum(-1, keepdims=True)


def conditional_rates_of(hist: np.ndarray) -> np.ndarray:
    """Acceptance at position i given positions < i were accepted: how the drafter holds up."""
    rates = position_rates_of(hist)
    before = np.concatenate([np.ones_like(rates[..., :1]), rates[..., :-1]], -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return rates / before


def interval(
    requests: Sequence[RequestAcceptance],
    statistic: Callable[[np.ndarray], np.ndarray],
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = 0,
) -> list[Interval]:
    """The statistic on all requests with its percentile bootstrap interval, one per output value."""
    point = np.atleast_1d(statistic(histogram_matrix(requests).sum(0)))
    boot = statistic(resampled_histograms(requests, samples, seed)).reshape(samples, -1)
    lo, hi = np.nanquantile(boot, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=0)
    return [Interval(float(p), float(a), float(b), len(requests)) for p, a, b in zip(point, lo, hi)]


def tau_interval(requests: Sequence[RequestAcceptance], seed: int = 0) -> Interval:
    """τ of the pooled requests with its 95 % interval."""
    return interval(requests, tau_of, seed=seed)[0]


def position_intervals(requests: Sequence[RequestAcceptance], seed: int = 0) -> pd.DataFrame:
    """Per draft position: vLLM's rate and the conditional rate, each with its 95 % interval."""
    rates = interval(requests, position_rates_of, seed=seed)
    cond = interval(requests, conditional_rates_of, seed=seed)
    return pd.DataFrame(
        {
            "position": range(len(rates)),
            vllm_names.PER_POSITION_RATE: [i.estimate for i in rates],
            "rate_ci_low": [i.low for i in rates],
            "rate_ci_high": [i.high for i in rates],
            "conditional_acceptance_rate": [i.estimate for i in cond],
            "conditional_ci_low": [i.low for i in cond],
            "conditional_ci_high": [i.high for i in cond],
        }
    )


def ranking(intervals: Mapping[str, Interval]) -> str:
    """A ranking sentence computed from intervals: 'a 3.6 [3.5, 3.7] > b ... (intervals overlap)'."""
    order = sorted(intervals.items(), key=lambda kv: -kv[1].estimate)
    parts = [f"{order[0][0]} {order[0][1]}"]
    for (_, prev), (name, cur) in zip(order, order[1:]):
        sign = ">" if prev.estimate > cur.estimate else "="
        parts.append(f"{sign} {name} {cur}")
    separated = [a.above(b) for (_, a), (_, b) in zip(order, order[1:])]
    if not all(i.bounded for i in intervals.values()):
        verdict = "no intervals from this vLLM (no per-request acceptance): not ranked"
    elif not any(separated):
        verdict = "every neighbouring pair of intervals overlaps: this run cannot rank them"
    elif all(separated):
        verdict = "no neighbouring intervals overlap: the order holds at this run's size"
    else:
        verdict = "some neighbouring intervals overlap: only the separated steps are ordered"
    return " ".join(parts) + f" ({verdict})"


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, min and max of repeated measurements (what a throughput table reports)."""
    v = np.asarray(values, dtype=float)
    return {"median": float(np.median(v)), "min": float(v.min()), "max": float(v.max())}
