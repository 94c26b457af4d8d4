"""helpers.experiments: the pure parts (the engine parts run in test_tiny_pair.py)."""

from __future__ import annotations

from helpers.common.counters import SpecCounters, acceptance_stats
from helpers.engine.runs import CategoryRun, lossless_check, pooled


def test_lossless_check_finds_first_difference() -> None:
    rep = lossless_check([[1, 2, 3], [4, 5, 6], [7, 8]], [[1, 2, 3], [4, 9, 6], [7, 8, 9]])
    assert (rep.identical, rep.total, rep.first_differences) == (1, 3, [1, 2])
    assert not rep.all_identical and lossless_check([[1]], [[1]]).all_identical


def test_pooled_counts_not_ratios() -> None:
    runs = {
        "a": CategoryRun([], [], 0.0, SpecCounters(1, 3, 3, (1, 1, 1))),
        "b": CategoryRun([], [], 0.0, SpecCounters(3, 9, 0, (0, 0, 0))),
    }
    assert acceptance_stats(pooled(runs))["spec_decode_acceptance_length"] == 1 + 3 / 4
