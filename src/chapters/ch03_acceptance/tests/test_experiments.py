"""chapters.ch03_acceptance.experiments: the sweep tables over k, task and temperature, the
throughput table and the best-k sentence, the plan and the CI switch, from synthetic counters."""

from __future__ import annotations

import pandas as pd
import pytest

from chapters.ch03_acceptance import experiments as ex
from helpers.analytics import sweeps as sw
from helpers.common.ci import _CI_ENV_VAR
from helpers.common.counters import acceptance_stats
from helpers.engine.runs import CategoryRun, pooled
from tests.analytics.test_sweeps import RUNS, counters


def test_acceptance_vs_k_columns_values_and_intervals() -> None:
    df = ex._acceptance_vs_k(RUNS)
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
    df = ex._per_position_vs_k(RUNS)
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


def test_by_category_has_every_k_and_category() -> None:
    df = ex._acceptance_by_category(RUNS)
    assert list(df.columns[:2]) == ["num_speculative_tokens", "category"]
    assert len(df) == 3 * 4
    k3 = df[df.num_speculative_tokens == 3].set_index("category").spec_decode_acceptance_length
    assert k3["structured"] > k3["creative"]


def test_temperature_table() -> None:
    df = ex._acceptance_vs_temperature(
        {
            0.0: CategoryRun([[1]], ["a"], 0.1, counters(3, 10, [9, 8, 7])),
            1.0: CategoryRun([[1]], ["a"], 0.1, counters(3, 10, [3, 1, 0])),
        },
        3,
    )
    assert list(df.columns[:2]) == ["temperature", "num_speculative_tokens"]
    assert df.spec_decode_acceptance_length.tolist() == pytest.approx([3.4, 1.4])


def test_throughput_table_speedup_range_and_implied_cost() -> None:
    def row(rate: float, low: float, high: float, tau: float) -> dict[str, float]:
        return {
            "output_tokens_per_s": rate,
            "tokens_per_s_min": low,
            "tokens_per_s_max": high,
            "spec_decode_acceptance_length": tau,
            "natural_output_tokens_per_s": rate / 2,
        }

    df = ex._throughput_vs_k({0: row(100, 90, 110, 1.0), 3: row(150, 140, 160, 3.0)})
    k3 = df[df.num_speculative_tokens == 3].iloc[0]
    assert k3.speedup_vs_plain == pytest.approx(1.5)
    assert k3.speedup_min == pytest.approx(140 / 110) and k3.speedup_max == pytest.approx(160 / 90)
    assert k3.natural_speedup_vs_plain == pytest.approx(1.5)
    assert k3.implied_relative_step_cost == pytest.approx(2.0)
    assert ex.best_k_sentence(df) == (
        "fastest k=3 150 tok/s [140, 160], then plain 100 tok/s [90, 110]: "
        "their ranges do not overlap"
    )
    close = ex._throughput_vs_k({0: row(100, 90, 145, 1.0), 3: row(150, 140, 160, 3.0)})
    assert ex.best_k_sentence(close).endswith("this run cannot tell them apart")
    plain_wins = pd.DataFrame(
        {"num_speculative_tokens": [0, 3], "output_tokens_per_s": [200.0, 150.0]}
    )
    assert ex.best_k_sentence(plain_wins).startswith("fastest plain 200 tok/s")


def test_ci_switch_shrinks_only_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_CI_ENV_VAR, raising=False)
    plan = ex.sweep_plan(ks=[1, 2, 3], k=3, n_prompts=8, max_tokens=128, temperatures=None)
    assert plan.ks == (1, 2, 3) and plan.n_prompts == 8 and plan.max_tokens == 128
    assert plan.temperatures == ex._SweepPlan().temperatures
    assert plan.engines == {"acceptance": 3, "temperature": 1, "throughput": 4}
    monkeypatch.setenv(_CI_ENV_VAR, "true")
    ci = ex.sweep_plan(ks=[1, 2, 3], k=3, n_prompts=8, max_tokens=128)
    assert ci.n_prompts < 8 and ci.max_tokens < 128 and ci.ks == (1, 2, 3)
    monkeypatch.setenv(_CI_ENV_VAR, "0")
    assert ex.sweep_plan(n_prompts=8).n_prompts == 8


def test_main_k_must_be_swept() -> None:
    with pytest.raises(ValueError, match="main k"):
        ex.sweep_plan(ks=[1, 2], k=3)


def test_table_intervals_rebuild_the_intervals_of_a_table() -> None:
    iv = sw.table_intervals(ex._acceptance_vs_k(RUNS), "num_speculative_tokens")
    assert set(iv) == {"1", "2", "3"} and iv["3"].n == 12
    assert iv["3"].low <= iv["3"].estimate <= iv["3"].high


def test_per_position_table_without_per_request_metrics_has_empty_intervals() -> None:
    run = CategoryRun([[1]], ["a"], 0.1, counters(3, 10, [9, 8, 7]))
    pos = ex._per_position_table({"x": run}, "run")
    assert pos.conditional_acceptance_rate.tolist() == pytest.approx([0.9, 8 / 9, 7 / 8])
    # the same columns as with per-request data (vLLM 0.26 has none), so tables read alike
    assert set(ex._POSITION_CI_COLUMNS) <= set(pos.columns) and pos.conditional_ci_low.isna().all()
