"""Sweep tables and figures from synthetic counters (no engine): columns, values, CSVs, the CI switch."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from helpers.analytics import sweeps as sw
from helpers.common.counters import RequestAcceptance, SpecCounters, counters_of
from helpers.engine.runs import CategoryRun


def counters(k: int, drafts: int, per_pos: list[int]) -> SpecCounters:
    """Synthetic counters: drafts of k tokens with these accepted counts per position."""
    return SpecCounters(drafts, k * drafts, sum(per_pos), tuple(per_pos))


def requests(k: int, level: int) -> list[RequestAcceptance]:
    """Three synthetic requests at k; higher `level` accepts more drafts per step."""
    return [
        RequestAcceptance(tuple(max(0, 4 - abs(j - level - r)) for j in range(k + 1)), 0)
        for r in range(3)
    ]


def run_of(reqs: list[RequestAcceptance]) -> CategoryRun:
    """A fake run whose counters are exactly its requests pooled (as vLLM's are)."""
    c = counters_of(reqs)
    k = len(reqs[0].histogram) - 1
    return CategoryRun(
        [[1, 2]] * len(reqs),
        ["ab"] * len(reqs),
        0.1,
        replace(c, num_draft_tokens=k * c.num_drafts),
        requests=reqs,
    )


def runs_for(k: int) -> dict[str, CategoryRun]:
    """One fake run per category whose acceptance falls from structured to creative."""
    cats = ("structured", "code", "prose", "creative")
    return {cat: run_of(requests(k, 3 - i)) for i, cat in enumerate(cats)}


RUNS = {k: runs_for(k) for k in (1, 2, 3)}


def test_without_per_request_metrics_the_intervals_are_nan() -> None:
    run = CategoryRun([[1]], ["a"], 0.1, counters(3, 10, [9, 8, 7]))
    row = sw.acceptance_table({"x": run}, "run").iloc[0]
    assert row.spec_decode_acceptance_length == pytest.approx(3.4) and pd.isna(row.tau_ci_low)
    nan = float("nan")
    pos = pd.DataFrame(
        {
            "position": [0, 1],
            "conditional_acceptance_rate": [0.9, 8 / 9],
            "conditional_ci_low": [nan, nan],
            "conditional_ci_high": [nan, nan],
        }
    )
    cond = sw.table_intervals(
        pos, "position", "conditional_acceptance_rate", "conditional_ci_low", "conditional_ci_high"
    )
    assert not cond["0"].bounded and cond["0"].estimate == pytest.approx(0.9)


def test_zero_drafts_give_zero_not_an_error() -> None:
    df = sw.acceptance_table({"empty": CategoryRun([], [], 0.0)}, "run")
    assert df.spec_decode_acceptance_length.iloc[0] == 0.0


def test_tau_ranking_comes_from_the_runs() -> None:
    sentence = sw.tau_ranking(RUNS[3])
    assert sentence.startswith("structured ") and "creative" in sentence
    bare = {"a": CategoryRun([[1]], ["a"], 0.1, counters(3, 10, [9, 8, 7]))}
    assert sw.tau_ranking(bare).startswith("no per-request acceptance")
