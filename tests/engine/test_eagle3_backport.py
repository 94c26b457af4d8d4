"""The eagle3 patch: version gate, aux layers, the PR #26485 hooks on a pre-0.11.1 class shape."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers.common.envinfo import vllm_version
from helpers.engine import eagle3_backport as eagle3_patch
from helpers.engine.eagle3_backport import apply_eagle3_patch, class_supports_eagle3, patch_needed

HIDDEN, VOCAB, LAYERS = 8, 16, 8


# --------------------------------------------------------------------------- stand-in classes


class _Layer(nn.Module):
    """A decoder layer with vLLM's calling convention: (positions, hidden, residual) -> (hidden, residual)."""

    def __init__(self) -> None:
        super().__init__()
        self.mix = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, positions, hidden_states, residual):
        residual = hidden_states if residual is None else hidden_states + residual  # fused add
        return self.mix(residual), residual


class _Norm(nn.Module):
    """vLLM's RMSNorm(x, residual) convention: returns (normed(x + residual), x + residual)."""

    def forward(self, hidden_states, residual=None):
        stream = hidden_states if residual is None else hidden_states + residual
        return stream * 2.0, stream


def make_pre_pr_classes() -> tuple[type, type]:
    """Fresh (CausalLM, Model) classes shaped like vLLM 0.11.0's Qwen3MoeForCausalLM / Qwen3MoeModel."""

    class Qwen3MoeModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
            self.start_layer, self.end_layer = 0, LAYERS
            self.layers = nn.ModuleList(_Layer() for _ in range(LAYERS))
            self.norm = _Norm()

        def get_input_embeddings(self, input_ids):
            return self.embed_tokens(input_ids)

        def forward(self, input_ids, positions, intermediate_tensors=None, inputs_embeds=None):
            hidden_states = (
                inputs_embeds if inputs_embeds is not None else self.get_input_embeddings(input_ids)
            )
            residual = None
            for i in range(self.start_layer, self.end_layer):
                hidden_states, residual = self.layers[i](positions, hidden_states, residual)
            hidden_states, _ = self.norm(hidden_states, residual)
            return hidden_states

    class Qwen3MoeForCausalLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = Qwen3MoeModel()
            self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

        def forward(self, input_ids, positions, intermediate_tensors=None, inputs_embeds=None):
            return self.model(input_ids, positions, intermediate_tensors, inputs_embeds)

    return Qwen3MoeForCausalLM, Qwen3MoeModel


def residual_streams(model: nn.Module, input_ids: torch.Tensor) -> list[torch.Tensor]:
    """By hand: the residual stream after k layers, k = 0..L (stream_{k+1} = s_k + mix_k(s_k))."""
    stream = model.model.embed_tokens(input_ids)
    streams = [stream]
    for layer in model.model.layers:
        stream = stream + layer.mix(stream)
        streams.append(stream)
    return streams


@pytest.fixture
def patched() -> tuple[type, type]:
    """A freshly patched pair of pre-PR stand-in classes."""
    model_cls, model_base_cls = make_pre_pr_classes()
    assert apply_eagle3_patch(model_cls, model_base_cls) is True
    return model_cls, model_base_cls


# --------------------------------------------------------------------------- versions and layers


@pytest.mark.parametrize(
    ("version", "needed"),
    [
        ("0.11.0", True),
        ("0.10.2", True),
        ("0.11.1", False),
        ("0.31.0+cpu", False),
        ("0.31.0", False),
        ("0.11.1rc1", False),
        ("0.11.0.dev12+g1234abc", True),
    ],
)
def test_patch_needed_by_release(version: str, needed: bool) -> None:
    assert patch_needed(version) is needed


def test_patch_needed_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="not a vLLM version"):
        patch_needed("latest")


def test_installed_vllm_does_not_need_it() -> None:
    assert vllm_version().startswith("0.31")
    assert patch_needed(vllm_version()) is False


# --------------------------------------------------------------------------- the real vLLM class


def test_installed_class_is_left_alone() -> None:
    from vllm.model_executor.models.qwen3_moe import Qwen3MoeForCausalLM, Qwen3MoeModel

    def snapshot() -> tuple:
        return (
            Qwen3MoeForCausalLM.__bases__,
            set(vars(Qwen3MoeForCausalLM)),
            Qwen3MoeModel.__bases__,
            set(vars(Qwen3MoeModel)),
            Qwen3MoeModel.forward,
        )

    before = snapshot()
    assert class_supports_eagle3(Qwen3MoeForCausalLM)
    assert apply_eagle3_patch() is False
    assert apply_eagle3_patch(Qwen3MoeForCausalLM, Qwen3MoeModel) is False
    assert snapshot() == before
    status = eagle3_patch.eagle3_status()
    assert status.class_supports_eagle3 is True and status.patch_applied is False
    assert "no-op" in status.explanation


# --------------------------------------------------------------------------- the pre-PR stand-in


def test_stand_in_starts_without_eagle3() -> None:
    model_cls, _ = make_pre_pr_classes()
    assert not class_supports_eagle3(model_cls)


def test_patch_makes_supports_eagle3_true(patched: tuple[type, type]) -> None:
    from vllm.model_executor.models.interfaces import SupportsEagle3, supports_eagle3

    model_cls, model_base_cls = patched
    assert supports_eagle3(model_cls) and supports_eagle3(model_cls())
    assert SupportsEagle3 in model_cls.__mro__
    assert model_base_cls.aux_hidden_state_layers == ()


def test_patched_default_layers(patched: tuple[type, type]) -> None:
    model = patched[0]()
    assert model.get_eagle3_aux_hidden_state_layers() == (2, LAYERS // 2, LAYERS - 3)


def test_patched_forward_returns_the_residual_stream(patched: tuple[type, type]) -> None:
    torch.manual_seed(0)
    model = patched[0]()
    ids, positions = torch.tensor([1, 5, 7]), torch.arange(3)
    plain = model(ids, positions)
    model.set_aux_hidden_state_layers((1, 3))
    hidden, aux = model(ids, positions)
    streams = residual_streams(model, ids)
    assert len(aux) == 2
    torch.testing.assert_close(aux[0], streams[1])
    torch.testing.assert_close(aux[1], streams[3])
    torch.testing.assert_close(hidden, plain)
    torch.testing.assert_close(hidden, streams[LAYERS] * 2.0)


def test_aux_layer_zero_is_the_embeddings(patched: tuple[type, type]) -> None:
    model = patched[0]()
    ids = torch.tensor([2, 3])
    model.set_aux_hidden_state_layers((0,))
    _, aux = model(ids, torch.arange(2))
    torch.testing.assert_close(aux[0], model.model.embed_tokens(ids))


def test_without_taps_forward_is_unchanged(patched: tuple[type, type]) -> None:
    torch.manual_seed(0)
    reference_cls, _ = make_pre_pr_classes()
    reference = reference_cls()
    model = patched[0]()
    model.load_state_dict(reference.state_dict())
    ids = torch.tensor([4, 9, 11])
    out = model(ids, torch.arange(3))
    assert isinstance(out, torch.Tensor)
    torch.testing.assert_close(out, reference(ids, torch.arange(3)))


def test_apply_is_idempotent(patched: tuple[type, type]) -> None:
    model_cls, model_base_cls = patched
    before = (model_cls.__bases__, dict(vars(model_cls)), dict(vars(model_base_cls)))
    assert apply_eagle3_patch(model_cls, model_base_cls) is False
    assert (model_cls.__bases__, dict(vars(model_cls)), dict(vars(model_base_cls))) == before
    model = model_cls()
    model.set_aux_hidden_state_layers((2,))
    _, aux = model(torch.tensor([1]), torch.arange(1))
    assert len(aux) == 1  # one tap, not a doubly-wrapped forward


def test_describe_patch_names_the_changes() -> None:
    text = eagle3_patch.describe_patch()
    for needle in (
        "#26485",
        "aux_hidden_state_layers",
        "set_aux_hidden_state_layers",
        "get_eagle3_aux_hidden_state_layers",
        "SupportsEagle3",
        "vllm.general_plugins",
    ):
        assert needle in text


def test_structural_fallback_when_bases_cannot_change() -> None:
    from vllm.model_executor.models.interfaces import supports_eagle3

    class Model:
        layers = list(range(LAYERS))

        def forward(self, *args):
            return args

    class CausalLM:  # bases (object,) + SupportsEagle3 has no consistent MRO
        def __init__(self) -> None:
            self.model = Model()

    assert apply_eagle3_patch(CausalLM, Model) is True
    assert supports_eagle3(CausalLM) and supports_eagle3(CausalLM())
    assert CausalLM().get_eagle3_aux_hidden_state_layers() == (2, 4, 5)
