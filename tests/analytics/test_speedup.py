"""The speed-up model's expected tokens per step, and the recorded H200 tables with their
provenance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.analytics import speedup as sp
from helpers.analytics.speedup import AS_LOADED
from helpers.common.paths import REPO_ROOT

SHARED_SOURCE = REPO_ROOT.parent / "shared" / "measurements" / "h200-vllm-step-costs.json"


@pytest.mark.parametrize("k", [1, 3, 5])
def test_alpha_zero_gives_one_token_per_step(k: int) -> None:
    assert sp.expected_tokens_per_step(k, 0.0) == 1.0


@pytest.mark.parametrize("k", [1, 3, 5])
def test_alpha_to_one_gives_k_plus_one_tokens_per_step(k: int) -> None:
    assert sp.expected_tokens_per_step(k, 1 - 1e-9) == pytest.approx(k + 1, rel=1e-6)


def test_expected_tokens_is_the_geometric_sum() -> None:
    for k in range(1, 6):
        for a in (0.1, 0.5, 0.8):
            assert sp.expected_tokens_per_step(k, a) == pytest.approx(
                sum(a**i for i in range(k + 1))
            )


def test_monotonic_pieces() -> None:
    alphas = [i / 20 for i in range(21)]
    for k in range(1, 6):
        e = [sp.expected_tokens_per_step(k, a) for a in alphas]
        assert all(x < y for x, y in zip(e, e[1:])), "E[tokens/step] rises with α"
    for a in (0.3, 0.8):
        e = [sp.expected_tokens_per_step(k, a) for k in range(1, 8)]
        assert all(x < y for x, y in zip(e, e[1:])), "E[tokens/step] rises with k for α > 0"


def test_alpha_out_of_range_rejected() -> None:
    with pytest.raises(ValueError):
        sp.expected_tokens_per_step(3, 1.2)


def test_h200_record_loads_with_provenance() -> None:
    record = sp.load_h200()
    assert record["what"].startswith("Decode step rates") and "H200" in record["what"]
    assert "vllm" in record["how"]
    assert sp.recorded_on(record) == "2026-11-30"
    if SHARED_SOURCE.is_file():  # the copy in data/ holds the source's numbers, regrouped
        assert rates_of(json.loads(SHARED_SOURCE.read_text())) == rates_of(record)


def rates_of(record: dict) -> dict:
    """Every recorded (run, batch) -> steps/s, wherever the record keeps it."""
    out = {}
    for block in (record[sp._H200_SHAPE], record.get(sp._ONE_PROMPT, {})):
        for run, by_batch in block.get("steps_per_s", {}).items():
            out |= {(run, b): v for b, v in by_batch.items()}
    return out


def test_the_one_prompt_batch_is_only_the_contrast() -> None:
    record = sp.load_h200()
    assert all(set(r) == {"bs1"} for r in record[sp._H200_SHAPE]["steps_per_s"].values())
    assert "ONE" in record[sp._ONE_PROMPT]["caveat"] and "one_prompt_batch" in record["caveat"]
    df = sp.one_prompt_batch(record)
    assert set(df.batch_size) == {1, 8, 32}
    plain = df[df.num_speculative_tokens == 0].set_index("batch_size").steps_per_s
    assert plain[1] == record[sp._H200_SHAPE]["steps_per_s"]["plain"]["bs1"]
    assert (df[df.num_speculative_tokens == 0].relative_step_cost == 1).all()
    k3 = df[df.num_speculative_tokens == 3].set_index("batch_size")
    assert k3.relative_step_cost[8] == pytest.approx(plain[8] / k3.steps_per_s[8])


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


def test_literature_records_say_where_they_come_from() -> None:
    lit = sp.literature()
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


def test_published_points_carry_the_threads_role() -> None:
    points = sp.published_points()
    assert (points.role == "reported slowdown").all()


def test_h200_without_provenance_is_refused(tmp_path: Path) -> None:
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({sp._H200_SHAPE: {}}))
    with pytest.raises(ValueError, match="provenance"):
        sp.load_h200(bare)


def test_peak_bandwidth_by_gpu_name() -> None:
    from helpers.analytics.speedup import peak_tb_s

    assert peak_tb_s("NVIDIA H200") == 4.8
    assert peak_tb_s("NVIDIA H100 80GB HBM3") is None
