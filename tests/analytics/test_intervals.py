"""helpers.analytics.intervals: the jackknife t-interval over requests (and why not a percentile
bootstrap at small n), per-position and conditional rates, rankings."""

from __future__ import annotations

import math

import numpy as np
import pytest

from helpers.analytics.intervals import (
    METHOD,
    Interval,
    _conditional_rates_of,
    _leave_one_out,
    _position_rates_of,
    _t_quantile,
    _tau_of,
    position_intervals,
    ranking,
    tau_difference,
    tau_interval,
)
from helpers.common.counters import RequestAcceptance, acceptance_stats, counters_of

K = 3


def _requests(histograms: list[tuple[int, ...]]) -> list[RequestAcceptance]:
    return [RequestAcceptance(h, K * sum(h)) for h in histograms]


def _simulated(n: int, rng: np.random.Generator) -> list[RequestAcceptance]:
    """Requests like the tiny pair's at k = 3: each has its own acceptance probability (a drafter
    fits some answers better than others) and 8-30 verify steps; a step accepts drafts while each
    is accepted (a truncated geometric count)."""
    alpha = rng.beta(6.0, 1.5, size=n)
    steps = rng.integers(8, 30, size=n)
    out = []
    for a, s in zip(alpha, steps):
        accepted = np.cumprod(rng.random((s, K)) < a, axis=1).sum(1)
        out.append(RequestAcceptance(tuple(np.bincount(accepted, minlength=K + 1)), K * int(s)))
    return out


def _percentile_bootstrap(requests, rng, samples: int = 1000) -> tuple[float, float]:
    """What the workbook used before: resample requests, 2.5 % and 97.5 % quantiles of τ."""
    h = np.array([r.histogram for r in requests])
    w = rng.multinomial(len(h), np.full(len(h), 1 / len(h)), size=samples)
    lo, hi = np.nanquantile(_tau_of(w @ h), [0.025, 0.975])
    return float(lo), float(hi)


def test_the_t_quantile_matches_the_tables() -> None:
    for df, table in ((1, 12.706), (2, 4.303), (3, 3.182), (15, 2.131), (120, 1.980)):
        assert _t_quantile(0.975, df) == pytest.approx(table, abs=2e-3), df
    with pytest.raises(ValueError, match="0.5 < p < 1"):
        _t_quantile(0.975, 0)


def test_coverage_at_small_n_jackknife_t_near_nominal_percentile_bootstrap_too_narrow() -> None:
    """The reason for the method: how often each interval covers the true τ, by simulation."""
    rng = np.random.default_rng(0)
    population = counters_of(_simulated(20_000, rng))
    true_tau = acceptance_stats(population)["spec_decode_acceptance_length"]
    reps = 300
    for n, jack_floor, boot_ceiling in ((4, 0.89, 0.88), (16, 0.90, None)):
        jack = boot = 0
        for _ in range(reps):
            reqs = _simulated(n, rng)
            iv = tau_interval(reqs)
            jack += iv.low <= true_tau <= iv.high
            lo, hi = _percentile_bootstrap(reqs, rng)
            boot += lo <= true_tau <= hi
        assert jack / reps >= jack_floor, (n, jack / reps)
        assert jack / reps > boot / reps, (n, jack / reps, boot / reps)
        if boot_ceiling is not None:  # at n = 4 the bootstrap's "95 %" covers far less
            assert boot / reps < boot_ceiling, (n, boot / reps)


def test_point_estimates_equal_vllm_formulas_on_pooled_counters() -> None:
    reqs = _requests([(1, 0, 2, 3), (0, 1, 0, 1), (2, 2, 1, 0)])
    stats = acceptance_stats(counters_of(reqs))
    tau = tau_interval(reqs)
    assert tau.estimate == pytest.approx(stats["spec_decode_acceptance_length"])
    assert 1.0 <= tau.low <= tau.estimate <= tau.high <= K + 1
    table = position_intervals(reqs)
    assert table.spec_decode_per_position_acceptance_rate.tolist() == pytest.approx(
        stats["spec_decode_per_position_acceptance_rates"]
    )
    assert (table.rate_ci_low <= table.spec_decode_per_position_acceptance_rate).all()
    assert (table.spec_decode_per_position_acceptance_rate <= table.rate_ci_high).all()
    assert (table.rate_ci_low >= 0).all() and (table.conditional_ci_high <= 1).all()


def test_the_interval_is_the_jackknife_standard_error_times_t() -> None:
    reqs = _requests([(1, 0, 2, 3), (0, 1, 0, 1), (2, 2, 1, 0), (0, 0, 1, 5)])
    loo = _tau_of(_leave_one_out(reqs))
    assert loo[0] == pytest.approx(_tau_of(np.array([2, 3, 2, 6])))  # requests 2-4 summed
    se = math.sqrt(3 / 4 * ((loo - loo.mean()) ** 2).sum())
    iv = tau_interval(reqs)
    assert iv.estimate - iv.low == pytest.approx(_t_quantile(0.975, 3) * se)
    assert iv.high == K + 1  # clipped: τ cannot exceed k + 1
    assert iv.n == 4 and "jackknife" in METHOD


def test_conditional_rate_divides_by_the_previous_position() -> None:
    hist = np.array([2, 2, 2, 4])  # steps: 10; >=1: 8, >=2: 6, >=3: 4
    assert _position_rates_of(hist) == pytest.approx([0.8, 0.6, 0.4])
    assert _conditional_rates_of(hist) == pytest.approx([0.8, 0.75, 4 / 6])
    assert _tau_of(hist) == pytest.approx(1 + (2 + 4 + 12) / 10)


def test_interval_narrows_with_more_requests_and_is_deterministic() -> None:
    rng = np.random.default_rng(1)
    few = _simulated(4, rng)
    many = few * 16
    a, b = tau_interval(few), tau_interval(many)
    assert a.low <= a.estimate <= a.high
    assert (b.high - b.low) < (a.high - a.low) / 2
    assert tau_interval(few) == a


def test_identical_requests_have_a_zero_width_interval_and_one_request_none() -> None:
    t = tau_interval(_requests([(0, 0, 1, 3)] * 5))
    assert t.low == pytest.approx(t.high) == pytest.approx(t.estimate)
    one = tau_interval(_requests([(0, 0, 1, 3)]))
    assert not one.bounded and one.estimate == pytest.approx(1 + 11 / 4)


def test_ranking_states_overlap_from_the_intervals() -> None:
    wide = {"prose": Interval(3.6, 3.5, 3.7), "code": Interval(3.5, 3.4, 3.6)}
    assert ranking(wide).startswith("prose 3.60 [3.50, 3.70] > code 3.50 [3.40, 3.60]")
    assert "cannot rank" in ranking(wide)
    apart = {"a": Interval(1.2, 1.1, 1.3), "b": Interval(3.0, 2.9, 3.1)}
    assert ranking(apart).startswith("b 3.00") and "order holds" in ranking(apart)
    assert Interval(3, 2.9, 3.1).above(Interval(1, 0.9, 1.1))
    assert Interval(3, 2, 4).overlaps(Interval(2.5, 2.4, 2.6))


def test_exceeds_uses_the_intervals_when_both_have_ends_else_the_estimates() -> None:
    nan = float("nan")
    hi, lo = Interval(3.0, 2.9, 3.1, 8), Interval(2.0, 1.9, 2.1, 8)
    assert hi.bounded and hi.exceeds(lo) and not lo.exceeds(hi)
    assert not Interval(3.0, 2.0, 3.5, 8).exceeds(Interval(2.5, 2.2, 2.8, 8))  # overlap
    no_ends = Interval(3.0, nan, nan, 8)
    assert not no_ends.bounded and not no_ends.above(lo) and no_ends.exceeds(lo)
    assert "not ranked" in ranking({"a": no_ends, "b": lo})


def test_tau_difference_pairs_requests_or_adds_the_variances() -> None:
    base = _requests([(0, 1, 2, 7), (1, 1, 1, 6), (0, 0, 3, 5), (0, 2, 2, 6)])
    cond = _requests([(6, 2, 1, 1), (5, 3, 1, 0), (7, 1, 1, 1), (6, 2, 2, 0)])
    paired = tau_difference(base, cond, 1.5, paired=True)
    unpaired = tau_difference(base, cond, 1.5, paired=False)
    assert paired.estimate == unpaired.estimate == 1.5 and paired.n == unpaired.n == 4
    assert paired.low < 1.5 < paired.high and unpaired.low < 1.5 < unpaired.high
    assert paired.high - paired.low != pytest.approx(unpaired.high - unpaired.low)
    assert not tau_difference(base[:1], cond, 1.0, paired=True).bounded
