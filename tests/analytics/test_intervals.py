"""helpers.analytics.intervals: request bootstrap, per-position and conditional rates, rankings."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.analytics.intervals import (
    Interval,
    conditional_rates_of,
    position_intervals,
    position_rates_of,
    ranking,
    resampled_histograms,
    spread,
    tau_interval,
    tau_of,
)
from helpers.common.counters import RequestAcceptance, acceptance_stats, counters_of


def _requests(histograms: list[tuple[int, ...]]) -> list[RequestAcceptance]:
    return [RequestAcceptance(h, 3 * sum(h)) for h in histograms]


def test_point_estimates_equal_vllm_formulas_on_pooled_counters() -> None:
    reqs = _requests([(1, 0, 2, 3), (0, 1, 0, 1), (2, 2, 1, 0)])
    stats = acceptance_stats(counters_of(reqs))
    tau = tau_interval(reqs)
    assert tau.estimate == pytest.approx(stats["spec_decode_acceptance_length"])
    table = position_intervals(reqs)
    assert table.spec_decode_per_position_acceptance_rate.tolist() == pytest.approx(
        stats["spec_decode_per_position_acceptance_rates"]
    )
    assert (table.rate_ci_low <= table.spec_decode_per_position_acceptance_rate).all()
    assert (table.spec_decode_per_position_acceptance_rate <= table.rate_ci_high).all()


def test_conditional_rate_divides_by_the_previous_position() -> None:
    hist = np.array([2, 2, 2, 4])  # steps: 10; >=1: 8, >=2: 6, >=3: 4
    assert position_rates_of(hist) == pytest.approx([0.8, 0.6, 0.4])
    assert conditional_rates_of(hist) == pytest.approx([0.8, 0.75, 4 / 6])
    assert tau_of(hist) == pytest.approx(1 + (2 + 4 + 12) / 10)


def test_interval_narrows_with_more_requests_and_is_reproducible() -> None:
    rng = np.random.default_rng(1)
    few = _requests([tuple(rng.multinomial(20, [0.2, 0.2, 0.2, 0.4])) for _ in range(4)])
    many = few * 16
    a, b = tau_interval(few), tau_interval(many)
    assert a.low <= a.estimate <= a.high
    assert (b.high - b.low) < (a.high - a.low) / 2
    assert tau_interval(few) == a
    assert resampled_histograms(few, samples=5).shape == (5, 4)


def test_identical_requests_have_a_zero_width_interval() -> None:
    t = tau_interval(_requests([(0, 0, 1, 3)] * 5))
    assert t.low == pytest.approx(t.high) == pytest.approx(t.estimate)


def test_ranking_states_overlap_from_the_intervals() -> None:
    wide = {"prose": Interval(3.6, 3.5, 3.7), "code": Interval(3.5, 3.4, 3.6)}
    assert ranking(wide).startswith("prose 3.60 [3.50, 3.70] > code 3.50 [3.40, 3.60]")
    assert "cannot rank" in ranking(wide)
    apart = {"a": Interval(1.2, 1.1, 1.3), "b": Interval(3.0, 2.9, 3.1)}
    assert ranking(apart).startswith("b 3.00") and "order holds" in ranking(apart)
    assert Interval(3, 2.9, 3.1).above(Interval(1, 0.9, 1.1))
    assert Interval(3, 2, 4).overlaps(Interval(2.5, 2.4, 2.6))


def test_spread() -> None:
    assert spread([3.0, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0}


def test_exceeds_uses_the_intervals_when_both_have_ends_else_the_estimates() -> None:
    nan = float("nan")
    hi, lo = Interval(3.0, 2.9, 3.1, 8), Interval(2.0, 1.9, 2.1, 8)
    assert hi.bounded and hi.exceeds(lo) and not lo.exceeds(hi)
    assert not Interval(3.0, 2.0, 3.5, 8).exceeds(Interval(2.5, 2.2, 2.8, 8))  # overlap
    no_ends = Interval(3.0, nan, nan, 8)
    assert not no_ends.bounded and not no_ends.above(lo) and no_ends.exceeds(lo)
    assert "not ranked" in ranking({"a": no_ends, "b": lo})
