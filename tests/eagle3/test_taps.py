"""helpers.eagle3.taps: vLLM's default EAGLE-3 taps, drafter overrides, one-line errors."""

from __future__ import annotations

import pytest

from helpers.eagle3.taps import aux_layers_for, default_aux_layers, verifier_taps


@pytest.mark.parametrize(("layers", "taps"), [(8, (2, 4, 5)), (48, (2, 24, 45)), (94, (2, 47, 91))])
def test_default_aux_layers(layers: int, taps: tuple[int, ...]) -> None:
    assert default_aux_layers(layers) == taps
    assert aux_layers_for({"num_hidden_layers": layers}) == taps


@pytest.mark.parametrize("layers", [4, 5, 6])
def test_default_collides_for_shallow_verifiers(layers: int) -> None:
    with pytest.raises(ValueError, match="repeat a layer.*eagle_aux_hidden_state_layer_ids"):
        aux_layers_for({"num_hidden_layers": layers})


def test_default_out_of_range_for_two_layers() -> None:
    with pytest.raises(ValueError, match=r"outside 0\.\.1"):
        aux_layers_for({"num_hidden_layers": 2})


def test_drafter_override_wins() -> None:
    drafter = {"eagle_aux_hidden_state_layer_ids": [1, 3, 5]}
    assert aux_layers_for({"num_hidden_layers": 6}, drafter) == (1, 3, 5)
    assert aux_layers_for({"num_hidden_layers": 8}, drafter) == (1, 3, 5)
    nested = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 2]}}
    assert aux_layers_for({"num_hidden_layers": 8}, nested) == (0, 2)


def test_override_out_of_range_raises() -> None:
    with pytest.raises(ValueError, match=r"include \[8\]"):
        aux_layers_for({"num_hidden_layers": 8}, {"eagle_aux_hidden_state_layer_ids": [2, 4, 8]})


def test_tap_k_is_the_residual_stream_after_k_layers() -> None:
    """Tap k is the output of the 0-based decoder layer k - 1 (0: the embeddings)."""
    import torch
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.manual_seed(0)
    config = Qwen3MoeConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, moe_intermediate_size=8,
        num_hidden_layers=4, num_attention_heads=2, num_key_value_heads=1, head_dim=8,
        num_experts=4, num_experts_per_tok=2,
    )  # fmt: skip
    model = Qwen3MoeForCausalLM(config).eval()
    outputs: list[torch.Tensor] = []
    hooks = [
        layer.register_forward_hook(
            lambda _m, _i, out: outputs.append(out[0] if isinstance(out, tuple) else out)
        )
        for layer in model.model.layers
    ]
    x = torch.tensor([[1, 5, 9, 2, 7]])
    taps, _ = verifier_taps(model, x, [0, 1, 2, 3])
    for hook in hooks:
        hook.remove()
    embeddings = model.model.embed_tokens(x)
    per_tap = taps.split(config.hidden_size, dim=-1)
    assert torch.equal(per_tap[0], embeddings)
    for k in (1, 2, 3):
        assert torch.allclose(per_tap[k], outputs[k - 1]), f"tap {k} is not layer {k - 1}'s output"
    assert not torch.allclose(per_tap[2], outputs[2])  # and not the layer after it
