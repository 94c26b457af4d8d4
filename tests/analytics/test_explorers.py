"""helpers.analytics.explorers: the state functions, and the widgets follow their controls."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from helpers.analytics.explorers import (
    CSS_CONTROL,
    CSS_EXPLORER,
    CSS_RESULT,
    _acceptance_state,
    _prompt_state,
    _speedup_state,
    _union_explorer,
    _union_state,
    acceptance_explorer,
    acceptance_long_table,
    speedup_explorer,
)
from helpers.analytics.moe import MoeShape
from helpers.analytics.speedup import LAB_FILE, lab_step_costs, published_points
from helpers.common.profiles import load_profile
from helpers.common.tables import K_COLUMN
from helpers.common.vllm_names import TAU
from helpers.eagle3.decode import load_pair
from tests.support import shape_named

TINY = MoeShape("tiny", 6, 64, 8, 2, 64, 4, 2, 16, 2048)


def lab() -> pd.DataFrame:
    return lab_step_costs(json.loads(LAB_FILE.read_text()))


def test_speedup_is_tau_over_c_and_pays_only_above_break_even() -> None:
    s = _speedup_state(2.5, 3, 1, 1.8).values
    assert s["speedup"] == pytest.approx(2.5 / 1.8) and s["break_even_tau"] == 1.8 and s["pays"]
    assert not _speedup_state(1.5, 3, 1, 1.8).values["pays"]
    assert _speedup_state(9.0, 3, 1, 1.0).values["tau"] == 4.0  # τ never exceeds k + 1


def test_speedup_reads_the_recorded_lab_and_published_points() -> None:
    table = lab()
    s = _speedup_state(2.5, 3, 1, 1.8, table, published_points()).values
    at = table[(table[K_COLUMN] == 3) & (table.concurrency == 1)]
    assert s["recorded_c"] == pytest.approx(at.measured_c.median())
    assert s["published_points"] >= 1


def test_union_grows_with_positions_and_correlation_shrinks_it() -> None:
    s30 = shape_named("qwen3-30b-a3b")
    one, four = (_union_state(s30, n).values for n in (1, 4))
    assert one["distinct_experts"] == pytest.approx(8) and four["distinct_experts"] > 8
    assert four["bytes_ratio"] > 1
    shared = _union_state(s30, 4, rho=1.0).values
    assert shared["distinct_experts"] == pytest.approx(8)


def sweep_tables() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    row = {TAU: 2.0, "tau_ci_low": 1.9, "tau_ci_high": 2.1}
    by_cat = pd.DataFrame([{K_COLUMN: k, "category": c, **row} for k in (1, 3) for c in "ab"])
    by_k = pd.DataFrame([{K_COLUMN: k, **row} for k in (1, 3)])
    by_t = pd.DataFrame(
        [
            {"temperature": t, TAU: 3 - t, "tau_ci_low": 2.9 - t, "tau_ci_high": 3.1 - t}
            for t in (0.0, 0.7)
        ]
    )
    return by_cat, by_k, by_t


def test_acceptance_browser_finds_measured_cells_and_names_the_others() -> None:
    table = acceptance_long_table(*sweep_tables(), main_k=3)
    assert _acceptance_state(table, 3, 0.7, "all").values["tau"] == pytest.approx(2.3)
    assert _acceptance_state(table, 1, 0.0, "a").values["measured"]
    missing = _acceptance_state(table, 1, 0.7, "a")
    assert not missing.values["measured"] and "not measured" in missing.summary


def test_widgets_follow_their_controls() -> None:
    ex = speedup_explorer(c=2.0)
    assert CSS_EXPLORER in ex.widget._dom_classes
    assert all(CSS_CONTROL in c._dom_classes for c in ex.controls.values())
    before = ex.result.value
    ex.controls["tau"].value = 3.5
    assert ex.result.value != before and ex.state.values["speedup"] == pytest.approx(1.75)
    ex.controls["k"].value = 1
    assert ex.controls["tau"].max == 2.0 and ex.state.values["tau"] <= 2.0
    assert CSS_RESULT in ex.result._dom_classes
    union = _union_explorer(TINY)
    union.controls["shape"].value = "qwen3-235b-a22b"
    assert union.state.values["shape"] == "qwen3-235b-a22b"
    browser = acceptance_explorer(acceptance_long_table(*sweep_tables(), main_k=3), k=3)
    browser.controls["temperature"].value = 0.7
    assert browser.state.values["tau"] == pytest.approx(2.3)


def test_your_own_prompt_labels_every_token_and_counts_like_vllm() -> None:
    pair = load_pair(load_profile("tiny"))
    s = _prompt_state(pair, "Write a JSON record for a cat named Tom.", 3, 24)
    v = s.values
    assert len(v["labels"]) == v["tokens"] and v["labels"][0] == "prefill"
    assert v["tau"] == pytest.approx(1 + v["accepted"] / v["rounds"])
    assert "accepted" in s.html or "correction" in s.html
