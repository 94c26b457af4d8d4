"""kit.sampler: vLLM's own rejection sampler, called directly, against the exact
distribution of one round (and so against helpers.eagle3.decode.accept_sampled's)."""

from __future__ import annotations

import pytest

from helpers.analytics.permutation import permutation_test

torch = pytest.importorskip("torch")
pytest.importorskip("vllm")

PROBS = [[0.5, 0.3, 0.15, 0.05], [0.2, 0.6, 0.1, 0.1], [0.1, 0.1, 0.3, 0.5]]


def test_vllm_rounds_emit_an_accepted_prefix_then_one_token() -> None:
    from kit.sampler import vllm_rounds

    rounds = vllm_rounds([0, 1], torch.tensor(PROBS), 2000)
    assert len(rounds) == 2000 and all(1 <= len(r) <= 3 for r in rounds)
    assert all(r[: len(r) - 1] == (0, 1)[: len(r) - 1] for r in rounds)
    assert not any(r == (0,) for r in rounds)  # a rejected draft is never the replacement
    first_accepted = sum(len(r) > 1 for r in rounds) / len(rounds)
    assert abs(first_accepted - PROBS[0][0]) < 0.04, first_accepted


def test_the_reference_rule_and_vllms_sampler_agree_in_distribution() -> None:
    from helpers.eagle3.decode import accept_sampled
    from kit.sampler import vllm_rounds

    probs = torch.tensor(PROBS)
    g = torch.Generator().manual_seed(0)
    ours = [accept_sampled([0, 1], probs, generator=g).emitted for _ in range(3000)]
    assert permutation_test(vllm_rounds([0, 1], probs, 3000), ours)[1] >= 0.001
    q = torch.tensor([[0.7, 0.1, 0.1, 0.1], [0.1, 0.7, 0.1, 0.1]])
    ours_q = [accept_sampled([0, 1], probs, q, g).emitted for _ in range(3000)]
    theirs_q = vllm_rounds([0, 1], probs, 3000, draft_probs=q, seed=1)
    assert permutation_test(theirs_q, ours_q)[1] >= 0.001
    assert permutation_test(theirs_q, ours)[1] < 0.001  # the test tells q from no q
