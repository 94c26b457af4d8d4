"""chapters.ch06_moe.answer: published τ per source and release, τ at other k derived two ways,
c with its band over routing and graph mode, the outside check, k = 0 priced as measured, the
static config to paste and the answer's lines (the prediction and the choice of k are notebook
06's cells, src/chapters/ch06_moe/tests/test_notebook06_cells.py)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from chapters.ch06_moe import answer, lab, moe
from chapters.ch06_moe.tests.test_lab import format4
from helpers.common.paths import DATA_DIR
from helpers.common.tables import COLUMNS
from helpers.engine import compat


def records() -> dict[str, dict]:
    path = DATA_DIR / "published" / "real-pair-tau.json"
    return {r["id"]: r for r in json.loads(path.read_text())["records"]}


def test_only_the_profiles_release_gives_the_answers_tau() -> None:
    taus = answer.published_taus()
    assert set(taus.source) == {"moesd-ablation", "moesd-sweep", "moesd-pilot", "specbundle",
                                "sglang-cookbook"}  # fmt: skip
    for source in set(taus.source):
        ids = [i for i in records() if i.startswith(source)]
        assert all(records()[i]["release"] == answer._INSTRUCT for i in ids), source
    base = answer.published_taus(release="base")
    assert set(base.source) == {"speculators-610", "specforge-339"}
    assert "angelslim-163" not in set(base.source), "a tree's τ is no chain's"
    per = records()["moesd-ablation"]["per_position"]
    at = taus[taus.source == "moesd-ablation"].set_index(COLUMNS.k).tau
    assert at[3] == pytest.approx(1 + sum(per)) and sorted(at.index) == [1, 2, 3]
    bench = taus[(taus.source == "specbundle") & (taus[COLUMNS.k] == 5)]
    assert len(bench) == 7 and bench.tau.tolist() == list(
        records()["specbundle-k5"]["tau_by_subset"].values()
    )


def test_every_tau_record_says_where_when_and_how_it_was_read() -> None:
    for r in records().values():
        assert r["url"].startswith("https://") and r["date"] and r["read"], r["id"]
        assert r["release"] in (answer._INSTRUCT, "base"), r["id"]
        if r.get("per_position") and r["id"] != "speculators-610":
            assert 1 + sum(r["per_position"]) == pytest.approx(r["tau"], abs=0.01), r["id"]


def test_tau_at_other_k_is_derived_two_ways_and_labelled() -> None:
    taus = answer.published_taus()
    derived = answer.with_derived(taus, (1, 3, 5))
    sweep = derived[derived.source == "moesd-sweep"].set_index([COLUMNS.k, "how"]).tau
    tau3 = sweep.xs(3, level=0).iloc[0]
    one = sweep.xs(1, level=0)
    assert len(one) == 2 and all(h.startswith("derived") for h in one.index)
    alpha = one[[h for h in one.index if "α" in h][0]] - 1  # geometric: τ(1) = 1 + α
    assert 1 + alpha + alpha**2 + alpha**3 == pytest.approx(tau3, abs=1e-6)
    per = records()["moesd-ablation"]["per_position"]
    ratio = per[0] / sum(per)  # the one Instruct-2507 source that measured τ(1) and τ(3)
    assert one[[h for h in one.index if "ratio" in h or "r =" in h][0]] == pytest.approx(
        1 + ratio * (tau3 - 1), rel=1e-3
    )
    measured = derived[~derived.how.str.startswith("derived")]
    assert len(measured) == len(taus[taus[COLUMNS.k].isin((1, 3, 5))])


def test_the_real_routers_rho_is_the_union_it_read() -> None:
    trace = answer.real_router()
    assert trace["mean_union"] == pytest.approx(18.93, abs=0.01) and trace["window_size"] == 4
    assert trace["rho"] == pytest.approx(moe.correlation(trace["mean_union"], 128, 8, 4))
    assert 0.4 < trace["rho"] < 0.55


def test_c_bands_span_the_realistic_designs_and_the_graph_mode() -> None:
    record = lab.load_lab()
    bands = answer.c_bands(record)
    designs = lab.routing_table(record)
    designs = designs[designs.routing.isin(lab.REALISTIC)]
    for r in bands.itertuples():
        at = designs[
            (designs[COLUMNS.k] == getattr(r, COLUMNS.k)) & (designs.concurrency == r.concurrency)
        ]
        assert r.c == pytest.approx(at.measured_c.median())
        assert r.c_low <= at.measured_c.min() + 1e-12 and r.c_high >= at.measured_c.max() - 1e-12
    with_graphs = answer.c_bands(format4())
    assert with_graphs.graph_mode.any() and "other graph mode" in with_graphs.band_source.iloc[0]


def _runs() -> pd.DataFrame:
    base = {"hardware": "x", "engine": "y", "regime": "GPU-resident", "drafting": "chain"}
    rows = [
        base | {"id": "in", "batch": 8, "k": 3, "tau": 2.0, "speedup": 1.4},
        base | {"id": "out", "batch": 1, "k": 3, "tau": 2.0, "speedup": 0.5},
        base
        | {"id": "tree", "batch": 1, "k": None, "tau": 2.0, "speedup": 0.8, "drafting": "tree"},
        base
        | {
            "id": "offload",
            "batch": 50,
            "k": 3,
            "tau": 2.3,
            "speedup": 0.9,
            "regime": "CPU expert offload",
        },
        base
        | {
            "id": "no tau",
            "batch": None,
            "k": None,
            "tau": None,
            "speedup": 1.57,
            "drafting": "not stated",
        },
    ]
    return pd.DataFrame(rows)


def _bands() -> pd.DataFrame:
    return pd.DataFrame(
        [(3, 1, 1.6, 1.5, 1.7), (3, 8, 1.4, 1.3, 1.5)],
        columns=[COLUMNS.k, "concurrency", "c", "c_low", "c_high"],
    )


def test_the_outside_check_can_fail_and_says_why_it_cannot_compare() -> None:
    check = answer.outside_check(_runs(), _bands(), tolerance=0.0).set_index("id")
    assert check.covered["in"] and check.at_concurrency["in"] == 8
    assert check.predicted_low["in"] == pytest.approx(2.0 / 1.5)
    assert check.covered["out"] is False or not check.covered["out"]
    assert "tree" in check.not_comparable["tree"] and "offload" in check.not_comparable["offload"]
    assert check.not_comparable["no tau"] == "its batch, drafting or τ is not stated"
    wide = answer.outside_check(_runs(), _bands(), tolerance=0.75).set_index("id")
    assert wide.covered["out"], "a tolerance widens the band on both sides"
    lines = answer.outside_lines(check.reset_index())
    assert lines[0] == "the prediction covers 1 of 2 comparable public runs"
    assert any("out: measured 0.50x" in line and line.endswith("below") for line in lines)


def test_every_public_run_is_read_with_its_conditions() -> None:
    runs = answer.public_runs()
    assert runs.url.str.startswith("https://").all() and runs.date.notna().all()
    assert set(runs.release) == {answer._INSTRUCT, "base"}
    sb = runs.set_index("id").loc["specbundle-k3-mtbench"]
    assert (sb.batch, sb.k, sb.tau) == (8, 3, pytest.approx(2.4958, abs=1e-4))
    assert sb.speedup == pytest.approx(1.527, abs=1e-3)
    for needed in (
        "eagle-203",
        "specforge-339-bs1-3-1-4",
        "angelslim-163-bs64-4-4-16",
        "moesd-sweep-8000",
    ):
        assert needed in set(runs.id), needed


def test_k0_costs_what_the_record_measured_and_interpolates_in_log_concurrency() -> None:
    assert answer.k0_cost(2) == pytest.approx(1.0656)
    assert answer.k0_cost(189) == pytest.approx(1.2158)
    assert answer.k0_cost(1) == answer.k0_cost(2), "held below the lowest point"
    mid = math.exp((math.log(2) + math.log(189)) / 2)
    assert answer.k0_cost(int(round(mid))) == pytest.approx(1.1407, abs=2e-3)


def _prediction() -> pd.DataFrame:
    rows = [
        (1, 0, 1.0, 1.0, 1.0),
        (1, 3, 1.3, 0.9, 1.8),
        (64, 0, 1.0, 1.0, 1.0),
        (64, 3, 1.4, 1.1, 1.9),
    ]
    return pd.DataFrame(
        rows, columns=["concurrency", COLUMNS.k, "speedup", "speedup_low", "speedup_high"]
    )


def test_the_config_to_paste_is_a_static_k_and_plain_says_so() -> None:
    plain = answer.summary_lines(_prediction(), {64: {"k": 0, "cannot_tell": []}}, "v", "d")
    assert plain[-1] == 'at C = 64: LLM(model="v")'
    choice = {1: {"k": 3, "cannot_tell": [0]}, 64: {"k": 3, "cannot_tell": []}}
    said = answer.summary_lines(_prediction(), choice, "v", "d")
    assert (
        said[0]
        == "C = 1: k = 3, predicted 1.30x [0.90, 1.80]; cannot tell it from plain (PREDICTED, not measured)"
    )
    assert said[1].endswith("its band is clear (PREDICTED, not measured)")
    assert said[2].startswith("at C = 1, 64: vllm serve v --speculative-config '")
    assert said[3].startswith('at C = 1, 64: LLM(model="v", speculative_config={')
    assert '"num_speculative_tokens": 3' in said[3]
    assert "per_batch_size" not in "\n".join(said)
    plain = answer.summary_lines(_prediction(), {1: {"k": 0, "cannot_tell": [3]}}, "v", "d")
    assert (
        plain[0].startswith("C = 1: plain (no drafter)") and "(no --speculative-config)" in plain[1]
    )


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


def test_vllms_own_config_names_every_key_the_answer_pastes() -> None:
    said = answer.summary_lines(_prediction(), {1: {"k": 3, "cannot_tell": []}}, "v", "d")
    pasted = json.loads(said[1].split("--speculative-config ", 1)[1].strip("'"))
    assert set(pasted) <= compat.speculative_config_fields(), pasted
    assert "num_speculative_token" not in compat.speculative_config_fields()  # a typo is not one
