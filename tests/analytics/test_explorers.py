"""helpers.analytics.explorers: the speed-up model's state, and the widget follows its controls."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from helpers.analytics.explorers import (
    _CSS_CONTROL,
    _CSS_EXPLORER,
    _CSS_RESULT,
    _speedup_state,
    speedup_explorer,
)
from helpers.analytics.speedup import LAB_FILE, lab_step_costs, published_points
from helpers.common.tables import COLUMNS


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
    at = table[(table[COLUMNS.k] == 3) & (table.concurrency == 1)]
    assert s["recorded_c"] == pytest.approx(at.measured_c.median())
    assert s["published_points"] >= 1


def test_the_widget_follows_its_controls() -> None:
    ex = speedup_explorer(c=2.0)
    assert _CSS_EXPLORER in ex.widget._dom_classes
    assert all(_CSS_CONTROL in c._dom_classes for c in ex.controls.values())
    before = ex.result.value
    ex.controls["tau"].value = 3.5
    assert ex.result.value != before and ex.state.values["speedup"] == pytest.approx(1.75)
    ex.controls["k"].value = 1
    assert ex.controls["tau"].max == 2.0 and ex.state.values["tau"] <= 2.0
    assert _CSS_RESULT in ex.result._dom_classes
