"""Train the tiny Qwen3-MoE verifier from scratch on the chat corpus (kit.tiny_recipe, make
tiny-models): a real Qwen3-MoE architecture, scaled down."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tqdm.auto import tqdm
from transformers import PreTrainedTokenizerBase, Qwen3MoeConfig, Qwen3MoeForCausalLM

from helpers.eagle3.train import RowSampler, cosine_lr

__all__ = []  # nothing here is used outside the kit


@dataclass(frozen=True)
class _VerifierShape:
    """Sizes of the tiny verifier: a real Qwen3-MoE architecture, scaled down."""

    hidden_size: int = 128
    num_hidden_layers: int = 8
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 32
    num_experts: int = 8
    num_experts_per_tok: int = 2
    moe_intermediate_size: int = 128
    max_position_embeddings: int = 2048


def _verifier_config(
    tok: PreTrainedTokenizerBase, shape: _VerifierShape = _VerifierShape()
) -> Qwen3MoeConfig:
    """A Qwen3MoeConfig for the tokenizer's vocabulary, with <|im_end|> as end of turn."""
    return Qwen3MoeConfig(
        vocab_size=len(tok),
        hidden_size=shape.hidden_size,
        intermediate_size=2 * shape.hidden_size,
        moe_intermediate_size=shape.moe_intermediate_size,
        num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=shape.num_key_value_heads,
        head_dim=shape.head_dim,
        num_experts=shape.num_experts,
        num_experts_per_tok=shape.num_experts_per_tok,
        norm_topk_prob=True,
        max_position_embeddings=shape.max_position_embeddings,
        tie_word_embeddings=False,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        bos_token_id=None,
        dtype="float32",
    )


def train_verifier(
    tok: PreTrainedTokenizerBase,
    encoded: list[list[int]],
    steps: int,
    batch_size: int = 16,
    seq_len: int = 384,
    lr: float = 3e-3,
    seed: int = 0,
    shape: _VerifierShape = _VerifierShape(),
) -> tuple[Qwen3MoeForCausalLM, list[float]]:
    """Train a fresh verifier for `steps` AdamW steps; return it (eval mode) and the loss curve."""
    torch.manual_seed(seed)
    model = Qwen3MoeForCausalLM(_verifier_config(tok, shape))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    sampler, losses = RowSampler(encoded, seq_len, seed), []
    model.train()
    bar = tqdm(range(steps), desc="verifier", unit="step")
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = cosine_lr(step, steps, lr)
        x = sampler.batch(batch_size)
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if step % 10 == 0:
            bar.set_postfix(loss=f"{sum(losses[-10:]) / len(losses[-10:]):.3f}")
    return model.eval(), losses
