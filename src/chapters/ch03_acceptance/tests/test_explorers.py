"""chapters.ch03_acceptance.explorers: a run's acceptance browsed by k, temperature and task, and
your own prompt decoded and labelled token by token."""

from __future__ import annotations

import pandas as pd
import pytest

from chapters.ch03_acceptance.explorers import (
    _acceptance_state,
    _prompt_state,
    acceptance_explorer,
    acceptance_long_table,
)
from helpers.common.profiles import load_profile
from helpers.common.tables import COLUMNS
from helpers.common.vllm_names import STATS
from helpers.eagle3.decode import load_pair


def sweep_tables() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    row = {STATS.tau: 2.0, "tau_ci_low": 1.9, "tau_ci_high": 2.1}
    by_cat = pd.DataFrame([{COLUMNS.k: k, "category": c, **row} for k in (1, 3) for c in "ab"])
    by_k = pd.DataFrame([{COLUMNS.k: k, **row} for k in (1, 3)])
    by_t = pd.DataFrame(
        [
            {"temperature": t, STATS.tau: 3 - t, "tau_ci_low": 2.9 - t, "tau_ci_high": 3.1 - t}
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


def test_the_browser_follows_its_controls() -> None:
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
