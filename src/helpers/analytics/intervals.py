"""Uncertainty of acceptance and speed figures: 95 % intervals over whole requests, and rankings
stated with them.

**The method, stated once.** τ and the acceptance rates are ratios of sums over the requests of a
run (τ = 1 + Σ accepted / Σ steps), and the tokens of one request are not independent of each other
(a drafter that fits an answer fits all of it), so the unit of sampling is the request. Every
interval is a Student-t interval around the statistic of all n requests with the **jackknife**
standard error: recompute the statistic leaving out one request at a time (θ₍ᵢ₎, i = 1..n), take
se² = (n − 1)/n · Σᵢ (θ₍ᵢ₎ − mean θ₍·₎)², and report θ ± t(0.975, n − 1) · se, clipped to the
statistic's range (τ in [1, k + 1], rates in [0, 1]). Fewer than 2 requests give no interval.

Why not a percentile bootstrap over requests: at the 4 requests per group the notebooks can afford
there are only 35 distinct resamples, and its intervals come out too narrow; the t quantile with
n − 1 degrees of freedom widens a small sample's interval as much as its size warrants.
`tests/analytics/test_intervals.py` simulates requests like the tiny pair's and checks the coverage
of both methods at n = 4 and n = 16. The intervals say which differences a run of this size can
tell apart, and they are approximate (the jackknife linearises the ratio): read overlapping
intervals as "not distinguished".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from helpers.common import vllm_names
from helpers.common.counters import RequestAcceptance
from helpers.common.tables import COLUMNS

__all__ = [
    "METHOD",
    "Interval",
    "tau_interval",
    "position_intervals",
    "ranking",
    "jackknife_ends",
    "tau_difference",
]

#: Two-sided coverage of every interval the workbook prints.
_LEVEL = 0.95
#: How the intervals are computed, in the words the notebooks print next to them.
METHOD = "95 % jackknife t-interval over requests"


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
        """True when the interval has ends (NaN without per-request acceptance or with n < 2)."""
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


def _t_quantile(p: float, df: int) -> float:
    """Student's t quantile at probability p (0.5 < p < 1) with df degrees of freedom.

    The density integrated by Simpson's rule and inverted by bisection (no SciPy in the workbook).
    """
    if not 0.5 < p < 1 or df < 1:
        raise ValueError(f"_t_quantile needs 0.5 < p < 1 and df >= 1, got p={p}, df={df}")
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def cdf(t: float) -> float:
        x = np.linspace(0.0, t, 4001)
        f = np.exp(log_c - (df + 1) / 2 * np.log1p(x * x / df))
        return 0.5 + (t / 12000) * (f[0] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum() + f[-1])

    low, high = 0.0, 1.0
    while cdf(high) < p:
        low, high = high, 2 * high
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if cdf(mid) < p else (low, mid)
    return (low + high) / 2


def _jackknife_se(loo: np.ndarray) -> np.ndarray:
    """The jackknife standard error from leave-one-out values (rows: the request left out)."""
    n = len(loo)
    return np.sqrt((n - 1) / n * ((loo - loo.mean(0)) ** 2).sum(0))  # NaN where a LOO set has none


def jackknife_ends(
    point: np.ndarray, loo: np.ndarray, bounds: tuple[float, float] = (-math.inf, math.inf)
) -> tuple[np.ndarray, np.ndarray]:
    """The t-interval's ends around `point` from leave-one-out values (rows: requests left out)."""
    half = _t_quantile((1 + _LEVEL) / 2, len(loo) - 1) * _jackknife_se(loo)
    return np.clip(point - half, *bounds), np.clip(point + half, *bounds)


def _histogram_matrix(requests: Sequence[RequestAcceptance]) -> np.ndarray:
    """One row per request: verify steps by number of accepted drafts (columns 0..k)."""
    width = max(len(r.histogram) for r in requests)
    return np.array([list(r.histogram) + [0] * (width - len(r.histogram)) for r in requests])


def _leave_one_out(requests: Sequence[RequestAcceptance]) -> np.ndarray:
    """The summed histograms of the requests with one request left out, one row per request."""
    h = _histogram_matrix(requests)
    return h.sum(0, keepdims=True) - h


def _tau_of(hist: np.ndarray) -> np.ndarray:
    """Acceptance length τ = 1 + accepted / steps of summed histograms (last axis: j = 0..k)."""
    j = np.arange(hist.shape[-1])
    with np.errstate(invalid="ignore", divide="ignore"):  # a set of requests with no steps
        return 1 + (hist * j).sum(-1) / hist.sum(-1)


def _position_rates_of(hist: np.ndarray) -> np.ndarray:
    """vLLM's per-position rate: steps whose draft at position i was accepted / steps (i = 1..k)."""
    at_least = np.flip(np.cumsum(np.flip(hist, -1), -1), -1)  # steps accepting >= j drafts
    with np.errstate(invalid="ignore", divide="ignore"):
        return at_least[..., 1:] / hist.sum(-1, keepdims=True)


def _conditional_rates_of(hist: np.ndarray) -> np.ndarray:
    """Acceptance at position i given positions < i were accepted: how the drafter holds up."""
    rates = _position_rates_of(hist)
    before = np.concatenate([np.ones_like(rates[..., :1]), rates[..., :-1]], -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return rates / before


def _interval(
    requests: Sequence[RequestAcceptance],
    statistic: Callable[[np.ndarray], np.ndarray],
    bounds: tuple[float, float] = (-math.inf, math.inf),
) -> list[Interval]:
    """The statistic on all requests with its jackknife t-interval, one per output value."""
    n = len(requests)
    point = np.atleast_1d(statistic(_histogram_matrix(requests).sum(0)))
    if n < 2:
        return [Interval(float(p), math.nan, math.nan, n) for p in point]
    lo, hi = jackknife_ends(point, statistic(_leave_one_out(requests)).reshape(n, -1), bounds)
    return [Interval(float(p), float(a), float(b), n) for p, a, b in zip(point, lo, hi)]


def tau_interval(requests: Sequence[RequestAcceptance]) -> Interval:
    """τ of the pooled requests with its 95 % interval (within 1 .. k + 1)."""
    k = _histogram_matrix(requests).shape[1] - 1
    return _interval(requests, _tau_of, (1.0, k + 1.0))[0]


def tau_difference(
    base: Sequence[RequestAcceptance],
    cond: Sequence[RequestAcceptance],
    estimate: float,
    paired: bool,
) -> Interval:
    """τ(base) − τ(cond) around `estimate` with its 95 % interval: `paired` (both answered the
    same prompts in order) leaves request i out of both runs, else the two variances add."""
    if len(base) < 2 or len(cond) < 2:
        return Interval(estimate, math.nan, math.nan, len(cond))
    hb, hc = _histogram_matrix(base), _histogram_matrix(cond)
    width = max(hb.shape[1], hc.shape[1])
    hb = np.pad(hb, ((0, 0), (0, width - hb.shape[1])))
    hc = np.pad(hc, ((0, 0), (0, width - hc.shape[1])))
    if paired and len(hb) == len(hc):
        loo = _tau_of(hb.sum(0) - hb) - _tau_of(hc.sum(0) - hc)
        low, high = jackknife_ends(np.asarray(estimate), loo)
    else:
        se = math.hypot(*(float(_jackknife_se(_tau_of(h.sum(0) - h))) for h in (hb, hc)))
        half = _t_quantile((1 + _LEVEL) / 2, min(len(hb), len(hc)) - 1) * se
        low, high = estimate - half, estimate + half
    return Interval(estimate, float(low), float(high), len(hc))


def position_intervals(requests: Sequence[RequestAcceptance]) -> pd.DataFrame:
    """Per draft position: vLLM's rate and the conditional rate, each with its 95 % interval."""
    rates = _interval(requests, _position_rates_of, (0.0, 1.0))
    cond = _interval(requests, _conditional_rates_of, (0.0, 1.0))
    return pd.DataFrame(
        {
            "position": range(len(rates)),
            vllm_names.STATS.per_position_rate: [i.estimate for i in rates],
            COLUMNS.rate_ci_low: [i.low for i in rates],
            COLUMNS.rate_ci_high: [i.high for i in rates],
            COLUMNS.conditional_rate: [i.estimate for i in cond],
            COLUMNS.conditional_ci_low: [i.low for i in cond],
            COLUMNS.conditional_ci_high: [i.high for i in cond],
        }
    )


def ranking(intervals: Mapping[str, Interval]) -> str:
    """A ranking sentence computed from intervals: 'a 3.6 [3.5, 3.7] > b ... (intervals
    overlap)'."""
    order = sorted(intervals.items(), key=lambda kv: -kv[1].estimate)
    parts = [f"{order[0][0]} {order[0][1]}"]
    for (_, prev), (name, cur) in zip(order, order[1:]):
        sign = ">" if prev.estimate > cur.estimate else "="
        parts.append(f"{sign} {name} {cur}")
    separated = [a.above(b) for (_, a), (_, b) in zip(order, order[1:])]
    if not all(i.bounded for i in intervals.values()):
        verdict = "no intervals (no per-request acceptance, or < 2 requests): not ranked"
    elif not any(separated):
        verdict = "every neighbouring pair of intervals overlaps: this run cannot rank them"
    elif all(separated):
        verdict = "no neighbouring intervals overlap: the order holds at this run's size"
    else:
        verdict = "some neighbouring intervals overlap: only the separated steps are ordered"
    return " ".join(parts) + f" ({verdict})"
