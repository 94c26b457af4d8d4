"""An EAGLE-3 drafter in plain PyTorch, with the math of vLLM's llama_eagle3.py and the weight
names of speculators' Eagle3DraftModel (which vLLM also loads).

One Llama decoder layer (`layers[0]`, the original EAGLE code's "midlayer") whose attention sees
[embedding(next token) ‖ hidden], where hidden is, at the first draft step, `fc` applied to three
verifier hidden states concatenated, and at later steps the drafter's own pre-norm output.
`draft_step` is one such step (notebook 03 writes it in a cell); inference runs it with a
`KVCache` (`helpers.eagle3.decode.draft`), training with every root's chain at once
(`draft_chain`, notebook 05's loss).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F  # noqa: N812 - PyTorch's own convention
from torch import nn

__all__ = [
    "DrafterShape",
    "RMSNorm",
    "Eagle3Drafter",
    "Attend",
    "draft_step",
    "KVCache",
    "draft_chain",
    "teacher_forced",
    "MLP",
]


@dataclass(frozen=True)
class DrafterShape:
    """Sizes of a one-layer EAGLE-3 drafter (those of its verifier, except the layer itself)."""

    hidden_size: int
    vocab_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    num_aux_layers: int = 3
    target_hidden_size: int | None = None
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    max_position_embeddings: int = 2048
    draft_vocab_size: int | None = None

    @property
    def draft_vocab(self) -> int:
        """Tokens the drafter scores: its draft vocabulary, else the verifier's whole vocabulary."""
        return self.draft_vocab_size or self.vocab_size

    def to_dict(self) -> dict:
        """The shape as plain data."""
        return asdict(self)


class RMSNorm(nn.Module):
    """Root-mean-square layer norm with a learned scale (as in Llama/Qwen)."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalize the last dimension."""
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class _Attention(nn.Module):
    """Projections of the drafter layer's attention; its input is 2H wide ([embedding ‖ hidden])."""

    def __init__(self, s: DrafterShape) -> None:
        super().__init__()
        h2 = 2 * s.hidden_size
        self.q_proj = nn.Linear(h2, s.num_attention_heads * s.head_dim, bias=False)
        self.k_proj = nn.Linear(h2, s.num_key_value_heads * s.head_dim, bias=False)
        self.v_proj = nn.Linear(h2, s.num_key_value_heads * s.head_dim, bias=False)
        self.o_proj = nn.Linear(s.num_attention_heads * s.head_dim, s.hidden_size, bias=False)


class MLP(nn.Module):
    """SwiGLU feed-forward block."""

    def __init__(self, s: DrafterShape) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(s.hidden_size, s.intermediate_size, bias=False)
        self.up_proj = nn.Linear(s.hidden_size, s.intermediate_size, bias=False)
        self.down_proj = nn.Linear(s.intermediate_size, s.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """silu(gate) * up, projected down."""
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class _MidLayer(nn.Module):
    """The drafter's single decoder layer."""

    def __init__(self, s: DrafterShape) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(s.hidden_size, s.rms_norm_eps)
        self.hidden_norm = RMSNorm(s.hidden_size, s.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(s.hidden_size, s.rms_norm_eps)
        self.self_attn = _Attention(s)
        self.mlp = MLP(s)


class Eagle3Drafter(nn.Module):
    """The trainable part of an EAGLE-3 drafter; token embeddings are borrowed from the verifier.

    With a reduced draft vocabulary (`shape.draft_vocab_size`) `lm_head` scores only those tokens
    and the buffers `d2t` (offsets: verifier id = draft id + d2t[draft id]) and `t2d` (a mask over
    the verifier's vocabulary) map between the two, as in speculators checkpoints.
    """

    def __init__(self, shape: DrafterShape) -> None:
        super().__init__()
        self.shape = shape
        target = shape.target_hidden_size or shape.hidden_size
        self.fc = nn.Linear(shape.num_aux_layers * target, shape.hidden_size, bias=False)
        self.layers = nn.ModuleList([_MidLayer(shape)])  # speculators' and vLLM's names
        self.norm = RMSNorm(shape.hidden_size, shape.rms_norm_eps)
        self.lm_head = nn.Linear(shape.hidden_size, shape.draft_vocab, bias=False)
        reduced = shape.draft_vocab != shape.vocab_size
        self.register_buffer(
            "d2t", torch.zeros(shape.draft_vocab, dtype=torch.int64) if reduced else None
        )
        self.register_buffer(
            "t2d", torch.zeros(shape.vocab_size, dtype=torch.bool) if reduced else None
        )

    def target_ids(self, draft_ids: torch.Tensor) -> torch.Tensor:
        """Verifier token ids of draft-vocabulary ids (the same ids without a draft vocabulary)."""
        return draft_ids if self.d2t is None else draft_ids + self.d2t[draft_ids]

    def draft_scores(self, verifier_logits: torch.Tensor) -> torch.Tensor:
        """The verifier's logits restricted to the draft vocabulary (all of them without one)."""
        return verifier_logits if self.t2d is None else verifier_logits[..., self.t2d]


def _rotary(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Neox-style rotary embedding of x [B, heads, T, d] at integer positions [T]."""
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32, device=x.device) / d))
    freqs = positions[:, None].float() * inv[None]
    cos, sin = torch.cat([freqs.cos(), freqs.cos()], -1), torch.cat([freqs.sin(), freqs.sin()], -1)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def _heads(x: torch.Tensor, n: int, d: int) -> torch.Tensor:
    """[B, T, n*d] -> [B, n, T, d]."""
    b, t, _ = x.shape
    return x.view(b, t, n, d).transpose(1, 2)


#: The drafter layer's self-attention, as `draft_step` calls it: [B, T, 2H] -> [B, T, H].
Attend = Callable[[torch.Tensor], torch.Tensor]


# Twin of draft_step() in notebook 03 (its chapter.json's twins): change both.
def draft_step(
    d: Eagle3Drafter, embeds: torch.Tensor, hidden: torch.Tensor, attend: Attend
) -> tuple[torch.Tensor, torch.Tensor]:
    """One draft step: [embed ‖ hidden] through the drafter's layer; logits and pre-norm output."""
    layer = d.layers[0]
    hidden = layer.hidden_norm(hidden)  # normed before the residual (norm_before_residual)
    x = torch.cat([layer.input_layernorm(embeds), hidden], -1)  # [embed ‖ hidden]: 2H wide
    residual = attend(x) + hidden  # self-attention over the drafter's KV cache
    prenorm = layer.mlp(layer.post_attention_layernorm(residual)) + residual
    return d.lm_head(d.norm(prenorm)), prenorm  # draft-vocabulary logits; the next `hidden`


class KVCache:
    """The drafter's attention over one request with a KV cache, as vLLM's drafter runs it: the
    first call writes the keys of every position it gets, each later call appends its positions."""

    def __init__(self, d: Eagle3Drafter) -> None:
        self.d = d
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        """Causal self-attention of the new positions x [B, T, 2H] over the cache and themselves."""
        s, attn = self.d.shape, self.d.layers[0].self_attn
        b, t, _ = x.shape
        start = 0 if self.keys is None else self.keys.shape[2]
        positions = torch.arange(start, start + t, device=x.device)
        groups = s.num_attention_heads // s.num_key_value_heads
        q = _rotary(
            _heads(attn.q_proj(x), s.num_attention_heads, s.head_dim), positions, s.rope_theta
        )
        k = _rotary(
            _heads(attn.k_proj(x), s.num_key_value_heads, s.head_dim), positions, s.rope_theta
        )
        v = _heads(attn.v_proj(x), s.num_key_value_heads, s.head_dim)
        k, v = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)
        self.keys = k if self.keys is None else torch.cat([self.keys, k], 2)
        self.values = v if self.values is None else torch.cat([self.values, v], 2)
        mask = torch.arange(start + t, device=x.device)[None, :] <= positions[:, None]
        out = F.scaled_dot_product_attention(q, self.keys, self.values, attn_mask=mask)
        return attn.o_proj(out.transpose(1, 2).reshape(b, t, -1))


#: Picks the embeddings fed at draft step j (>= 1) from the logits of step j-1: [B, T, H].
_NextEmbeddings = Callable[[int, torch.Tensor], torch.Tensor]


def _chain_attention(
    d: Eagle3Drafter, keys: list[torch.Tensor], values: list[torch.Tensor], j: int, x: torch.Tensor
) -> torch.Tensor:
    """Step j of every root's chain at once: root t sits at position t + j and attends to the
    step-0 keys of positions <= t plus the keys its own chain wrote at steps 1..j."""
    s, attn = d.shape, d.layers[0].self_attn
    b, t, _ = x.shape
    groups = s.num_attention_heads // s.num_key_value_heads
    scale = s.head_dim**-0.5
    positions = torch.arange(t, device=x.device) + j
    q = _rotary(_heads(attn.q_proj(x), s.num_attention_heads, s.head_dim), positions, s.rope_theta)
    k = _rotary(_heads(attn.k_proj(x), s.num_key_value_heads, s.head_dim), positions, s.rope_theta)
    v = _heads(attn.v_proj(x), s.num_key_value_heads, s.head_dim)
    keys.append(k.repeat_interleave(groups, 1))
    values.append(v.repeat_interleave(groups, 1))
    if j == 0:
        out = F.scaled_dot_product_attention(q, keys[0], values[0], is_causal=True)
    else:
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        base = (q @ keys[0].transpose(-1, -2)) * scale
        base = base.masked_fill(~causal, float("-inf"))
        chain = torch.stack([(q * keys[i]).sum(-1) * scale for i in range(1, j + 1)], -1)
        probs = torch.cat([base, chain], -1).softmax(-1)
        out = probs[..., :t] @ values[0]
        for i in range(1, j + 1):
            out = out + probs[..., t + i - 1, None] * values[i]
    return attn.o_proj(out.transpose(1, 2).reshape(b, t, -1))


def draft_chain(
    d: Eagle3Drafter,
    first_embeds: torch.Tensor,
    aux: torch.Tensor,
    steps: int,
    next_embeds: _NextEmbeddings,
) -> list[torch.Tensor]:
    """Run `steps` draft steps for every root position at once; return the logits of each step.

    Root t (a verified position) starts from the verifier's aux states at t and the embedding of
    the token after t (`first_embeds[:, t]`). Step j sits at position t + j and attends to the
    step-0 keys of positions <= t plus the keys its own chain wrote at steps 1..j: the same
    attention pattern vLLM's drafter KV cache gives, evaluated for all roots in parallel
    (EAGLE-3's "training-time test"). Each step is `draft_step`.
    """
    keys: list[torch.Tensor] = []
    values: list[torch.Tensor] = []
    logits: list[torch.Tensor] = []
    hidden, embeds = d.fc(aux), first_embeds
    for j in range(steps):
        if j > 0:
            embeds = next_embeds(j, logits[-1])
        attend = functools.partial(_chain_attention, d, keys, values, j)
        step_logits, hidden = draft_step(d, embeds, hidden, attend)
        logits.append(step_logits)
    return logits


def teacher_forced(embed: nn.Embedding, tokens: torch.Tensor) -> _NextEmbeddings:
    """Step j of root t sees the true token tokens[t + 1 + j] (zeros past the end): training."""

    def pick(j: int, _logits: torch.Tensor) -> torch.Tensor:
        shifted = torch.zeros_like(tokens)
        n = tokens.shape[1] - 1 - j
        if n > 0:
            shifted[:, :n] = tokens[:, 1 + j :]
        return embed(shifted)

    return pick


def _greedy_feedback(embed: nn.Embedding, d: Eagle3Drafter | None = None) -> _NextEmbeddings:
    """Step j sees the drafter's own argmax from step j-1 (mapped to a verifier id by `d`):
    inference."""
    if d is None:
        return lambda _j, logits: embed(logits.argmax(-1))
    return lambda _j, logits: embed(d.target_ids(logits.argmax(-1)))
