"""Sweep tables and figures from synthetic counters (no engine): columns, values, CSVs, the CI switch."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from helpers import acceptance_plots as ap
from helpers import sweeps as sw
from helpers.experiments import CategoryRun
from helpers.metrics import SpecCounters


@pytest.fixture(autouse=True)
def _outputs_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Tables and figures go to tmp_path instead of build/."""
    monkeypatch.setattr(sw, "build_path", lambda *parts: tmp_path.joinpath(*parts))
    monkeypatch.setattr("helpers.plots.FIGURES_DIR", tmp_path / "figures")
    (tmp_path / "tables").mkdir()
    return tmp_path


def counters(k: int, drafts: int, per_pos: list[int]) -> SpecCounters:
    """Synthetic counters: drafts of k tokens with these accepted counts per position."""
    return SpecCounters(drafts, k * drafts, sum(per_pos), tuple(per_pos))


def runs_for(k: int) -> dict[str, CategoryRun]:
    """One fake run per category whose acceptance falls from structured to creative."""
    out = {}
    for i, cat in enumerate(("structured", "code", "prose", "creative")):
        per_pos = [max(0, 10 - 2 * i - 2 * j) for j in range(k)]
        out[cat] = CategoryRun([[1, 2]], ["ab"], 0.1, counters(k, 10, per_pos))
    return out


RUNS = {k: runs_for(k) for k in (1, 2, 3)}


def test_acceptance_vs_k_columns_values_and_csv(_outputs_in_tmp: Path) -> None:
    df = sw.acceptance_vs_k(RUNS)
    assert list(df.columns) == ["num_speculative_tokens", *sw.SCALAR_KEYS, "acceptance_length_ceiling"]
    assert list(df.num_speculative_tokens) == [1, 2, 3]
    pooled = sw.pooled(RUNS[3])
    row = df[df.num_speculative_tokens == 3].iloc[0]
    assert row.spec_decode_acceptance_length == pytest.approx(1 + pooled.num_accepted_tokens / pooled.num_drafts)
    assert row.spec_decode_acceptance_rate == pytest.approx(100 * pooled.num_accepted_tokens / pooled.num_draft_tokens)
    assert (df.acceptance_length_ceiling == df.num_speculative_tokens + 1).all()
    assert pd.read_csv(_outputs_in_tmp / "tables" / "acceptance_vs_k.csv").shape == df.shape


def test_per_position_is_long_and_tidy() -> None:
    df = sw.per_position_vs_k(RUNS)
    assert list(df.columns) == ["num_speculative_tokens", "position", "spec_decode_per_position_acceptance_rate"]
    assert len(df) == 1 + 2 + 3
    k3 = df[df.num_speculative_tokens == 3].spec_decode_per_position_acceptance_rate.tolist()
    assert k3 == pytest.approx([(10 + 8 + 6 + 4) / 40, (8 + 6 + 4 + 2) / 40, (6 + 4 + 2 + 0) / 40])


def test_by_category_has_every_k_and_category() -> None:
    df = sw.acceptance_by_category(RUNS)
    assert list(df.columns[:2]) == ["num_speculative_tokens", "category"]
    assert len(df) == 3 * 4
    k1 = df[df.num_speculative_tokens == 1].set_index("category").spec_decode_acceptance_length
    assert k1["structured"] == pytest.approx(2.0) and k1["creative"] == pytest.approx(1.4)


def test_temperature_table() -> None:
    df = sw.acceptance_vs_temperature({0.0: counters(3, 10, [9, 8, 7]), 1.0: counters(3, 10, [3, 1, 0])}, 3)
    assert list(df.columns[:2]) == ["temperature", "num_speculative_tokens"]
    assert df.spec_decode_acceptance_length.tolist() == pytest.approx([3.4, 1.4])


def test_zero_drafts_give_zero_not_an_error() -> None:
    df = sw.acceptance_table({"empty": SpecCounters()}, "run")
    assert df.spec_decode_acceptance_length.iloc[0] == 0.0


def test_throughput_table_speedup_and_implied_cost() -> None:
    rows = {0: {"output_tokens_per_s": 100.0, "spec_decode_acceptance_length": 1.0},
            3: {"output_tokens_per_s": 150.0, "spec_decode_acceptance_length": 3.0}}
    df = sw.throughput_vs_k(rows)
    k3 = df[df.num_speculative_tokens == 3].iloc[0]
    assert k3.speedup_vs_plain == pytest.approx(1.5)
    assert k3.implied_relative_step_cost == pytest.approx(2.0)
    assert sw.best_k(df) == 3
    assert sw.best_k(pd.DataFrame({"num_speculative_tokens": [0, 3], "output_tokens_per_s": [200.0, 150.0]})) == 0


def test_throughput_prompts_round_robin() -> None:
    prompts = {"a": ["a1", "a2"], "b": ["b1", "b2"], "c": ["c1", "c2"]}
    assert sw.throughput_prompts(prompts, 4) == ["a1", "b1", "c1", "a2"]


def test_ci_switch_shrinks_only_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sw.CI_ENV, raising=False)
    plan = sw.sweep_plan(ks=[1, 2, 3], k=3, n_prompts=8, max_tokens=128, temperatures=None)
    assert plan.ks == (1, 2, 3) and plan.n_prompts == 8 and plan.max_tokens == 128
    assert plan.temperatures == sw.SweepPlan().temperatures and plan.engines == 4
    monkeypatch.setenv(sw.CI_ENV, "true")
    ci = sw.sweep_plan(ks=[1, 2, 3], k=3, n_prompts=8, max_tokens=128)
    assert ci.n_prompts < 8 and ci.max_tokens < 128 and ci.ks == (1, 2, 3)
    monkeypatch.setenv(sw.CI_ENV, "0")
    assert sw.sweep_plan(n_prompts=8).n_prompts == 8


def test_main_k_must_be_swept() -> None:
    with pytest.raises(ValueError, match="main k"):
        sw.sweep_plan(ks=[1, 2], k=3)


def test_figures_are_drawn_and_saved(_outputs_in_tmp: Path) -> None:
    ap.plot_k_sweep(sw.acceptance_vs_k(RUNS), sw.per_position_vs_k(RUNS))
    temps = sw.acceptance_vs_temperature({0.0: counters(3, 10, [9, 8, 7]), 0.7: counters(3, 10, [5, 2, 1])}, 3)
    ap.plot_category_temperature(sw.acceptance_by_category(RUNS), temps, 3)
    names = {p.name for p in (_outputs_in_tmp / "figures").iterdir()}
    assert {"03_acceptance_vs_k.png", "03_acceptance_by_category_temperature.png"} <= names


def test_token_html_and_layout() -> None:
    pieces, labels = ["{", "\n  \"a\"", ": 1", "<b>"], ["prefill", "accepted", "correction", "bonus"]
    page = ap.token_html(pieces, labels)
    assert page.count("<span title=") == 4 and "&lt;b&gt;" in page
    assert "accepted draft (1)" in page and "bonus token (1)" in page
    runs = ap._layout(pieces, width=80)
    assert runs[0] == (0, 0, "{", 0) and runs[1] == (0, 1, "↵", 1) and runs[2] == (1, 0, '  "a"', 1)
    wrapped = ap._layout(["x" * 6] * 3, width=10)
    assert [r[0] for r in wrapped] == [0, 1, 2]


def test_token_figure(_outputs_in_tmp: Path) -> None:
    ap.plot_token_colors(["a", "b\n", "c"], ["prefill", "accepted", "bonus"], "t", "tokens_test")
    assert (_outputs_in_tmp / "figures" / "tokens_test.png").is_file()


def test_fixed_expand_kernel_keeps_dtype_and_replaces() -> None:
    import torch

    cu = torch.tensor([2, 2, 5], dtype=torch.int32)
    out = torch.full((5,), -9.0)
    sw.fixed_expand_kernel(out, torch.tensor([0.3, 0.5, 0.0]), cu, 0, 1)
    assert out.tolist() == pytest.approx([0.3, 0.3, 1.0, 1.0, 1.0])
    ints = torch.zeros(5, dtype=torch.int32)
    sw.fixed_expand_kernel(ints, torch.tensor([7, 8, 9], dtype=torch.int32), cu, 0, 0)
    assert ints.tolist() == [7, 7, 9, 9, 9]


def test_cpu_expand_fix_in_process() -> None:
    """After the patch, vLLM's own expand_batch_to_tokens returns the right temperatures here."""
    pytest.importorskip("vllm")
    sw.patch_cpu_expand_kernel()
    assert sw.cpu_expand_kernel_ok()
    assert sw.CpuExpandFix is sw._CpuExpandFixExtension and not sw.patch_cpu_expand_kernel()
