"""helpers.eagle3.train: the TTT loss, the samplers, the schedule, and the loop's loss hook."""

from __future__ import annotations

import math

import torch
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

from helpers.eagle3.train import (
    MixedSampler,
    RowSampler,
    cosine_lr,
    new_drafter,
    train_drafter,
    ttt_loss,
)


def tiny_verifier() -> Qwen3MoeForCausalLM:
    """A random 4-layer Qwen3-MoE small enough to train against in a second."""
    torch.manual_seed(0)
    config = Qwen3MoeConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    return Qwen3MoeForCausalLM(config).eval()


def test_ttt_loss_is_weighted_per_step_and_agreement_is_a_rate() -> None:
    verifier = tiny_verifier()
    drafter = new_drafter(verifier, [1, 2, 3])
    x = torch.randint(0, 64, (2, 16))
    loss, agree = ttt_loss(drafter, verifier, x, [1, 2, 3], steps=3)
    assert loss.ndim == 0 and loss.item() > 0 and len(agree) == 3
    assert all(0.0 <= a <= 1.0 for a in agree)
    one, _ = ttt_loss(drafter, verifier, x, [1, 2, 3], steps=1)
    assert one.item() < loss.item()  # each extra step adds a weighted, positive term


def test_a_draft_vocabulary_drafter_starts_from_the_verifiers_rows_and_learns_over_them() -> None:
    verifier = tiny_verifier()
    keep = [0, 3, 9, 17, 40, 63]
    drafter = new_drafter(verifier, [1, 2, 3], keep=keep)
    assert torch.equal(drafter.lm_head.weight, verifier.lm_head.weight[keep])
    assert drafter.target_ids(torch.arange(6)).tolist() == keep
    assert drafter.t2d.sum().item() == 6 and drafter.t2d[keep].all()
    x = torch.randint(0, 64, (2, 16))
    loss, agree = ttt_loss(drafter, verifier, x, [1, 2, 3], steps=2)
    full_loss, _ = ttt_loss(new_drafter(verifier, [1, 2, 3]), verifier, x, [1, 2, 3], steps=2)
    assert loss.item() > 0 and loss.item() != full_loss.item() and len(agree) == 2
    # agreement counts a draft as right only when its verifier id is the verifier's argmax
    answers = verifier(x).logits.argmax(-1)
    outside = (~drafter.t2d[answers[:, 1:-1]]).float().mean().item()
    assert agree[0] <= 1.0 - outside + 1e-6


def test_training_lowers_the_loss_and_uses_the_given_loss_fn() -> None:
    verifier = tiny_verifier()
    drafter = new_drafter(verifier, [1, 2, 3])
    rows = [list(range(i, i + 20)) for i in range(0, 40, 5)]
    sampler = MixedSampler(rows, rows, seq_len=16, corpus_share=0.0, seed=0)
    calls = []

    def counting_loss(*args, **kwargs):
        calls.append(1)
        return ttt_loss(*args, **kwargs)

    hist = train_drafter(
        drafter,
        verifier,
        sampler,
        30,
        [1, 2, 3],
        ttt_steps=2,
        batch_size=4,
        lr=5e-3,
        loss_fn=counting_loss,
    )
    assert len(calls) == 30 and len(hist.loss) == 30
    assert sum(hist.loss[-5:]) < sum(hist.loss[:5])


def test_row_sampler_starts_at_exchange_boundaries() -> None:
    rows = [[1, 2, 3], [4, 5], [6, 7, 8, 9]]
    sampler = RowSampler(rows, seq_len=4, seed=0)
    starts = {r[0] for r in (sampler.row() for _ in range(50))}
    assert starts <= {1, 4, 6} and sampler.batch(3).shape == (3, 4)


def test_cosine_lr_warms_up_then_decays_to_the_floor() -> None:
    assert cosine_lr(0, 100, 1.0, warmup=10) == 0.1
    assert cosine_lr(9, 100, 1.0, warmup=10) == 1.0
    assert math.isclose(cosine_lr(100, 100, 1.0, warmup=10, floor=0.1), 0.1)
    assert cosine_lr(50, 100, 1.0, warmup=10) < cosine_lr(20, 100, 1.0, warmup=10)
