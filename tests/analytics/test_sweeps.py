"""Sweep tables and figures from synthetic counters (no engine): columns, values, CSVs, the CI switch."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers.analytics import sweeps as sw
from helpers.common.ci import CI_ENV_VAR
from helpers.common.counters import SpecCounters
from helpers.engine.runs import CategoryRun, pooled


def counters(k: int, drafts: int, per_pos: list[int]) -> SpecCounters:
    """Synthetic counters: drafts of k tokens with these accepted counts per position."""
    return SpecCounters(drafts, k * drafts, sum(per_pos), tuple(per_pos))


def runs_for(k: int) -> dict[str, CategoryRun]:
    """One fake run per category whose acceptance falls from structured to creative."""
    out = {}
    for i, cat in enumerate(("structured", "code", "prose", "creative")):
        per_pos = [max(0, 10 - 2 * i - 2 * j) for j in range(k)]
        out[cat] = CategoryRun([[1, 2]], ["ab"], 0.1, counters(k, 10, per_pos))
    return out


RUNS = {k: runs_for(k) for k in (1, 2, 3)}


def test_acceptance_vs_k_columns_and_values() -> None:
    df = sw.acceptance_vs_k(RUNS)
    assert list(df.columns) == [
        "num_speculative_tokens",
        *sw.SCALAR_KEYS,
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
    assert (df.acceptance_length_ceiling == df.num_speculative_tokens + 1).all()


def test_per_position_is_long_and_tidy() -> None:
    df = sw.per_position_vs_k(RUNS)
    assert list(df.columns) == [
        "num_speculative_tokens",
        "position",
        "spec_decode_per_position_acceptance_rate",
    ]
    assert len(df) == 1 + 2 + 3
    k3 = df[df.num_speculative_tokens == 3].spec_decode_per_position_acceptance_rate.tolist()
    assert k3 == pytest.approx([(10 + 8 + 6 + 4) / 40, (8 + 6 + 4 + 2) / 40, (6 + 4 + 2 + 0) / 40])


def test_by_category_has_every_k_and_category() -> None:
    df = sw.acceptance_by_category(RUNS)
    assert list(df.columns[:2]) == ["num_speculative_tokens", "category"]
    assert len(df) == 3 * 4
    k1 = df[df.num_speculative_tokens == 1].set_index("category").spec_decode_acceptance_length
    assert k1["structured"] == pytest.approx(2.0) and k1["creative"] == pytest.approx(1.4)


def test_temperature_table() -> None:
    df = sw.acceptance_vs_temperature(
        {0.0: counters(3, 10, [9, 8, 7]), 1.0: counters(3, 10, [3, 1, 0])}, 3
    )
    assert list(df.columns[:2]) == ["temperature", "num_speculative_tokens"]
    assert df.spec_decode_acceptance_length.tolist() == pytest.approx([3.4, 1.4])


def test_zero_drafts_give_zero_not_an_error() -> None:
    df = sw.acceptance_table({"empty": SpecCounters()}, "run")
    assert df.spec_decode_acceptance_length.iloc[0] == 0.0


def test_throughput_table_speedup_and_implied_cost() -> None:
    rows = {
        0: {"output_tokens_per_s": 100.0, "spec_decode_acceptance_length": 1.0},
        3: {"output_tokens_per_s": 150.0, "spec_decode_acceptance_length": 3.0},
    }
    df = sw.throughput_vs_k(rows)
    k3 = df[df.num_speculative_tokens == 3].iloc[0]
    assert k3.speedup_vs_plain == pytest.approx(1.5)
    assert k3.implied_relative_step_cost == pytest.approx(2.0)
    assert sw.best_k(df) == 3
    assert (
        sw.best_k(
            pd.DataFrame({"num_speculative_tokens": [0, 3], "output_tokens_per_s": [200.0, 150.0]})
        )
        == 0
    )


def test_ci_switch_shrinks_only_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CI_ENV_VAR, raising=False)
    plan = sw.sweep_plan(ks=[1, 2, 3], k=3, n_prompts=8, max_tokens=128, temperatures=None)
    assert plan.ks == (1, 2, 3) and plan.n_prompts == 8 and plan.max_tokens == 128
    assert plan.temperatures == sw.SweepPlan().temperatures and plan.engines == 4
    monkeypatch.setenv(CI_ENV_VAR, "true")
    ci = sw.sweep_plan(ks=[1, 2, 3], k=3, n_prompts=8, max_tokens=128)
    assert ci.n_prompts < 8 and ci.max_tokens < 128 and ci.ks == (1, 2, 3)
    monkeypatch.setenv(CI_ENV_VAR, "0")
    assert sw.sweep_plan(n_prompts=8).n_prompts == 8


def test_main_k_must_be_swept() -> None:
    with pytest.raises(ValueError, match="main k"):
        sw.sweep_plan(ks=[1, 2], k=3)
