"""A MoE verify pass streams the union of its positions' experts; `step_bytes` prices a union."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from helpers.common.configs import read_config
from helpers.common.prompts import as_messages

__all__ = [
    "BYTES_BF16",
    "MoeShape",
    "independent_union",
    "shared_union",
    "answer_choices",
    "union_table",
    "batch_union",
    "correlation",
    "union_with_correlation",
    "step_bytes",
]

BYTES_BF16 = 2
#: Per answer: its router choices [layers, positions, active] and its first answer position.
_Choices = Sequence[tuple[torch.Tensor, int]]


@dataclass(frozen=True)
class MoeShape:
    """The sizes of a Qwen3-MoE verifier that decide what a decode step reads."""

    name: str
    layers: int
    hidden: int
    experts: int
    active: int
    expert_ffn: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    draft_vocab: int = 0  # the drafter's lm_head rows; 0: the full vocabulary
    draft_ffn: int = 0  # the drafter layer's MLP width; 0: 4 x hidden

    @classmethod
    def from_config(cls, name: str, c: dict[str, Any]) -> MoeShape:
        """A shape from a Qwen3-MoE config.json."""
        hidden, heads = c["hidden_size"], c["num_attention_heads"]
        experts = c.get("num_experts") or c["num_local_experts"]
        sizes = (c["num_experts_per_tok"], c["moe_intermediate_size"], heads)
        head_dim = c.get("head_dim") or hidden // heads
        kv = (c["num_key_value_heads"], head_dim, c["vocab_size"])
        return cls(name, c["num_hidden_layers"], hidden, experts, *sizes, *kv)

    def with_drafter(self, config: dict[str, Any]) -> MoeShape:
        """This shape with the lm_head and MLP of an EAGLE-3 drafter config (speculators format)."""
        layer = config.get("transformer_layer_config", config)
        vocab = config.get("draft_vocab_size") or layer.get("vocab_size") or self.vocab
        ffn = layer.get("intermediate_size") or 4 * self.hidden
        return replace(self, draft_vocab=vocab, draft_ffn=ffn)

    def expert_params(self) -> int:
        """Parameters of one routed expert (gate, up and down projections)."""
        return 3 * self.hidden * self.expert_ffn

    def dense_params_per_layer(self) -> int:
        """Attention projections and the router: read once per step, whatever the token count."""
        attn = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        return attn + self.hidden * self.experts

    def drafter_params(self) -> int:
        """A one-layer EAGLE-3 drafter: fc (3H→H), a 2H-input Llama layer, `draft_vocab` lm_head."""
        h, d = self.hidden, self.head_dim
        attn = 2 * h * d * (self.heads + 2 * self.kv_heads) + self.heads * d * h
        mlp = 3 * h * (self.draft_ffn or 4 * h)
        return 3 * h * h + attn + mlp + (self.draft_vocab or self.vocab) * h


def shape_from_folder(verifier: str | Path, drafter: dict[str, Any] | None = None) -> MoeShape:
    """A verifier's shape from its folder's config.json, with a drafter config's when given."""
    shape = MoeShape.from_config(Path(verifier).name, read_config(verifier))
    return shape if drafter is None else shape.with_drafter(drafter)


def independent_union(experts: int, active: int, n: float) -> float:
    """Expected distinct experts when n positions each pick `active` of `experts` independently."""
    return experts * (1 - (1 - active / experts) ** n)


def shared_union(experts: int, active: int, sequences: float) -> float:
    """Distinct experts when positions of one sequence all agree, sequences independent."""
    return independent_union(experts, active, sequences)


@torch.no_grad()
def _router_choices(verifier: Any, ids: Sequence[int]) -> torch.Tensor:
    """The experts each position routes to, per layer: [layers, T, active] (transformers MoE)."""
    tensor = torch.tensor([list(ids)], device=verifier.device)
    out = verifier(input_ids=tensor, output_router_logits=True)
    active = verifier.config.num_experts_per_tok
    return torch.stack([lg.topk(active, dim=-1).indices.cpu() for lg in out.router_logits])


@torch.no_grad()
def answer_choices(
    verifier: Any, tokenizer: Any, prompts: Sequence[str], max_tokens: int
) -> list[tuple[torch.Tensor, int]]:
    """Greedy answers to chat prompts: per answer, its router choices and first answer position."""
    out = []
    for prompt in prompts:
        ids = tokenizer.apply_chat_template(
            as_messages(prompt), add_generation_prompt=True, return_tensors="pt", return_dict=True
        )["input_ids"].to(verifier.device)
        answer = verifier.generate(ids, max_new_tokens=max_tokens, do_sample=False)[0].tolist()
        out.append((_router_choices(verifier, answer), ids.shape[1]))
    return out


def _distinct(choices: torch.Tensor) -> torch.Tensor:
    """Distinct experts per layer of [layers, positions, active] choices: [layers]."""
    flat = choices.reshape(choices.shape[0], -1)
    return torch.tensor([len(set(row.tolist())) for row in flat], dtype=torch.float32)


def _window_union(choices: torch.Tensor, n: int, start: int = 0) -> float:
    """Mean distinct experts per layer over every window of n consecutive positions from `start`."""
    t = choices.shape[1]
    sizes = [_distinct(choices[:, i : i + n]).mean().item() for i in range(start, t - n + 1)]
    return sum(sizes) / len(sizes) if sizes else float("nan")


def union_table(choices: _Choices, ns: Sequence[int], experts: int, active: int) -> pd.DataFrame:
    """Per window size n: the measured mean union of the answers and the two bounds."""
    per_seq = {n: [u for u in (_window_union(c, n, s) for c, s in choices) if u == u] for n in ns}
    return pd.DataFrame(
        [
            {"positions": n, "measured_union": sum(us) / len(us)}
            | {"independent_union": independent_union(experts, active, n)}
            | {"shared_bound": float(active), "sequences": len(us)}
            for n, us in per_seq.items()
        ]
    )


def batch_union(choices: _Choices, batch: int, n: int, samples: int = 50, seed: int = 0) -> float:
    """Mean distinct experts per layer over `batch` sequences × n consecutive answer positions."""
    rng = random.Random(seed)
    eligible = [(c, s) for c, s in choices if c.shape[1] - s >= n]
    sizes = []
    for _ in range(samples):
        picks = [eligible[rng.randrange(len(eligible))] for _ in range(batch)]
        starts = [(c, rng.randrange(s, c.shape[1] - n + 1)) for c, s in picks]
        window = torch.cat([c[:, i : i + n] for c, i in starts], dim=1)
        sizes.append(_distinct(window).mean().item())
    return sum(sizes) / len(sizes)


def correlation(measured: float, experts: int, active: int, n: int) -> float:
    """How far routing sits from independent (0) towards fully shared (1) for n positions."""
    indep = independent_union(experts, active, n)
    return (indep - measured) / (indep - active) if indep > active else 0.0


def union_with_correlation(experts: int, active: int, batch: int, n: int, rho: float) -> float:
    """Expected union of `batch` sequences × n positions, correlated by rho within a sequence."""
    indep = independent_union(experts, active, batch * n)
    shared = shared_union(experts, active, batch)
    return indep - rho * (indep - shared)


# Twin of step_bytes() in notebooks/06_does_eagle3_pay_on_moe.ipynb: change both.
def step_bytes(
    shape: MoeShape,
    batch: int,
    union: float,
    context: int,
    drafter_steps: int = 0,
    bytes_per_param: int = BYTES_BF16,
) -> float:
    """Bytes a decode step reads: dense, lm_head, `union` experts a layer, KV, the drafter's."""
    weights = shape.layers * (shape.dense_params_per_layer() + union * shape.expert_params())
    weights += shape.vocab * shape.hidden  # lm_head; embeddings are a gather, not a stream
    kv = batch * context * shape.layers * 2 * shape.kv_heads * shape.head_dim
    drafter = drafter_steps * shape.drafter_params()
    return (weights + drafter) * bytes_per_param + kv * bytes_per_param
