"""helpers.eagle3_drafter: the chain's causality and its two input modes."""

from __future__ import annotations

import torch

from helpers.eagle3.drafter import (
    DrafterShape,
    Eagle3Drafter,
    _greedy_feedback,
    draft_chain,
    teacher_forced,
)

SHAPE = DrafterShape(
    hidden_size=32,
    vocab_size=50,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=16,
    intermediate_size=64,
)


def setup(seed: int = 0) -> tuple[Eagle3Drafter, torch.nn.Embedding, torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    d, embed = Eagle3Drafter(SHAPE).eval(), torch.nn.Embedding(50, 32)
    tokens = torch.randint(0, 50, (2, 9))
    aux = torch.randn(2, 9, 3 * 32)
    return d, embed, tokens, aux


def first_embeds(embed: torch.nn.Embedding, tokens: torch.Tensor) -> torch.Tensor:
    return embed(torch.cat([tokens[:, 1:], torch.zeros_like(tokens[:, :1])], 1))


@torch.no_grad()
def test_root_does_not_see_the_future() -> None:
    d, embed, tokens, aux = setup()
    logits = draft_chain(d, first_embeds(embed, tokens), aux, 3, teacher_forced(embed, tokens))
    aux2 = aux.clone()
    aux2[:, 5:] = torch.randn_like(aux2[:, 5:])  # change the verifier states after root 4
    logits2 = draft_chain(d, first_embeds(embed, tokens), aux2, 3, teacher_forced(embed, tokens))
    for a, b in zip(logits, logits2):
        assert torch.allclose(a[:, :5], b[:, :5], atol=1e-5)
        assert not torch.allclose(a[:, 5:], b[:, 5:])


@torch.no_grad()
def test_greedy_feedback_equals_teacher_forcing_on_its_own_argmax() -> None:
    d, embed, tokens, aux = setup(1)
    greedy = draft_chain(d, first_embeds(embed, tokens), aux, 3, _greedy_feedback(embed))
    root = 4  # feed the greedy drafts of root 4 as the "true" continuation of that root
    forced = tokens.clone()
    for j in range(1, 3):
        forced[:, root + 1 + j] = greedy[j - 1][:, root].argmax(-1)
    teacher = draft_chain(d, first_embeds(embed, forced), aux, 3, teacher_forced(embed, forced))
    for g, t in zip(greedy, teacher):
        assert torch.allclose(g[:, root], t[:, root], atol=1e-5)


def test_weight_names_are_speculators_and_vllms() -> None:
    names = set(Eagle3Drafter(SHAPE).state_dict())
    assert {
        "fc.weight",
        "norm.weight",
        "lm_head.weight",
        "layers.0.hidden_norm.weight",
        "layers.0.self_attn.q_proj.weight",
        "layers.0.mlp.down_proj.weight",
    } <= names
    assert not any("embed" in n for n in names)


def test_a_draft_vocabulary_scores_only_its_tokens_and_maps_them_back() -> None:
    keep = torch.tensor([1, 4, 7, 30, 49])
    d = Eagle3Drafter(DrafterShape(**{**SHAPE.to_dict(), "draft_vocab_size": 5}))
    d.d2t = keep - torch.arange(5)
    d.t2d = torch.zeros(50, dtype=torch.bool)
    d.t2d[keep] = True
    assert d.lm_head.out_features == 5 and {"d2t", "t2d"} <= set(d.state_dict())
    assert d.target_ids(torch.tensor([0, 3, 4])).tolist() == [1, 30, 49]
    logits = torch.arange(50.0).expand(2, 50)
    assert torch.equal(d.draft_scores(logits)[0], keep.float())


@torch.no_grad()
def test_greedy_feedback_embeds_the_verifier_id_of_a_draft_id() -> None:
    _, embed, _, _ = setup()
    d = Eagle3Drafter(DrafterShape(**{**SHAPE.to_dict(), "draft_vocab_size": 3}))
    d.d2t = torch.tensor([10, 20, 30])  # draft ids 0, 1, 2 -> verifier ids 10, 21, 32
    logits = torch.tensor([[[0.0, 0.0, 1.0]]])
    assert torch.equal(_greedy_feedback(embed, d)(1, logits), embed(torch.tensor([[32]])))
    assert torch.equal(_greedy_feedback(embed)(1, logits), embed(torch.tensor([[2]])))


def test_kv_cache_in_steps_equals_one_pass_over_the_whole_sequence() -> None:
    """Attending with a KV cache, a few positions at a time, gives what one causal pass gives."""
    from helpers.eagle3.drafter import KVCache, draft_step

    d = Eagle3Drafter(SHAPE)
    torch.manual_seed(3)
    embeds, hidden = torch.randn(1, 7, SHAPE.hidden_size), torch.randn(1, 7, SHAPE.hidden_size)
    with torch.no_grad():
        whole, _ = draft_step(d, embeds, hidden, KVCache(d).attend)
        cache = KVCache(d)
        parts = [
            draft_step(d, embeds[:, a:b], hidden[:, a:b], cache.attend)[0]
            for a, b in ((0, 4), (4, 5), (5, 7))
        ]
    assert torch.allclose(torch.cat(parts, 1), whole, atol=1e-5)
    assert cache.keys is not None and cache.keys.shape[2] == 7
