"""chapters.ch06_moe.routing: designed routers do what they say on a model laid out like vLLM's
Qwen3-MoE, and the synthetic τ of a running engine is rewritten in place."""

from __future__ import annotations

import types

import pytest
import torch
from torch import nn

from chapters.ch06_moe import routing

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
    stats = routing.routing_stats(routing.route(model, seqs), [start] * len(seqs), E, [4])
    return stats["rho_4"]


def test_layout_blocks_do_not_overlap() -> None:
    lay = routing._Layout(H, HEADS, KV, HD)
    assert lay.token == slice(1, H // 2)
    assert lay.context.start == H // 2 and lay.context.stop <= H
    assert lay.context_size == min(KV * HD, H // 2 - 1)


def test_as_loaded_routes_on_the_current_token() -> None:
    model = fake_model()
    seq = [7, 9, 7, 9, 3]
    choices = routing.route(model, [seq])[0]  # [layers, T, active]
    assert choices.shape == (L, len(seq), A)
    # U(±1e-3) weights: layer 0's attention adds ~1e-4 of the stream, so equal tokens route alike
    assert torch.equal(choices[:, 0], choices[:, 2]) and torch.equal(choices[:, 1], choices[:, 3])


def test_independent_design_is_uncorrelated_and_context_weight_correlates() -> None:
    model, seqs = fake_model(), random_sequences()
    routing._apply_design(model, routing.Design("ind", 0.0, seed=3), context_scale=4.0)
    independent = rho_of(model, seqs)
    routing._apply_design(model, routing.Design("ctx", 8.0, seed=3), context_scale=4.0)
    correlated = rho_of(model, seqs)
    assert abs(independent) < 0.1, independent
    assert correlated > 0.5, correlated
    # layer 0 attends uniformly: q rows are zero
    assert model.model.layers[0].self_attn.qkv_proj.weight[: HEADS * HD].abs().sum() == 0


def test_calibration_finds_the_context_weight_of_a_target_rho() -> None:
    model, seqs = fake_model(), random_sequences(seed=5)
    design = routing.Design("rho", seed=2)
    gamma = routing._calibrate_context_weight(model, design, 0.5, 4.0, (20, 40))
    routing._apply_design(model, routing.Design("rho", gamma, seed=2), 4.0)
    assert gamma > 0
    assert rho_of(model, seqs) == pytest.approx(0.5, abs=0.15)


def test_zipf_bias_skews_popularity() -> None:
    bias = routing.zipf_bias(E, A, 1.0, seed=0)
    assert len(bias) == E
    model, seqs = fake_model(), random_sequences()
    routing._apply_design(model, routing.Design("flat", seed=4), 4.0)
    flat = routing.routing_stats(routing.route(model, seqs), [0] * len(seqs), E, [1])
    routing._apply_design(model, routing.Design("zipf", bias=tuple(bias), seed=4), 4.0)
    skew = routing.routing_stats(routing.route(model, seqs), [0] * len(seqs), E, [1])
    assert skew["effective_experts"] < flat["effective_experts"] - 2, (skew, flat)


def test_routing_stats_counts_batches_at_the_same_offsets() -> None:
    same = torch.tensor([[[0, 1]] * 6])
    other = torch.tensor([[[2, 3]] * 6])
    stats = routing.routing_stats([same, other], [0, 0], 8, [1, 4])
    assert stats["seq_union_1"] == 2 and stats["batch_union_1"] == 4
    assert stats["rho_4"] == pytest.approx(1.0) and stats["batch_union_4"] == 4


def test_the_as_loaded_design_has_nothing_to_apply() -> None:
    with pytest.raises(ValueError, match="measure it before"):
        routing._apply_design(fake_model(), routing.AS_LOADED, 1.0)


def test_design_round_trips_through_json() -> None:
    d = routing.Design("z", 0.5, (0.1, -0.2), 3, target_rho=0.4)
    back = routing.Design(**{**d.as_dict(), "bias": tuple(d.as_dict()["bias"])})
    assert back == d


def test_set_acceptance_length_rewrites_the_rates_in_place() -> None:
    rates = torch.zeros(3)
    runner = types.SimpleNamespace(
        rejection_sampler=types.SimpleNamespace(synthetic_conditional_rates=rates)
    )
    pointer = rates.data_ptr()
    new = routing.set_acceptance_length(runner, 2.5)
    assert new == routing._acceptance_rates(2.5, 3) == pytest.approx([1.0, 0.5, 0.0])
    assert rates.tolist() == pytest.approx([1.0, 0.5, 0.0]) and rates.data_ptr() == pointer
    routing.set_acceptance_length(runner, 4.0)
    assert rates.tolist() == pytest.approx([1.0, 1.0, 1.0])
    with pytest.raises(ValueError):
        routing._acceptance_rates(4.5, 3)
    standard = types.SimpleNamespace(rejection_sampler=types.SimpleNamespace())
    assert routing.set_acceptance_length(standard, 2.0) is None


def test_acceptance_rates_give_the_target_tau() -> None:
    for k, tau in ((1, 1.5), (3, 2.5), (5, 3.5), (5, 1.0)):
        conditional = routing._acceptance_rates(tau, k)
        reach, expected = 1.0, 1.0
        for rate in conditional:
            reach *= rate
            expected += reach
        assert expected == pytest.approx(tau)
