"""Notebook 05's exercises, each variant run at CI size by calling the same code its cells call
(what is not run here, and why, is listed in tests/test_exercises.py)."""

from __future__ import annotations

from tests.support import needs_shipped

# ------------------------------------------------------------------------------------ notebook 05


@needs_shipped
def test_05_ex1_ex2_ex4_train_two_steps(tiny, tok, tmp_path) -> None:
    """CORPUS_SHARE = 1.0 with TTT_STEPS = 1 on the verifier, then a drafter for a random verifier,
    saved in the speculators format and accepted by the pairing validator."""
    import torch

    from chapters.ch05_drafter.drafter_lab import CheckpointSaver, corpus_rows
    from helpers.common.configs import read_config
    from helpers.eagle3.checkpoint import drafter_config, load_verifier
    from helpers.eagle3.taps import drafter_aux_layer_ids
    from helpers.eagle3.train import MixedSampler, new_drafter, train_drafter
    from helpers.engine.pairing import validate_pair
    from helpers.tiny.lab import random_verifier

    torch.manual_seed(0)
    aux = list(drafter_aux_layer_ids(read_config(tiny.drafter_path())))
    corpus = corpus_rows(tok, 2, 0)
    sampler = MixedSampler([[0, 1, 2]], corpus, 32, 1.0, 0)  # share 1.0: corpus rows only
    assert not any(row[:6] == [0, 1, 2, 0, 1, 2] for row in sampler.batch(4).tolist())
    verifier = load_verifier(tiny.verifier_path())
    drafter = new_drafter(verifier, aux, 0)
    history = train_drafter(drafter, verifier, sampler, 2, aux, ttt_steps=1, batch_size=2)
    assert len(history.loss) == 2 and all(len(a) == 1 for a in history.agreement)  # TTT_STEPS = 1

    random_dir = random_verifier(tiny.verifier_path(), tmp_path / "random-verifier", 0)
    stranger = load_verifier(random_dir)
    for_stranger = new_drafter(stranger, aux, 0)
    saver = CheckpointSaver(
        [2], tmp_path / "for-random", drafter_config(for_stranger.shape, aux, str(random_dir))
    )
    train_drafter(for_stranger, stranger, sampler, 2, aux, 2, 2, callback=saver)
    assert saver.saved[2].is_dir()
    assert validate_pair(random_dir, saver.saved[2]).ok


def test_05_ex3_training_plan_for_300_steps() -> None:
    from chapters.ch05_drafter.drafter_lab import training_plan

    steps, eval_at = training_plan(300, (0, 100, 200, 300))
    assert eval_at[0] == 0 and eval_at[-1] == steps and len(eval_at) == 4
