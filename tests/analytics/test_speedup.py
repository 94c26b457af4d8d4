"""The speedup model's math, the recorded H200 table and its provenance, and the step-cost timer's table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.analytics import speedup as sp
from helpers.common.paths import REPO_ROOT

SHARED_SOURCE = REPO_ROOT.parent / "shared" / "measurements" / "h200-vllm-step-costs.json"


@pytest.mark.parametrize("k", [1, 3, 5])
@pytest.mark.parametrize("cost", [1.0, 1.84, 2.5])
def test_alpha_zero_gives_one_over_cost(k: int, cost: float) -> None:
    assert sp.expected_tokens_per_step(k, 0.0) == 1.0
    assert sp.predicted_speedup(k, 0.0, cost) == pytest.approx(1 / cost)


@pytest.mark.parametrize("k", [1, 3, 5])
def test_alpha_to_one_gives_k_plus_one_over_cost(k: int) -> None:
    assert sp.predicted_speedup(k, 1.0, 2.0) == pytest.approx((k + 1) / 2.0)
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
    s = [sp.predicted_speedup(3, 0.8, c) for c in (1.0, 1.5, 2.0, 3.0)]
    assert all(x > y for x, y in zip(s, s[1:])), "speedup falls as a step gets dearer"


def test_alpha_out_of_range_rejected() -> None:
    with pytest.raises(ValueError):
        sp.expected_tokens_per_step(3, 1.2)


@pytest.mark.parametrize("k,alpha", [(1, 0.3), (3, 0.7), (5, 0.95)])
def test_alpha_for_tau_inverts_the_model(k: int, alpha: float) -> None:
    tau = sp.expected_tokens_per_step(k, alpha)
    assert sp.alpha_for_tau(tau, k) == pytest.approx(alpha, abs=1e-8)
    assert sp.alpha_for_tau(1.0, k) == pytest.approx(0.0, abs=1e-8)
    with pytest.raises(ValueError):
        sp.alpha_for_tau(k + 1.5, k)


def test_relative_step_cost() -> None:
    assert sp.relative_step_cost(
        verifier_seconds=0.012, drafter_seconds=0.002, plain_seconds=0.010, k=3
    ) == pytest.approx(1.8)


def test_h200_record_loads_with_provenance() -> None:
    record = sp.load_h200()
    assert record["what"].startswith("Decode step rates") and "H200" in record["what"]
    assert "vllm" in record["how"]
    assert sp.recorded_on(record) == "2026-11-30"
    if SHARED_SOURCE.is_file():  # the copy in data/ is verbatim
        assert json.loads(SHARED_SOURCE.read_text()) == record


def test_h200_step_costs_match_the_recorded_ratios() -> None:
    costs = sp.h200_step_costs(sp.load_h200())
    assert list(costs.num_speculative_tokens) == [1, 3, 5]
    assert [round(c, 2) for c in costs.relative_step_cost] == [1.39, 1.84, 2.59]
    assert costs.source.str.contains("not this run").all()
    be = sp.break_even(costs).set_index("num_speculative_tokens")
    assert be.loc[3, "break_even_tau"] == pytest.approx(1.84, abs=0.005)
    assert sp.expected_tokens_per_step(3, be.loc[3, "break_even_alpha"]) == pytest.approx(
        be.loc[3, "break_even_tau"]
    )


def test_recorded_break_even_tau_is_the_recorded_step_cost() -> None:
    rates = sp.load_h200()[sp.H200_SHAPE]["steps_per_s"]
    for k, batch in ((1, "bs1"), (3, "bs1"), (3, "bs32")):
        expected = rates["plain"][batch] / rates[f"k{k}"][batch]
        assert sp.recorded_break_even_tau(k, batch) == pytest.approx(expected)
    with pytest.raises(ValueError, match="no k=2 at bs1"):
        sp.recorded_break_even_tau(2)


def test_recorded_tiny_pair_speedups_per_dtype() -> None:
    speedups = sp.recorded_tiny_pair_speedups()
    assert speedups["float32"] == pytest.approx(307 / 677)
    assert speedups["bfloat16"] == pytest.approx(363 / 505)


def test_h200_without_provenance_is_refused(tmp_path: Path) -> None:
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({sp.H200_SHAPE: {}}))
    with pytest.raises(ValueError, match="provenance"):
        sp.load_h200(bare)


def test_h200_tiny_pair_table() -> None:
    df = sp.h200_tiny_pair(sp.load_h200())
    row = df[(df.dtype == "float32") & (df.setting == "conc1")].iloc[0]
    assert row.speedup_vs_plain == pytest.approx(307 / 677)


def test_model_curve_shape() -> None:
    costs = sp.h200_step_costs(sp.load_h200())
    curve = sp.model_curve(costs, [0.5, 0.9])
    assert len(curve) == 6
    assert set(curve.columns) >= {"num_speculative_tokens", "alpha", "predicted_speedup"}


def test_measure_step_costs_table(_tiny_pair_source) -> None:
    from helpers.eagle3.checkpoint import load_drafter, load_verifier

    verifier = load_verifier(_tiny_pair_source.verifier)
    drafter, _ = load_drafter(_tiny_pair_source.drafter)
    df = sp.measure_step_costs(verifier, drafter, [1, 2], context=16, repeats=2)
    assert list(df.num_speculative_tokens) == [1, 2]
    assert (df[["plain_step_ms", "verifier_step_ms", "drafter_step_ms"]] > 0).all().all()
    assert df.relative_step_cost.iloc[0] == pytest.approx(
        (df.verifier_step_ms.iloc[0] + df.drafter_step_ms.iloc[0]) / df.plain_step_ms.iloc[0]
    )
