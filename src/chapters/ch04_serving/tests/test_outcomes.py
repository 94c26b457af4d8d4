"""04's outcome sentences flip with their tables: where spec/plain crosses 1, and the equal-speed
gain (the repo-wide rule: tests/test_outcomes_computed.py)."""

from __future__ import annotations

import pandas as pd

from chapters.ch04_serving import bench, interactivity


def _speedups(values: list[float]) -> pd.DataFrame:
    """spec/plain output tok/s by concurrency."""
    frame = pd.DataFrame({"concurrency": [1, 4, 16], "speedup": values, "repeats": 1})
    return frame.assign(speedup_min=frame.speedup, speedup_max=frame.speedup)


def test_the_crossing_is_where_the_table_crosses() -> None:
    assert "first falls below 1 at concurrency 16" in bench.crossing_statement(
        _speedups([1.5, 1.2, 0.8])
    )
    assert "first falls below 1 at concurrency 4" in bench.crossing_statement(
        _speedups([1.5, 0.9, 0.8])
    )
    assert "did not cross 1" in bench.crossing_statement(_speedups([1.5, 1.2, 1.1]))
    assert "below 1 at every concurrency" in bench.crossing_statement(_speedups([0.9, 0.8, 0.7]))


def _gains(gains: list[float]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Equal-speed gains at two per-user speeds, and the curves they were read from."""
    table = pd.DataFrame(
        {
            "per_user_tok_s": [40.0, 20.0],
            "measured": ["plain at concurrency 1", "plain at concurrency 4"],
            "gain": gains,
        }
    )
    curve = pd.DataFrame(
        {"mode": ["plain", "plain", "spec", "spec"], "per_user_tok_s": [20, 40, 25, 45]}
    )
    return table, curve


def test_the_equal_speed_gain_counts_what_the_table_holds() -> None:
    assert "more tokens/s at 2 of the 2" in interactivity.gain_statement(*_gains([1.4, 1.1]))
    assert "more tokens/s at 0 of the 2" in interactivity.gain_statement(*_gains([0.9, 0.7]))
    none = interactivity.gain_statement(pd.DataFrame(), _gains([1.0, 1.0])[1])
    assert "cannot compare them" in none
