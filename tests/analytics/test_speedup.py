"""The recorded GPU MoE lab's speed-ups and c read in one graph mode, published runs, and the GPUs'
peak bandwidth."""

from __future__ import annotations

import json

import pytest

from helpers.analytics import speedup as sp
from helpers.analytics.speedup import AS_LOADED


def lab_record() -> dict:
    return json.loads(sp.LAB_FILE.read_text())


def test_lab_speedup_is_computed_from_the_file() -> None:
    record = lab_record()
    lab = sp.lab_step_costs(record)
    main = sp.lab_rows(record)
    plain = main[(main[sp.COLUMNS.k] == 0) & (main.routing == AS_LOADED)].groupby("concurrency")
    for _, row in lab.iterrows():
        assert row.speedup == pytest.approx(row.tok_s / plain.tok_s.median()[row.concurrency])
        assert row.measured_c == pytest.approx(
            plain.steps_per_s.median()[row.concurrency] / row.steps_per_s
        )
    # not typed: change the file's plain rates and the speed-ups follow
    for r in record["rows"]:
        if r["k"] == 0:
            r["tok_s"] *= 2
    doubled = sp.lab_step_costs(record)
    assert list(doubled.speedup * 2) == pytest.approx(list(lab.speedup))


def _row(k: int, routing: str, tok_s: float, steps: float, **extra) -> dict:
    return {"k": k, "tau_target": None if k == 0 else 2.5, "concurrency": 1, "routing": routing,
            "routing_read_back": routing, "tok_s": tok_s, "steps_per_s": steps,
            "tau": 1.0 if k == 0 else 2.5, "graphs": "compiled"} | extra  # fmt: skip


def _record(rows: list[dict]) -> dict:
    return {"format": 4, "settings": {"graphs": "compiled"}, "rows": rows,
            "engine_labels": {"plain": {"runner": "V2"}}}  # fmt: skip


def test_lab_step_costs_reads_the_main_grids_as_loaded_rows() -> None:
    rows = [
        _row(0, AS_LOADED, 100.0, 100.0, runner="V2"),
        _row(0, AS_LOADED, 110.0, 110.0, runner="V2"),  # plain's second block: pooled by median
        _row(0, "independent", 50.0, 50.0, runner="V2"),
        _row(3, AS_LOADED, 150.0, 60.0, runner="V2"),
        _row(3, "independent", 10.0, 4.0, runner="V2"),
        _row(3, AS_LOADED, 1.0, 1.0, runner="V2", graphs="breakable"),  # the graph check
        _row(3, AS_LOADED, 2.0, 2.0, runner="V1"),  # the runner check
        _row(3, AS_LOADED, 3.0, 3.0, runner="V2", cell="served mix"),
    ]
    lab = sp.lab_step_costs(_record(rows))
    assert len(lab) == 1
    assert lab.speedup.iloc[0] == pytest.approx(150 / 105)
    assert lab.measured_c.iloc[0] == pytest.approx(105 / 60)
    assert set(sp.lab_rows(_record(rows), graphs="breakable").tok_s) == {1.0}
    assert set(sp.lab_rows(_record(rows), runner="V1").tok_s) == {2.0}


def test_a_record_that_cannot_be_trusted_is_refused() -> None:
    with pytest.raises(ValueError, match="format 2"):
        sp.lab_rows({"format": 2, "rows": []})
    wrong = [_row(3, AS_LOADED, 1.0, 1.0, routing_read_back="zipf 1")]
    with pytest.raises(ValueError, match="read back another routing"):
        sp.lab_rows(_record(wrong))


def test_published_points_carry_their_conditions() -> None:
    points = sp.published_points()
    assert points.batch.notna().all() and (points.speedup_vs_plain > 0).all()
    assert {"release", "drafting", "regime", "hardware", "date"} <= set(points.columns)
    row = points.set_index("id").loc["specforge-339-bs1-3-1-4"]
    assert row.speedup_vs_plain == pytest.approx(159.78 / 222.47)


def test_peak_bandwidth_by_gpu_name() -> None:
    from helpers.analytics.speedup import peak_tb_s

    assert peak_tb_s("NVIDIA H200") == 4.8
    assert peak_tb_s("NVIDIA H100 80GB HBM3") == 3.35
    assert peak_tb_s("NVIDIA H100 NVL") == 3.9
    assert peak_tb_s("NVIDIA A100-SXM4-80GB") is None
