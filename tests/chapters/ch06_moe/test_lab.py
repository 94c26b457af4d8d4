"""chapters.ch06_moe.lab: the MoE lab's record read, old format and new, the bandwidth each plain
step reached, and the band a step model (notebook 06's fit) puts on c."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pandas as pd
import pytest

from chapters.ch06_moe import lab, moe
from helpers.analytics import speedup
from helpers.common.paths import REPO_ROOT
from helpers.common.tables import COLUMNS
from tests.chapters.ch06_moe.test_notebook06_cells import fitted_model


def shipped() -> dict:
    return lab.load_lab()


def test_the_shipped_lab_keeps_its_provenance() -> None:
    # Provenance travels with the numbers: where, what stack, which command, which caveats.
    assert {"gpu", "vllm", "machine", "command", "workbook", "caveats"} <= set(shipped())


def test_load_lab_wants_provenance(tmp_path) -> None:
    bare = tmp_path / "bare.json"
    bare.write_text('{"rows": []}')
    with pytest.raises(ValueError, match="provenance"):
        lab.load_lab(bare)


def test_cells_of_a_record_without_routing_use_the_independent_union() -> None:
    record = shipped()
    df = lab.cells(record)
    assert len(df) == len(speedup.trusted_rows(record))
    if "routing" not in record["rows"][0]:
        assert (df.union_source == "independent (expected)").all()
        plain = df[df[COLUMNS.k] == 0].set_index("concurrency")
        assert plain.union[4] == pytest.approx(moe.independent_union(128, 8, 4))
    assert (df.achieved_tb_s == df.gb_per_step / df.step_ms).all()
    shape, context = lab.lab_shape(record), lab.lab_context(record)
    row = df.iloc[-1]
    assert row.gb_per_step == pytest.approx(
        moe.step_bytes(shape, row.concurrency, row.union, context, row[COLUMNS.k]) / 1e9
    )


def test_plain_steps_stay_below_the_gpus_peak() -> None:
    table = lab.plain_bandwidth(shipped())
    assert list(table.concurrency) == sorted(table.concurrency)
    assert (table.share_of_peak > 0).all() and (table.share_of_peak < 1).all(), table


def routing_record() -> dict:
    """A format-2 record in miniature: two designs, plain and k = 3."""
    record = copy.deepcopy(shipped())
    rows = []
    for design, union_1, union_4, ms in (
        (lab.AS_LOADED, 8.0, 29.0, 4.0),
        ("rho 0.5", 8.0, 18.0, 4.0),
    ):
        rows.append(
            {
                "k": 0,
                "tau_target": None,
                "concurrency": 1,
                "routing": design,
                "tok_s": 1e3 / ms,
                "steps_per_s": 1e3 / ms,
                "step_ms": ms,
                "tau": 1.0,
                "batch_union_1": union_1,
                "rho_4": 0.5 if design != lab.AS_LOADED else 0.0,
                "effective_experts": 120.0,
            }
        )
        spec_ms = ms * union_4 / 16
        rows.append({"k": 3, "tau_target": 2.5, "concurrency": 1, "routing": design,
                     "tok_s": 2.5e3 / spec_ms, "steps_per_s": 1e3 / spec_ms, "step_ms": spec_ms,
                     "tau": 2.5, "batch_union_4": union_4})  # fmt: skip
    record["rows"] = rows
    return record


def test_routing_table_sets_designs_side_by_side() -> None:
    table = lab.routing_table(routing_record(), 3)
    assert list(table.routing) == [lab.AS_LOADED, "rho 0.5"]
    assert table.measured_c.tolist() == pytest.approx([29 / 16, 18 / 16])
    assert (table.spec_union < 29.5).all() and table.rho_4.iloc[1] == 0.5
    cells = lab.cells(routing_record())
    assert (cells.union_source == "read back").all()


def test_answer_table_bands_the_measured_c() -> None:
    record = shipped()
    answer = lab.answer_table(record, fitted_model(record), 0.4)
    assert (answer.c_low <= answer.c).all() and (answer.c <= answer.c_high).all()
    measured = (
        speedup.lab_step_costs(record).groupby([COLUMNS.k, "concurrency"]).measured_c.median()
    )
    assert answer.set_index([COLUMNS.k, "concurrency"]).c.tolist() == pytest.approx(
        measured.tolist()
    )


def test_without_designs_the_band_is_the_step_models_move_to_rho() -> None:
    record = {**shipped(), "rows": [r for r in shipped()["rows"] if r.get("routing", lab.AS_LOADED)
                                    == lab.AS_LOADED]}  # fmt: skip
    bytes_only = lab.answer_table(record, lambda k, conc, gb: gb, 0.4)
    assert (bytes_only.band_source == "fitted model, rho 0 to 0.40").all()
    # correlated routing reads fewer experts: c can only fall, so the band lies below c
    assert (bytes_only.c_low < bytes_only.c).all() and (bytes_only.c_high == bytes_only.c).all()


def test_answer_table_bands_with_measured_designs() -> None:
    record = routing_record()
    answer = lab.answer_table(record, fitted_model(record), 0.4)
    row = answer.iloc[0]
    assert row.band_source == "routing designs, measured"
    assert (row.c_low, row.c_high) == pytest.approx((18 / 16, 29 / 16))


def _old_rows() -> list[dict]:
    """A format-2 engine: as loaded at τ 2.5 and 2.0, a design, then as loaded at 3.0 (after it)."""
    row = {"k": 3, "concurrency": 1, "tok_s": 1.0, "steps_per_s": 1.0, "step_ms": 1.0}
    order = [(lab.AS_LOADED, 2.5), (lab.AS_LOADED, 2.0), ("zipf 1", 2.5), (lab.AS_LOADED, 3.0)]
    plain = {**row, "k": 0, "tau_target": None, "routing": lab.AS_LOADED}
    return [plain] + [row | {"routing": r, "tau_target": t} for r, t in order]


def test_an_old_record_keeps_as_loaded_cells_of_the_first_block_only() -> None:
    kept = speedup.trusted_rows({"format": 2, "rows": _old_rows()})
    assert [(r["routing"], r["tau_target"]) for r in kept[1:]] == [
        (lab.AS_LOADED, 2.5), (lab.AS_LOADED, 2.0), ("zipf 1", 2.5)
    ]  # fmt: skip
    # the shipped record: its k = 3 tail after the designs carries the Zipf design's signature
    rows = speedup.trusted_rows(shipped())
    assert {r["tau_target"] for r in rows if r["k"] == 3 and r["routing"] == lab.AS_LOADED} == {
        2.5, 2.0
    }  # fmt: skip


def test_a_new_record_keeps_the_cells_that_read_back_their_label() -> None:
    rows = [r | {"routing_read_back": r["routing"]} for r in _old_rows()]
    rows[-1]["routing_read_back"] = "zipf 1"
    kept = speedup.trusted_rows({"format": 3, "rows": rows})
    assert len(kept) == len(rows) - 1 and kept[-1]["routing"] == "zipf 1"


def test_c_table_is_the_median_of_the_cells_and_their_range() -> None:
    record = copy.deepcopy(shipped())
    table = lab.c_table(record).set_index([COLUMNS.k, "concurrency"])
    costs = speedup.lab_step_costs(record).groupby([COLUMNS.k, "concurrency"]).measured_c
    assert table.c.to_numpy() == pytest.approx(costs.median().to_numpy())
    assert (table.c_low <= table.c).all() and (table.c <= table.c_high).all()


def test_shape_verdicts_are_read_from_the_bands() -> None:
    def verdict(values, spread=0.05):
        t = pd.DataFrame({"x": range(len(values)), "v": values})
        return lab.shape_verdict(t.assign(lo=t.v - spread, hi=t.v + spread), "x", "v", "lo", "hi")

    assert verdict([1.0, 1.5, 2.0]) == "rises"
    assert verdict([2.0, 1.5, 1.0]) == "falls"
    assert verdict([1.0, 2.0, 1.0]) == "rises then falls"
    assert verdict([1.0, 1.02, 1.01]) == "stays within its band"
    assert verdict([1.0, 1.5, 1.52]).startswith("this run cannot tell (up, within the band")


def test_union_effect_separates_only_beyond_the_replicates() -> None:
    effect = lab.union_effect(shipped(), 3).set_index("concurrency")
    spread = effect.step_ms_high - effect.step_ms_low
    assert (effect.separate == (spread > effect.replicate_spread_ms)).all()
    only_loaded = [r for r in _old_rows() if r["routing"] == lab.AS_LOADED]
    assert lab.union_effect({**shipped(), "rows": only_loaded}, 3).empty


SHARED_SOURCE = REPO_ROOT.parent / "shared" / "measurements" / "h200-vllm-step-costs.json"


def test_h200_record_loads_with_provenance() -> None:
    record = lab.load_h200()
    assert record["what"].startswith("Decode step rates") and "H200" in record["what"]
    assert "vllm" in record["how"]
    assert lab.recorded_on(record) == "2026-11-30"
    if SHARED_SOURCE.is_file():  # the copy in data/ holds the source's numbers, regrouped
        assert rates_of(json.loads(SHARED_SOURCE.read_text())) == rates_of(record)


def rates_of(record: dict) -> dict:
    """Every recorded (run, batch) -> steps/s, wherever the record keeps it."""
    out = {}
    for block in (record[lab._H200_SHAPE], record.get(lab._ONE_PROMPT, {})):
        for run, by_batch in block.get("steps_per_s", {}).items():
            out |= {(run, b): v for b, v in by_batch.items()}
    return out


def test_the_one_prompt_batch_is_only_the_contrast() -> None:
    record = lab.load_h200()
    assert all(set(r) == {"bs1"} for r in record[lab._H200_SHAPE]["steps_per_s"].values())
    assert "ONE" in record[lab._ONE_PROMPT]["caveat"] and "one_prompt_batch" in record["caveat"]
    df = lab.one_prompt_batch(record)
    assert set(df.batch_size) == {1, 8, 32}
    plain = df[df.num_speculative_tokens == 0].set_index("batch_size").steps_per_s
    assert plain[1] == record[lab._H200_SHAPE]["steps_per_s"]["plain"]["bs1"]
    assert (df[df.num_speculative_tokens == 0].relative_step_cost == 1).all()
    k3 = df[df.num_speculative_tokens == 3].set_index("batch_size")
    assert k3.relative_step_cost[8] == pytest.approx(plain[8] / k3.steps_per_s[8])


def test_h200_without_provenance_is_refused(tmp_path: Path) -> None:
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({lab._H200_SHAPE: {}}))
    with pytest.raises(ValueError, match="provenance"):
        lab.load_h200(bare)
