"""chapters.ch06_moe.answer: published τ per source, k = 0 priced as measured, the schedule to
paste and the answer's lines (the prediction and PR #49163's choice of k are notebook 06's cells,
tests/chapters/ch06_moe/test_notebook06_cells.py)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from chapters.ch06_moe import answer
from helpers.common.paths import DATA_DIR
from helpers.common.tables import COLUMNS


def test_published_chains_give_tau_at_every_k_they_cover() -> None:
    taus = answer.published_taus("Qwen3-30B-A3B")
    record = {
        r["id"]: r
        for r in json.loads((DATA_DIR / "published" / "real-pair-tau.json").read_text())["records"]
    }
    per = record["speculators-610"]["per_position"]
    spec = taus[taus.source == "speculators-610"].set_index(COLUMNS.k).tau
    assert spec[3] == pytest.approx(1 + sum(per[:3])) and sorted(spec.index) == [1, 2, 3, 4, 5]
    assert taus[taus.source == "specforge-339"][COLUMNS.k].tolist() == [3]
    assert "angelslim-163" not in set(taus.source), "a tree's τ is no chain's"
    assert answer.published_taus("Qwen3-235B-A22B").empty or "nebius-235b" not in set(taus.source)


def test_k0_costs_what_the_record_measured_and_interpolates_in_log_concurrency() -> None:
    assert answer.k0_cost(2) == pytest.approx(1.0656)
    assert answer.k0_cost(189) == pytest.approx(1.2158)
    assert answer.k0_cost(1) == answer.k0_cost(2), "held below the lowest point"
    mid = math.exp((math.log(2) + math.log(189)) / 2)
    assert answer.k0_cost(int(round(mid))) == pytest.approx(1.1407, abs=2e-3)


def _costs() -> pd.DataFrame:
    rows = [
        (1, 1, 1.4, 1.3, 1.5),
        (1, 3, 1.8, 1.7, 1.9),
        (64, 1, 1.05, 1.0, 1.1),
        (64, 3, 1.12, 1.1, 1.15),
    ]
    return pd.DataFrame(rows, columns=["concurrency", COLUMNS.k, "c", "c_low", "c_high"])


def _taus() -> pd.DataFrame:
    return pd.DataFrame({"source": ["a", "a", "b"], COLUMNS.k: [1, 3, 3], "tau": [1.6, 2.0, 1.8]})


def predict(costs: pd.DataFrame, taus: pd.DataFrame) -> pd.DataFrame:
    """Notebook 06's prediction (its cell pred1)."""
    from tests.chapters.ch06_moe.test_notebook06_cells import predict as in_cells

    return in_cells(costs, taus)


def test_the_config_to_paste_keeps_k0_ranges_and_says_when_nothing_pays() -> None:
    config = answer.speculative_config("d", {1: 3, 16: 3, 64: 0})
    assert config["num_speculative_tokens"] == 3
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 16, 3], [17, 64, 0]]
    nothing = answer.speculative_config("d", {1: 0, 64: 0})
    assert nothing == {}
    p = predict(_costs(), _taus())
    said = answer.summary_lines(p, {1: 0, 64: 0}, nothing)
    assert said[-1].startswith("no k pays") and "PREDICTED" in said[0]


def test_literature_records_say_where_they_come_from() -> None:
    lit = answer.literature()
    assert {
        "MoE method or analysis",
        "reported speed-up",
        "reported slowdown",
        "other drafter",
    } <= set(lit.role)
    assert lit.url.str.startswith("https://").all() and lit.date.notna().all()
    for name in ("MoESD", "Cascade", "EVICT", "Cohere", "SafeAILab/EAGLE #203"):
        assert lit.source.str.contains(name, regex=False).any(), name
    unverified = lit[~lit.verified.astype(bool)]
    assert (unverified.source == "Cohere blog").all()  # numbers seen only in a summary, labelled
