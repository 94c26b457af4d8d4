"""tools/dflash.py: the block forward equals a one-anchor-at-a-time reference, the taps follow
DFlash's recipe, training lowers the loss, a checkpoint round-trips in vLLM's format, and features
and training stay on the verifier's device."""

from __future__ import annotations

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

from chapters.ch07_field.tools import dflash
from helpers.eagle3.taps import verifier_taps
from helpers.eagle3.train import drafter_shape_for
from tests.eagle3.test_train import tiny_verifier

K, MASK = 3, 0


def reference_logits(d, verifier, aux, tokens, p: int, k: int) -> torch.Tensor:
    """One anchor of one row, attention written out in full: context 0..p, then the block."""
    s = d.shape
    embed = verifier.get_input_embeddings()
    hidden = torch.cat([embed(tokens[p + 1 : p + 2]), embed(torch.tensor([MASK] * k))])
    pos = torch.arange(p + 1, p + 2 + k)
    context = d.hidden_norm(d.fc(aux[: p + 1]))
    g = s.num_attention_heads // s.num_key_value_heads

    def heads(x, n):
        return x.view(x.shape[0], n, s.head_dim)

    for layer in d.layers:  # every layer reads the same context through its own k/v projections
        a = layer.self_attn
        x = layer.input_layernorm(hidden)
        keys = torch.cat(
            [
                dflash._rope(a.k_norm(heads(a.k_proj(context), s.num_key_value_heads)),
                            torch.arange(p + 1)[:, None], s.rope_theta),
                dflash._rope(a.k_norm(heads(a.k_proj(x), s.num_key_value_heads)),
                            pos[:, None], s.rope_theta),
            ]
        ).repeat_interleave(g, 1)  # fmt: skip
        values = torch.cat(
            [
                heads(a.v_proj(context), s.num_key_value_heads),
                heads(a.v_proj(x), s.num_key_value_heads),
            ]
        ).repeat_interleave(g, 1)
        q = dflash._rope(
            a.q_norm(heads(a.q_proj(x), s.num_attention_heads)), pos[:, None], s.rope_theta
        )
        probs = (torch.einsum("qhd,khd->hqk", q, keys) * s.head_dim**-0.5).softmax(-1)
        out = torch.einsum("hqk,khd->qhd", probs, values).reshape(k + 1, -1)
        residual = hidden + a.o_proj(out)
        hidden = residual + layer.mlp(layer.post_attention_layernorm(residual))
    return verifier.lm_head(d.norm(hidden[1:]))


def test_block_logits_equal_one_anchor_at_a_time() -> None:
    verifier = tiny_verifier()
    torch.manual_seed(1)
    d = dflash.DFlashDrafter(drafter_shape_for(verifier, 2), num_layers=2)
    x = torch.randint(1, 64, (2, 20))
    aux, _ = verifier_taps(verifier, x, [1, 3])
    anchors = torch.tensor([[0, 7, 15], [3, 4, 12]])
    with torch.no_grad():
        got = dflash._block_logits(d, verifier, aux, x, anchors, K, MASK)
        for row in range(2):
            for j, p in enumerate(anchors[row].tolist()):
                want = reference_logits(d, verifier, aux[row], x[row], p, K)
                torch.testing.assert_close(got[row, j], want, rtol=1e-4, atol=1e-4)


def test_target_layers_follow_dflash_and_match_the_seed_speculator() -> None:
    assert dflash.target_layer_ids(48, 5) == [1, 12, 23, 34, 45]
    assert dflash.target_layer_ids(8, 5) == [1, 2, 3, 4, 5]
    assert dflash.target_layer_ids(8, 1) == [4]


def test_training_lowers_the_loss_and_agreement_is_a_rate() -> None:
    verifier = tiny_verifier()
    torch.manual_seed(0)
    d = dflash.DFlashDrafter(drafter_shape_for(verifier, 2))
    rows = torch.randint(1, 64, (8, 24))
    f = dflash.verifier_features(verifier, rows, [1, 3], batch=4)
    assert f.aux.shape == (8, 24, 2 * 32) and f.answers.shape == (8, 24)
    hist = dflash.train_dflash(
        d, verifier, f, 40, K, MASK, batch_size=4, anchors_per_row=6, lr=5e-3
    )
    assert sum(hist.loss[-5:]) < sum(hist.loss[:5])
    assert all(0.0 <= a <= 1.0 for step in hist.agreement for a in step)


def test_anchors_leave_room_for_the_block() -> None:
    g = torch.Generator().manual_seed(0)
    a = dflash._random_anchors(20, 3, 16, K, g)
    assert a.shape == (3, 16) and int(a.max()) <= 20 - K - 2 and int(a.min()) >= 0


def test_checkpoint_round_trips_with_vllms_names(tmp_path) -> None:
    verifier = tiny_verifier()
    shape = drafter_shape_for(verifier, 2)
    d = dflash.DFlashDrafter(shape)
    config = dflash.dflash_config(shape, [0, 2], MASK, K + 1)
    dflash.save_dflash(d, tmp_path, config)
    back, cfg = dflash._load_dflash(tmp_path)
    assert (
        cfg["architectures"] == [dflash._ARCHITECTURE]
        and cfg["dflash_config"]["mask_token_id"] == 0
    )
    names = set(back.state_dict())
    assert {"fc.weight", "hidden_norm.weight", "norm.weight"} <= names
    assert "layers.0.self_attn.k_norm.weight" in names and "layers.0.mlp.gate_proj.weight" in names
    assert not any(n.startswith(("lm_head", "embed_tokens", "mask_hidden")) for n in names)
    assert all(torch.equal(v, back.state_dict()[k]) for k, v in d.state_dict().items())


def test_a_multi_layer_drafter_keeps_every_k_norm_at_one_through_training() -> None:
    verifier = tiny_verifier()
    torch.manual_seed(0)
    one, two = (dflash.DFlashDrafter(drafter_shape_for(verifier, 2), n) for n in (1, 2))
    assert not one.frozen_k_norm and two.frozen_k_norm
    f = dflash.verifier_features(verifier, torch.randint(1, 64, (4, 16)), [1, 3])
    dflash.train_dflash(two, verifier, f, 3, K, MASK, batch_size=2, anchors_per_row=4, lr=1e-2)
    for layer in two.layers:
        w = layer.self_attn.k_norm.weight
        assert torch.equal(w, torch.ones_like(w))


#: What CUDA lets cross devices: copies, and Module.to's check of the tensor it moved.
CROSSING = {torch.Tensor.copy_, torch._has_compatible_shallow_copy_type}


class OneDevice(TorchFunctionMode):
    """Fails an op that mixes devices, as CUDA does (a 0-dim CPU tensor is a scalar there), so the
    meta device can stand in for a GPU; a meta tensor read back as a number gives 0."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [x for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
        devices = {x.device for x in tensors if not (x.device.type == "cpu" and x.ndim == 0)}
        if len(devices) > 1 and func not in CROSSING:
            raise RuntimeError(f"{func.__name__} mixes devices {sorted(map(str, devices))}")
        if func is torch.Tensor.item and tensors[0].is_meta:
            return 0.0
        return func(*args, **kwargs)


def test_one_device_catches_a_cpu_index_into_a_meta_embedding() -> None:
    embed = torch.nn.Embedding(8, 4).to("meta")
    with OneDevice(), pytest.raises(RuntimeError, match="mixes devices"):
        embed(torch.tensor([1]))


def test_training_moves_the_drafter_and_the_rows_to_the_verifiers_device() -> None:
    verifier = tiny_verifier().to("meta")  # a GPU's stand-in: what a step makes must go there
    d = dflash.DFlashDrafter(drafter_shape_for(verifier, 2), num_layers=2)
    tokens = torch.randint(1, 64, (4, 16))  # features kept on the CPU: rows move per step
    f = dflash._Features(tokens, torch.randn(4, 16, 2 * 32), torch.randint(1, 64, (4, 16)))
    with OneDevice():
        hist = dflash.train_dflash(d, verifier, f, 2, K, MASK, batch_size=2, anchors_per_row=4)
    assert len(hist.loss) == 2
    assert {p.device.type for p in d.parameters()} == {"meta"}


def test_features_are_computed_on_the_verifiers_device(monkeypatch) -> None:
    verifier = tiny_verifier().to("meta")
    seen = []

    def taps(v, x, aux_layers):
        seen.append(x.device)
        return torch.zeros(*x.shape, 64, device=x.device), torch.zeros(*x.shape, 8, device=x.device)

    monkeypatch.setattr(dflash, "verifier_taps", taps)
    f = dflash.verifier_features(verifier, torch.randint(1, 64, (4, 16)), [1, 3], batch=2)
    assert {dev.type for dev in seen} == {"meta"} and f.tokens.is_meta and f.aux.is_meta
