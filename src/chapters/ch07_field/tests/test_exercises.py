"""Notebook 07's exercises, each variant run at CI size by calling the same code its cells call
(what is not run here, and why, is listed in tests/test_exercises.py)."""

from __future__ import annotations

import random

from tests.support import needs_shipped

# ------------------------------------------------------------------------------------ notebook 07


def test_07_ex3_position_zero_alone_cannot_pass_without_drafts() -> None:
    """POSITIONS = [0]: the prefill's token, identical in law on both sides; the check still
    refuses samples drawn while no draft was scheduled."""
    from chapters.ch07_field.distribution import lossless_test
    from helpers.common.counters import SpecCounters

    rng = random.Random(0)
    draws = [[[rng.randrange(3) for _ in range(4)] for _ in range(200)] for _ in range(2)]
    other = [[[rng.randrange(3) for _ in range(4)] for _ in range(200)] for _ in range(2)]
    with_drafts = lossless_test(draws, other, SpecCounters(10, 30, 12), [0], 0.01, 200)
    without = lossless_test(draws, other, SpecCounters(), [0], 0.01, 200)
    assert with_drafts.passes and not without.passes


def test_07_ex4_a_smaller_draft_vocabulary_leaves_more_tokens_outside() -> None:
    """DRAFT_VOCAB = 128 instead of 512: the ceiling (share outside) can only grow."""
    from chapters.ch07_field.reduced_vocab import draft_vocab, outside_share

    rng = random.Random(0)
    answers = [[int(rng.paretovariate(1.2)) % 2048 for _ in range(200)] for _ in range(16)]
    small, large = draft_vocab(answers, 128), draft_vocab(answers, 512)
    assert len(small) <= 128 and set(small) <= set(large)
    assert outside_share(answers, small) >= outside_share(answers, large)


@needs_shipped
def test_07_ex5_zero_training_steps_saves_the_pruned_drafter_unchanged(tiny, tmp_path) -> None:
    """VOCAB_TRAIN_STEPS = 0: the loop runs no step and the saved drafter is the pruned one."""
    import torch

    from helpers.eagle3.checkpoint import load_drafter, load_verifier, save_drafter
    from helpers.eagle3.taps import drafter_aux_layer_ids
    from helpers.eagle3.train import MixedSampler, train_drafter
    from helpers.eagle3.vocab import prune_draft_vocab
    from helpers.engine.pairing import validate_pair

    pruned = prune_draft_vocab(tiny.drafter_path(), tmp_path / "pruned", list(range(0, 2048, 8)))
    drafter, config = load_drafter(pruned)
    before = {k: v.clone() for k, v in drafter.state_dict().items()}
    rows = [list(range(i, i + 40)) for i in range(8)]
    history = train_drafter(
        drafter,
        load_verifier(tiny.verifier_path()),
        MixedSampler(rows, rows, 32, 0.0, 0),
        0,
        list(drafter_aux_layer_ids(config)),
    )
    assert history.loss == []
    save_drafter(drafter, tmp_path / "trained", config)
    after, _ = load_drafter(tmp_path / "trained")
    assert all(torch.equal(before[k], v) for k, v in after.state_dict().items())
    assert validate_pair(tiny.verifier_path(), tmp_path / "trained").ok
