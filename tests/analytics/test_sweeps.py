"""Sweep tables and figures from synthetic counters (no engine): columns, values, CSVs, the CI switch."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from helpers.analytics import sweeps as sw
from helpers.common.ci import _CI_ENV_VAR
from helpers.common.counters import RequestAcceptance, SpecCounters, acceptance_stats, counters_of
from helpers.engine.runs import CategoryRun, pooled


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


def test_acceptance_vs_k_columns_values_and_intervals() -> None:
    df = sw._acceptance_vs_k(RUNS)
    assert list(df.columns) == [
        "num_speculative_tokens",
        *sw._SCALAR_KEYS,
        *sw._CI_KEYS,
        "acceptance_length_ceiling",
    ]
    assert list(df.num_speculative_tokens) == [1, 2, 3]
    total = pooled(RUNS[3])
    row = df[df.num_speculative_tokens == 3].iloc[0]
    assert row.spec_decode_acceptance_length == pytest.approx(
        1 + total.num_accepted_tokens / total.num_drafts
    )
    assert row.spec_decode_acceptance_rate == pytest.approx(
        100 * total.num_accepted_tokens / total.num_draft_tokens
    )
    assert row.tau_ci_low <= row.spec_decode_acceptance_length <= row.tau_ci_high
    assert row.n_requests == 12 and row.tau_ci_low < row.tau_ci_high
    assert (df.acceptance_length_ceiling == df.num_speculative_tokens + 1).all()


def test_per_position_is_long_and_tidy_with_conditional_rates() -> None:
    df = sw._per_position_vs_k(RUNS)
    assert list(df.columns[:3]) == [
        "num_speculative_tokens",
        "position",
        "spec_decode_per_position_acceptance_rate",
    ]
    assert {"rate_ci_low", "conditional_acceptance_rate", "conditional_ci_high"} <= set(df.columns)
    assert len(df) == 1 + 2 + 3
    k3 = df[df.num_speculative_tokens == 3]
    rates = acceptance_stats(pooled(RUNS[3]))["spec_decode_per_position_acceptance_rates"]
    assert k3.spec_decode_per_position_acceptance_rate.tolist() == pytest.approx(rates)
    assert k3.conditional_acceptance_rate.tolist() == pytest.approx(
        [rates[0], rates[1] / rates[0], rates[2] / rates[1]]
    )


def test_without_per_request_metrics_the_intervals_are_nan() -> None:
    run = CategoryRun([[1]], ["a"], 0.1, counters(3, 10, [9, 8, 7]))
    row = sw.acceptance_table({"x": run}, "run").iloc[0]
    assert row.spec_decode_acceptance_length == pytest.approx(3.4) and pd.isna(row.tau_ci_low)
    pos = sw._per_position_table({"x": run}, "run")
    assert pos.conditional_acceptance_rate.tolist() == pytest.approx([0.9, 8 / 9, 7 / 8])
    # the same columns as with per-request data (vLLM 0.26 has none), so tables read alike
    assert set(sw._POSITION_CI_COLUMNS) <= set(pos.columns) and pos.conditional_ci_low.isna().all()
    cond = sw.table_intervals(
        pos, "position", "conditional_acceptance_rate", "conditional_ci_low", "conditional_ci_high"
    )
    assert not cond["0"].bounded and cond["0"].estimate == pytest.approx(0.9)
    tau = sw.run_interval(run)
    assert tau.estimate == pytest.approx(3.4) and not tau.bounded and tau.n == 1


def test_by_category_has_every_k_and_category() -> None:
    df = sw._acceptance_by_category(RUNS)
    assert list(df.columns[:2]) == ["num_speculative_tokens", "category"]
    assert len(df) == 3 * 4
    k3 = df[df.num_speculative_tokens == 3].set_index("category").spec_decode_acceptance_length
    assert k3["structured"] > k3["creative"]


def test_temperature_table() -> None:
    df = sw._acceptance_vs_temperature(
        {
            0.0: CategoryRun([[1]], ["a"], 0.1, counters(3, 10, [9, 8, 7])),
            1.0: CategoryRun([[1]], ["a"], 0.1, counters(3, 10, [3, 1, 0])),
        },
        3,
    )
    assert list(df.columns[:2]) == ["temperature", "num_speculative_tokens"]
    assert df.spec_decode_acceptance_length.tolist() == pytest.approx([3.4, 1.4])


def test_zero_drafts_give_zero_not_an_error() -> None:
    df = sw.acceptance_table({"empty": CategoryRun([], [], 0.0)}, "run")
    assert df.spec_decode_acceptance_length.iloc[0] == 0.0


def test_throughput_table_speedup_range_and_implied_cost() -> None:
    def row(rate: float, low: float, high: float, tau: float) -> dict[str, float]:
        return {
            "output_tokens_per_s": rate,
            "tokens_per_s_min": low,
            "tokens_per_s_max": high,
            "spec_decode_acceptance_length": tau,
            "natural_output_tokens_per_s": rate / 2,
        }

    df = sw._throughput_vs_k({0: row(100, 90, 110, 1.0), 3: row(150, 140, 160, 3.0)})
    k3 = df[df.num_speculative_tokens == 3].iloc[0]
    assert k3.speedup_vs_plain == pytest.approx(1.5)
    assert k3.speedup_min == pytest.approx(140 / 110) and k3.speedup_max == pytest.approx(160 / 90)
    assert k3.natural_speedup_vs_plain == pytest.approx(1.5)
    assert k3.implied_relative_step_cost == pytest.approx(2.0)
    assert sw._best_k(df) == 3
    assert sw.best_k_sentence(df) == (
        "fastest k=3 150 tok/s [140, 160], then plain 100 tok/s [90, 110]: "
        "their ranges do not overlap"
    )
    close = sw._throughput_vs_k({0: row(100, 90, 145, 1.0), 3: row(150, 140, 160, 3.0)})
    assert sw.best_k_sentence(close).endswith("this run cannot tell them apart")
    assert (
        sw._best_k(
            pd.DataFrame({"num_speculative_tokens": [0, 3], "output_tokens_per_s": [200.0, 150.0]})
        )
        == 0
    )


def test_ci_switch_shrinks_only_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_CI_ENV_VAR, raising=False)
    plan = sw.sweep_plan(ks=[1, 2, 3], k=3, n_prompts=8, max_tokens=128, temperatures=None)
    assert plan.ks == (1, 2, 3) and plan.n_prompts == 8 and plan.max_tokens == 128
    assert plan.temperatures == sw._SweepPlan().temperatures
    assert plan.engines == {"acceptance": 3, "temperature": 1, "throughput": 4}
    monkeypatch.setenv(_CI_ENV_VAR, "true")
    ci = sw.sweep_plan(ks=[1, 2, 3], k=3, n_prompts=8, max_tokens=128)
    assert ci.n_prompts < 8 and ci.max_tokens < 128 and ci.ks == (1, 2, 3)
    monkeypatch.setenv(_CI_ENV_VAR, "0")
    assert sw.sweep_plan(n_prompts=8).n_prompts == 8


def test_main_k_must_be_swept() -> None:
    with pytest.raises(ValueError, match="main k"):
        sw.sweep_plan(ks=[1, 2], k=3)


def test_tau_ranking_comes_from_the_runs() -> None:
    sentence = sw.tau_ranking(RUNS[3])
    assert sentence.startswith("structured ") and "creative" in sentence
    bare = {"a": CategoryRun([[1]], ["a"], 0.1, counters(3, 10, [9, 8, 7]))}
    assert sw.tau_ranking(bare).startswith("no per-request acceptance")


def test_table_intervals_rebuild_the_intervals_of_a_table() -> None:
    iv = sw.table_intervals(sw._acceptance_vs_k(RUNS), "num_speculative_tokens")
    assert set(iv) == {"1", "2", "3"} and iv["3"].n == 12
    assert iv["3"].low <= iv["3"].estimate <= iv["3"].high
