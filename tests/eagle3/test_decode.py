"""The from-scratch EAGLE-3 reference: round logic, counting, and exact agreement with vLLM (k=3, T=0)."""

from __future__ import annotations

import pytest

from helpers.common.counters import SpecCounters
from helpers.common.paths import DATA_DIR
from helpers.eagle3 import decode as ref


def test_accept_greedy_correction_and_bonus() -> None:
    r = ref.accept_greedy([5, 6, 7], [5, 9, 7, 8])
    assert (r.accepted, r.emitted, r.labels) == (1, (5, 9), ["accepted", "correction"])
    r = ref.accept_greedy([5, 6, 7], [5, 6, 7, 8])
    assert (r.accepted, r.emitted, r.labels) == (3, (5, 6, 7, 8), ["accepted"] * 3 + ["bonus"])
    r = ref.accept_greedy([4, 6, 7], [5, 6, 7, 8])
    assert (r.accepted, r.emitted, r.labels) == (0, (5,), ["correction"]), (
        "acceptance stops at the first mismatch"
    )


def test_counters_count_like_vllm() -> None:
    out = ref.ReferenceOutput(
        [1],
        [9, 5, 6, 7, 8],
        ["prefill"] + ["accepted"] * 3 + ["bonus"],
        k=3,
        rounds=[ref.Round((5, 6, 7), 3, (5, 6, 7, 8)), ref.Round((1, 2, 3), 2, (1, 2, 4))],
    )
    # The second round's accepted drafts count although max_tokens cut them from the output.
    assert out.counters() == SpecCounters(2, 6, 5, (2, 2, 1))


@pytest.fixture(scope="module")
def stand_in(_tiny_pair_source) -> ref.ReferencePair:
    """The tiny pair (or its random stand-in) loaded for the reference, without a tokenizer."""
    from helpers.eagle3.checkpoint import load_drafter, load_verifier
    from helpers.eagle3.taps import drafter_aux_layer_ids

    verifier = load_verifier(_tiny_pair_source.verifier)
    drafter, config = load_drafter(_tiny_pair_source.drafter)
    return ref.ReferencePair(verifier, drafter, list(drafter_aux_layer_ids(config)), set(), None)


def test_generate_respects_max_tokens_and_labels(stand_in: ref.ReferencePair) -> None:
    out = ref.speculative_generate(stand_in, [1, 17, 33, 250, 9], k=3, max_tokens=12)
    assert len(out.token_ids) == len(out.labels) == 12
    assert out.labels[0] == "prefill" and set(out.labels[1:]) <= {"accepted", "correction", "bonus"}
    emitted = [t for r in out.rounds for t in r.emitted]
    assert emitted[: len(out.token_ids) - 1] == out.token_ids[1:]
    assert all(len(r.drafted) == 3 for r in out.rounds)


def test_reference_is_plain_greedy_decoding(stand_in: ref.ReferencePair) -> None:
    """Whatever the drafter proposes, greedy draft-and-verify emits the verifier's greedy tokens."""
    prompt = [1, 17, 33, 250, 9]
    out = ref.speculative_generate(stand_in, prompt, k=2, max_tokens=10)
    ids = list(prompt)
    for _ in range(10):
        targets, _ = ref.verify(stand_in, ids)
        ids.append(targets[-1])
    assert out.token_ids == ids[len(prompt) :]


SHIPPED = (DATA_DIR / "tiny-qwen3-moe-eagle3" / "model.safetensors").is_file()


@pytest.mark.vllm
@pytest.mark.skipif(not SHIPPED, reason="needs the shipped tiny pair (make tiny-models)")
def test_reference_matches_vllm_exactly() -> None:
    """k=3, T=0, 2 prompts per category: same tokens per request and the same counters, exactly."""
    from helpers.common.profiles import load_profile
    from helpers.common.prompts import load_prompts
    from helpers.engine.lifecycle import engine_kwargs, open_engine
    from helpers.engine.runs import run_prompts, sampling

    profile = load_profile("tiny")
    prompts = [p for items in load_prompts(2).values() for p in items]
    with open_engine(**engine_kwargs(profile, k=3)) as llm:
        run = run_prompts(llm, prompts, sampling(48))
    pair = ref.load_pair(profile)
    outs = ref._generate_all(pair, prompts, k=3, max_tokens=48)
    assert [o.token_ids for o in outs] == [list(ids) for ids in run.token_ids]
    assert sum((o.counters() for o in outs), SpecCounters()) == run.counters
    assert run.counters.num_accepted_tokens > 0, "the trained drafter should get drafts accepted"


@pytest.mark.parametrize("name", ["qwen3-30b-a3b", "qwen3-30b-a3b-shape"])
def test_only_a_local_trained_pair_is_loaded_here(name: str) -> None:
    from helpers.common.profiles import load_profile

    with pytest.raises(ValueError, match="not loaded into CPU memory"):
        ref.load_pair(load_profile(name))


def test_draft_with_a_kv_cache_equals_every_roots_chain(stand_in: ref.ReferencePair) -> None:
    """decode.draft (one draft_step per draft over a KV cache, as vLLM runs it) proposes what the
    training-time chain of draft_chain proposes at the last root."""
    import torch

    from helpers.eagle3.drafter import _greedy_feedback, draft_chain

    ids = [1, 17, 33, 250, 9, 40, 41]
    _, aux = ref.verify(stand_in, ids)
    embed = stand_in.verifier.get_input_embeddings()
    with torch.no_grad():
        chain = draft_chain(
            stand_in.drafter,
            embed(torch.tensor([ids[1:]])),
            aux[:, : len(ids) - 1],
            4,
            _greedy_feedback(embed, stand_in.drafter),
        )
    expected = [int(stand_in.drafter.target_ids(step[0, -1].argmax())) for step in chain]
    assert ref.draft(stand_in, ids, aux, 4) == expected


def _exact(drafts, probs):
    """The exact distribution of what one round emits under rejection sampling with greedy drafts."""
    dist, reach = {}, 1.0
    for i, d in enumerate(drafts):
        residual = probs[i].clone()
        residual[d] = 0
        for t, p in enumerate((residual / residual.sum()).tolist()):
            key = (*drafts[:i], t)
            dist[key] = dist.get(key, 0.0) + reach * (1 - float(probs[i, d])) * p
        reach *= float(probs[i, d])
    for t, p in enumerate(probs[len(drafts)].tolist()):
        dist[(*drafts, t)] = reach * p
    return dist


def test_accept_sampled_follows_the_rejection_sampling_distribution() -> None:
    import torch

    probs = torch.tensor([[0.5, 0.3, 0.2], [0.2, 0.7, 0.1], [0.1, 0.1, 0.8]])
    drafts = [0, 1]
    g = torch.Generator().manual_seed(0)
    n = 8000
    counts: dict[tuple[int, ...], int] = {}
    for _ in range(n):
        r = ref.accept_sampled(drafts, probs, generator=g)
        assert r.emitted[: r.accepted] == tuple(drafts[: r.accepted])
        counts[r.emitted] = counts.get(r.emitted, 0) + 1
    exact = _exact(drafts, probs)
    assert set(counts) <= {k for k, p in exact.items() if p > 0}
    tvd = 0.5 * sum(abs(counts.get(k, 0) / n - p) for k, p in exact.items())
    assert tvd < 0.03, (tvd, counts)


def test_accept_sampled_at_a_one_hot_target_is_the_greedy_rule() -> None:
    import torch

    targets = [5, 9, 7, 8]
    probs = torch.nn.functional.one_hot(torch.tensor(targets), 12).float()
    for drafts in ([5, 6, 7], [5, 9, 7], [4, 6, 7]):
        assert ref.accept_sampled(drafts, probs) == ref.accept_greedy(drafts, targets)


def test_accept_sampled_with_draft_probabilities_accepts_min_1_p_over_q() -> None:
    """Probabilistic drafting: q = p accepts every draft; a draft q favours more than p is
    accepted with probability p/q, and a rejection never re-emits it."""
    import torch

    p = torch.tensor([[0.6, 0.4], [0.5, 0.5]])
    g = torch.Generator().manual_seed(1)
    assert all(ref.accept_sampled([1], p, p[:1], g).accepted == 1 for _ in range(50))
    q = torch.tensor([[0.2, 0.8]])
    rounds = [ref.accept_sampled([1], p, q, g) for _ in range(4000)]
    rate = sum(r.accepted for r in rounds) / len(rounds)
    assert abs(rate - 0.4 / 0.8) < 0.03, rate
    assert all(r.emitted == (0,) for r in rounds if r.accepted == 0)
