"""chapters.ch06_moe.tools.moe_lab: designed routers do what they say on a model laid out like vLLM's
Qwen3-MoE, and the synthetic τ of a running engine is rewritten in place."""

from __future__ import annotations

import types

import pytest
import torch
from torch import nn

from chapters.ch06_moe.moe import _window_union
from chapters.ch06_moe.tests.test_lab import routing_record, shipped
from chapters.ch06_moe.tools import moe_lab
from helpers.analytics import speedup

H, HEADS, KV, HD, E, A, V, L = 64, 4, 2, 16, 16, 2, 500, 3


def norm(hidden: int) -> nn.Module:
    m = nn.Module()
    m.weight = nn.Parameter(torch.rand(hidden) * 2e-3 - 1e-3, requires_grad=False)
    m.variance_epsilon = 1e-6
    return m


def linear(out: int, inp: int) -> nn.Module:
    m = nn.Module()
    m.weight = nn.Parameter(torch.rand(out, inp) * 2e-3 - 1e-3, requires_grad=False)
    return m


def fake_model() -> nn.Module:
    """The attributes `routing` reads and writes, with vLLM's dummy-weight values U(±1e-3)."""
    torch.manual_seed(0)
    model = nn.Module()
    model.config = types.SimpleNamespace(hidden_size=H, num_experts=E, num_experts_per_tok=A)
    model.model = nn.Module()
    model.model.embed_tokens = linear(V, H)
    layers = nn.ModuleList()
    for _ in range(L):
        layer = nn.Module()
        layer.self_attn = nn.Module()
        layer.self_attn.qkv_proj = linear((HEADS + 2 * KV) * HD, H)
        layer.self_attn.o_proj = linear(H, HEADS * HD)
        layer.self_attn.num_heads, layer.self_attn.num_kv_heads = HEADS, KV
        layer.self_attn.head_dim = HD
        layer.input_layernorm, layer.post_attention_layernorm = norm(H), norm(H)
        layer.mlp = nn.Module()
        layer.mlp.gate = linear(E, H)
        layers.append(layer)
    model.model.layers = layers
    return model


def random_sequences(n: int = 12, length: int = 60, seed: int = 1) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(V, (length,), generator=g).tolist() for _ in range(n)]


def rho_of(model: nn.Module, seqs: list[list[int]], start: int = 20) -> float:
    stats = moe_lab.routing_stats(moe_lab.route(model, seqs), [start] * len(seqs), E, [4])
    return stats["rho_4"]


def test_layout_blocks_do_not_overlap() -> None:
    lay = moe_lab._Layout(H, HEADS, KV, HD)
    assert lay.token == slice(1, H // 2)
    assert lay.context.start == H // 2 and lay.context.stop <= H
    assert lay.context_size == min(KV * HD, H // 2 - 1)


def test_as_loaded_routes_on_the_current_token() -> None:
    model = fake_model()
    seq = [7, 9, 7, 9, 3]
    choices = moe_lab.route(model, [seq])[0]  # [layers, T, active]
    assert choices.shape == (L, len(seq), A)
    # U(±1e-3) weights: layer 0's attention adds ~1e-4 of the stream, so equal tokens route alike
    assert torch.equal(choices[:, 0], choices[:, 2]) and torch.equal(choices[:, 1], choices[:, 3])


def test_independent_design_is_uncorrelated_and_context_weight_correlates() -> None:
    model, seqs = fake_model(), random_sequences()
    moe_lab._apply_design(model, moe_lab.Design("ind", 0.0, seed=3), context_scale=4.0)
    independent = rho_of(model, seqs)
    moe_lab._apply_design(model, moe_lab.Design("ctx", 8.0, seed=3), context_scale=4.0)
    correlated = rho_of(model, seqs)
    assert abs(independent) < 0.1, independent
    assert correlated > 0.5, correlated
    # layer 0 attends uniformly: q rows are zero
    assert model.model.layers[0].self_attn.qkv_proj.weight[: HEADS * HD].abs().sum() == 0


def test_calibration_finds_the_context_weight_of_a_target_rho() -> None:
    model, seqs = fake_model(), random_sequences(seed=5)
    design = moe_lab.Design("rho", seed=2)
    gamma = moe_lab._calibrate_context_weight(model, design, 0.5, 4.0, (20, 40))
    moe_lab._apply_design(model, moe_lab.Design("rho", gamma, seed=2), 4.0)
    assert gamma > 0
    assert rho_of(model, seqs) == pytest.approx(0.5, abs=0.15)


def test_zipf_bias_skews_popularity() -> None:
    bias = moe_lab.zipf_bias(E, A, 1.0, seed=0)
    assert len(bias) == E
    model, seqs = fake_model(), random_sequences()
    moe_lab._apply_design(model, moe_lab.Design("flat", seed=4), 4.0)
    flat = moe_lab.routing_stats(moe_lab.route(model, seqs), [0] * len(seqs), E, [1])
    moe_lab._apply_design(model, moe_lab.Design("zipf", bias=tuple(bias), seed=4), 4.0)
    skew = moe_lab.routing_stats(moe_lab.route(model, seqs), [0] * len(seqs), E, [1])
    assert skew["effective_experts"] < flat["effective_experts"] - 2, (skew, flat)


def test_routing_stats_counts_batches_at_the_same_offsets() -> None:
    same = torch.tensor([[[0, 1]] * 6])
    other = torch.tensor([[[2, 3]] * 6])
    stats = moe_lab.routing_stats([same, other], [0, 0], 8, [1, 4])
    assert stats["seq_union_1"] == 2 and stats["batch_union_1"] == 4
    assert stats["rho_4"] == pytest.approx(1.0) and stats["batch_union_4"] == 4


def test_the_as_loaded_design_has_nothing_to_apply() -> None:
    with pytest.raises(ValueError, match="measure it before"):
        moe_lab._apply_design(fake_model(), moe_lab.AS_LOADED, 1.0)


def test_design_round_trips_through_json() -> None:
    d = moe_lab.Design("z", 0.5, (0.1, -0.2), 3, target_rho=0.4)
    back = moe_lab.Design(**{**d.as_dict(), "bias": tuple(d.as_dict()["bias"])})
    assert back == d


def test_set_acceptance_length_rewrites_the_rates_in_place() -> None:
    rates = torch.zeros(3)
    runner = types.SimpleNamespace(
        rejection_sampler=types.SimpleNamespace(synthetic_conditional_rates=rates)
    )
    pointer = rates.data_ptr()
    new = moe_lab.set_acceptance_length(runner, 2.5)
    assert new == moe_lab._acceptance_rates(2.5, 3) == pytest.approx([1.0, 0.5, 0.0])
    assert rates.tolist() == pytest.approx([1.0, 0.5, 0.0]) and rates.data_ptr() == pointer
    moe_lab.set_acceptance_length(runner, 4.0)
    assert rates.tolist() == pytest.approx([1.0, 1.0, 1.0])
    with pytest.raises(ValueError):
        moe_lab._acceptance_rates(4.5, 3)
    standard = types.SimpleNamespace(rejection_sampler=types.SimpleNamespace())
    assert moe_lab.set_acceptance_length(standard, 2.0) is None


def test_acceptance_rates_give_the_target_tau() -> None:
    for k, tau in ((1, 1.5), (3, 2.5), (5, 3.5), (5, 1.0)):
        conditional = moe_lab._acceptance_rates(tau, k)
        reach, expected = 1.0, 1.0
        for rate in conditional:
            reach *= rate
            expected += reach
        assert expected == pytest.approx(tau)


def test_vectorised_unions_agree_with_the_window_union() -> None:
    g = torch.Generator().manual_seed(0)
    choices = torch.stack([torch.randperm(8, generator=g)[:2] for _ in range(3 * 20)])
    choices = choices.view(3, 20, 2)  # 3 layers, 20 positions, top-2
    mask = moe_lab._expert_mask(choices, 8)
    assert mask.sum(-1).eq(2).all()
    for n in (1, 2, 4):
        assert moe_lab._window_distinct(mask, n).mean().item() == pytest.approx(
            _window_union(choices, n)
        )
    # two sequences at the same offsets read the union of both
    other = moe_lab._expert_mask(torch.roll(choices, 1, dims=1), 8)
    both = moe_lab._aligned_union([mask, other], 1)
    assert moe_lab._window_distinct(mask, 1).mean().item() <= both <= 4
    assert moe_lab._aligned_union([mask, mask], 3) == pytest.approx(
        moe_lab._window_distinct(mask, 3).mean().item()
    )
    assert moe_lab._effective_experts(
        moe_lab._expert_mask(torch.tensor([[[0, 1]] * 10]), 8)
    ) == pytest.approx(2.0)
    uniform = moe_lab._expert_mask(torch.arange(8).view(1, 4, 2), 8)
    assert moe_lab._effective_experts(uniform) == pytest.approx(8.0)


def test_measured_rho_is_the_correlation_of_the_mean_window_union() -> None:
    same = torch.tensor([[[0, 1]] * 10])
    assert moe_lab.measured_rho([(same, 0)], 4, 8, 2) == pytest.approx(1.0)


def test_readme_rows_have_one_row_per_recorded_k() -> None:
    text = moe_lab._readme_rows(shipped())
    ks = sorted({r["k"] for r in shipped()["rows"] if r["k"]})
    for k in ks:
        assert f"\n| {k} | " in text
    assert shipped()["gpu"] in text


def test_routing_rows_list_every_design() -> None:
    text = moe_lab._routing_rows(routing_record())
    assert f"| {speedup.AS_LOADED} | 0.60 |" in text and "| rho 0.5 | 0.70 |" in text
    assert "no routing designs" in moe_lab._routing_rows(
        shipped()
    ) or "| rho" in moe_lab._routing_rows(shipped())


def _generated(marker: str) -> list[str]:
    """docs/gpu.md's lines after a `<!-- generated: ... -->` marker, up to the next blank line."""
    from helpers.common.paths import REPO_ROOT

    lines = (REPO_ROOT / "docs" / "gpu.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if marker in line) + 1
    block = []
    for line in lines[start:]:
        if not line.strip():
            break
        block.append(line.strip())
    return block


def test_gpu_doc_tables_are_the_records() -> None:
    """After a new lab run: `python -m chapters.ch06_moe.tools.moe_lab` and paste both tables into docs/gpu.md."""
    record = shipped()
    table = [line for line in moe_lab._readme_rows(record).splitlines() if line.startswith("|")]
    assert _generated("chapters.ch06_moe.tools.moe_lab (c(k, C)") == table
    assert (
        _generated("chapters.ch06_moe.tools.moe_lab (routing rows)")
        == moe_lab._routing_rows(record).splitlines()
    )


def test_the_command_line_refuses_an_argument_in_one_line(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as done:
        moe_lab.main(["--bogus"])
    assert done.value.code == 2
    assert (
        capsys.readouterr().err.strip().splitlines()[-1].endswith("unrecognized arguments: --bogus")
    )
