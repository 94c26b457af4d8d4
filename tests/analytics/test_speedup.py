"""The recorded H200 MoE lab's speed-ups and c, published runs, and the GPUs' peak bandwidth."""

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
    plain = {(r["concurrency"], r.get("routing")): r for r in record["rows"] if r["k"] == 0}
    for _, row in lab.iterrows():
        p = plain[row.concurrency, row.get("routing")]
        assert row.speedup == pytest.approx(row.tok_s / p["tok_s"])
        assert row.measured_c == pytest.approx(p["steps_per_s"] / row.steps_per_s)
    # not typed: change the file's plain rates and the speed-ups follow
    for r in record["rows"]:
        if r["k"] == 0:
            r["tok_s"] *= 2
    doubled = sp.lab_step_costs(record)
    assert list(doubled.speedup * 2) == pytest.approx(list(lab.speedup))


def test_lab_step_costs_reads_the_as_loaded_rows_of_a_routing_record() -> None:
    rows = [
        {"k": 0, "tau_target": None, "concurrency": 1, "routing": AS_LOADED, "tok_s": 100.0, "steps_per_s": 100.0, "tau": 1.0},
        {"k": 0, "tau_target": None, "concurrency": 1, "routing": "independent", "tok_s": 50.0, "steps_per_s": 50.0, "tau": 1.0},
        {"k": 3, "tau_target": 2.5, "concurrency": 1, "routing": AS_LOADED, "tok_s": 150.0, "steps_per_s": 60.0, "tau": 2.5},
        {"k": 3, "tau_target": 2.5, "concurrency": 1, "routing": "independent", "tok_s": 10.0, "steps_per_s": 4.0, "tau": 2.5},
    ]  # fmt: skip
    lab = sp.lab_step_costs({"rows": rows})
    assert len(lab) == 1
    assert lab.speedup.iloc[0] == pytest.approx(1.5) and lab.measured_c.iloc[0] == pytest.approx(
        100 / 60
    )


def test_published_points_carry_the_threads_role() -> None:
    points = sp.published_points()
    assert (points.role == "reported slowdown").all()


def test_peak_bandwidth_by_gpu_name() -> None:
    from helpers.analytics.speedup import peak_tb_s

    assert peak_tb_s("NVIDIA H200") == 4.8
    assert peak_tb_s("NVIDIA H100 80GB HBM3") is None
