"""chapters.ch06_moe.lab: the MoE lab's record read in one graph mode and runner at a time, the
replicates pooled by median, the bandwidth each plain step reached, the routing designs, the graph
and runner checks, the served-mix and one-prompt cells."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pandas as pd
import pytest

from chapters.ch06_moe import lab, moe
from helpers.analytics import speedup
from helpers.common.tables import COLUMNS


def shipped() -> dict:
    return lab.load_lab()


def test_the_shipped_lab_keeps_its_provenance() -> None:
    # Provenance travels with the numbers: where, what stack, which command, which caveats.
    assert {"gpu", "vllm", "machine", "command", "workbook", "caveats"} <= set(shipped())
    assert shipped()["vllm"] == "0.31.0" and shipped()["format"] >= 3


def test_load_lab_wants_provenance(tmp_path) -> None:
    bare = tmp_path / "bare.json"
    bare.write_text('{"rows": []}')
    with pytest.raises(ValueError, match="provenance"):
        lab.load_lab(bare)


def _numbers_only(table: pd.DataFrame, columns: list[str]) -> None:
    """Every cell of those columns is one number (not a Series, not a list)."""
    for column in columns:
        for value in table[column]:
            assert isinstance(value, (int, float)), (column, type(value), value)


def test_the_shipped_record_is_read_in_one_graph_mode_and_runner() -> None:
    record = shipped()
    graphs, runner = speedup.lab_mode(record)
    df = lab.cells(record)
    assert set(df.graphs) == {graphs} and set(df.cell) == {speedup._LOCKSTEP}
    assert df.runner.nunique(dropna=False) == 1
    assert len(df) < len(record["rows"]) or not {r.get("graphs") for r in record["rows"]} - {graphs}
    _numbers_only(lab.c_table(record), ["c", "c_low", "c_high"])
    _numbers_only(lab.routing_table(record, 3), ["plain_step_ms", "spec_step_ms", "measured_c"])
    _numbers_only(lab.routing_table(record), ["measured_c", "spec_step_ms", "plain_step_ms"])


def test_cells_carry_the_bytes_and_bandwidth_of_their_union() -> None:
    record = shipped()
    df = lab.cells(record)
    assert (df.union_source == "read back").any()
    assert (df.achieved_tb_s == df.gb_per_step / df.step_ms).all()
    shape, context = lab.lab_shape(record)
    row = df.iloc[-1]
    assert row.gb_per_step == pytest.approx(
        moe.step_bytes(shape, row.concurrency, row.union, context, row[COLUMNS.k]) / 1e9
    )


def test_plain_steps_stay_below_the_gpus_peak() -> None:
    table = lab.plain_bandwidth(shipped())
    assert list(table.concurrency) == sorted(table.concurrency)
    assert table.concurrency.is_unique, "the blocks are pooled: one row per concurrency"
    assert (table.share_of_peak > 0).all() and (table.share_of_peak < 1).all(), table


def _row(k: int, routing: str, ms: float, **extra) -> dict:
    """One cell of a record in miniature (C = 1)."""
    return {"k": k, "tau_target": None if k == 0 else 2.5, "concurrency": 1, "routing": routing,
            "routing_read_back": routing, "tok_s": 1e3 / ms, "steps_per_s": 1e3 / ms,
            "step_ms": ms, "tau": 1.0 if k == 0 else 2.5} | extra  # fmt: skip


def routing_record() -> dict:
    """A record in miniature: two designs, plain twice as loaded (an engine's two blocks) and once
    designed, k = 3 under each."""
    record = copy.deepcopy(shipped())
    rows = [
        _row(0, speedup.AS_LOADED, 4.0, batch_union_1=8.0, rho_4=0.6, effective_experts=20.0),
        _row(0, "rho 0.5", 4.0, batch_union_1=8.0, rho_4=0.7, effective_experts=18.0),
        _row(0, speedup.AS_LOADED, 4.2, batch_union_1=8.0, rho_4=0.6, effective_experts=20.0),
        _row(3, speedup.AS_LOADED, 4.1 * 29 / 16, batch_union_4=29.0),
        _row(3, "rho 0.5", 4.0 * 18 / 16, batch_union_4=18.0),
    ]
    record["rows"] = rows
    return record


def test_routing_table_pools_plains_blocks_into_one_number() -> None:
    table = lab.routing_table(routing_record(), 3)
    assert list(table.routing) == [speedup.AS_LOADED, "rho 0.5"]
    assert table.plain_step_ms.tolist() == pytest.approx([4.1, 4.0])  # the median of 4.0 and 4.2
    assert table.measured_c.tolist() == pytest.approx([29 / 16, 18 / 16])
    assert table.rho_4.tolist() == pytest.approx([0.6, 0.7])
    assert (lab.cells(routing_record()).union_source == "read back").all()


def test_a_record_older_than_format_3_or_a_mislabelled_cell_is_refused() -> None:
    with pytest.raises(ValueError, match="format 2"):
        lab.cells({**routing_record(), "format": 2})
    wrong = routing_record()
    wrong["rows"][-1]["routing_read_back"] = "zipf 1"
    with pytest.raises(ValueError, match="read back another routing"):
        lab.c_table(wrong)


def format4(record: dict | None = None) -> dict:
    """A format-4 record built from a record's main grid: the graph check (breakable, 10 % slower),
    the runner check (V1 at k = 0 and 3, 20 % slower), one-prompt and served-mix cells."""
    record = copy.deepcopy(record or shipped())
    graphs = record["settings"]["graphs"]
    grid = [r | {"runner": "V2", "cell": "lockstep", "graphs": graphs} for r in record["rows"]
            if r.get("graphs", graphs) == graphs]  # fmt: skip
    loaded = [r for r in grid if r["routing"] == speedup.AS_LOADED]
    other = "breakable" if graphs == "compiled" else "compiled"
    checks = [r | {"graphs": other, "step_ms": r["step_ms"] * 1.1} for r in loaded]
    checks += [
        r | {"runner": "V1", "step_ms": r["step_ms"] * 1.2} for r in loaded if r["k"] in (0, 3)
    ]
    extras = []
    for k in (0, 3):
        first = next(r for r in loaded if r["k"] == k and r["concurrency"] == 16)
        extras.append(first | {"cell": "one prompt", "step_ms": first["step_ms"] * 0.5})
        tau = 1.0 if k == 0 else 2.5
        extras.append(_row(k, speedup.AS_LOADED, 1.0) | {"cell": "served mix", "concurrency": 64,
                      "graphs": graphs, "runner": "V2", "requests": 192, "tau": tau,
                      "tok_s": 1000.0 * (1.8 if k else 1.0), "tpot_ms_median": 20.0 / (1.8 if k else 1.0)})  # fmt: skip
    record["rows"] = grid + checks + extras
    record["engine_labels"] = {"plain": {"runner": "V2"}}
    record["format"] = 4
    return record


def test_the_graph_and_runner_checks_are_ratios_to_the_main_grid() -> None:
    record = format4()
    graph = lab.graph_check(record)
    assert graph.ratio.to_numpy() == pytest.approx(1.1)
    main_c = lab.c_table(record).set_index([COLUMNS.k, "concurrency"]).c
    for r in graph[graph[COLUMNS.k] > 0].itertuples():
        assert r[-1] == pytest.approx(r[-2], rel=0.02)  # the same 10 % on both: c unmoved
        assert main_c[(getattr(r, COLUMNS.k), r.concurrency)] == pytest.approx(r[-2], rel=0.02)
    runner = lab.runner_check(record)
    assert set(runner[COLUMNS.k]) == {0, 3} and runner.ratio.to_numpy() == pytest.approx(1.2)
    k3 = runner[runner[COLUMNS.k] == 3]
    assert k3.c_v1.to_numpy() == pytest.approx((k3.c_main * 1.2).to_numpy(), rel=0.02)
    assert lab.cells(record).runner.unique().tolist() == ["V2"], "the checks stay out of the grid"


def test_served_mix_and_one_prompt_cells_stand_beside_the_grid() -> None:
    record = format4()
    mix = lab.served_mix(record).iloc[0]
    assert mix.speedup == pytest.approx(1.8) and mix.c_served == pytest.approx(2.5 / 1.8)
    assert mix.c_lockstep == pytest.approx(
        lab.c_table(record).set_index([COLUMNS.k, "concurrency"]).c[(3, 64)]
    )
    one = lab.one_prompt(record)
    assert set(one[COLUMNS.k]) == {0, 3}
    assert (one.copies_step_ms < one.distinct_step_ms).all()
    assert lab.served_mix(shipped() | {"rows": record["rows"][:3]}).empty


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
    only_loaded = [r for r in routing_record()["rows"] if r["routing"] == speedup.AS_LOADED]
    assert lab.union_effect({**shipped(), "rows": only_loaded}, 3).empty


def _effect(spread: float) -> pd.DataFrame:
    """One concurrency of union_effect: designs 6.0-7.0 ms, replicates spread `spread` ms."""
    return pd.DataFrame([{"concurrency": 1, "step_ms_low": 6.0, "step_ms_high": 7.0,
                          "union_low": 10.0, "union_high": 29.0, "replicate_spread_ms": spread,
                          "separate": 1.0 > spread}])  # fmt: skip


def test_the_union_lines_follow_the_replicates() -> None:
    assert lab.union_lines(_effect(0.1), 3)[0].endswith("the union moved the step")
    assert lab.union_lines(_effect(2.0), 3)[0].endswith("within the replicates: not seen here")
    assert "cannot say" in lab.union_lines(pd.DataFrame(), 3)[0]


def test_placement_names_the_neighbouring_designs() -> None:
    read = pd.Series({"zipf 1": 0.33, "rho 0.25": 0.51, "rho 0.5": 0.71})
    said: Callable[[float], str] = lambda rho: lab.placement(read, rho)  # noqa: E731
    assert "between zipf 1 (read back 0.33) and rho 0.25 (0.51)" in said(0.48)
    assert "between rho 0.25 (read back 0.51) and rho 0.5 (0.71)" in said(0.6)
    assert said(0.1).startswith("rho 0.10 is below every design's (lowest: zipf 1")
    assert said(0.9).startswith("rho 0.90 is above every design's (highest: rho 0.5")
