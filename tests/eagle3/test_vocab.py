"""helpers.eagle3.vocab: the maps of a draft vocabulary, and a pruned checkpoint."""

from __future__ import annotations

import torch
from safetensors.torch import load_file

from helpers.common.profiles import load_profile
from helpers.eagle3.vocab import prune_draft_vocab, vocab_maps
from helpers.engine.pairing import validate_pair


def test_maps_are_offsets_and_a_mask() -> None:
    d2t, t2d = vocab_maps([1, 5, 9], vocab=12)
    assert (torch.arange(3) + d2t).tolist() == [1, 5, 9]
    assert t2d.nonzero().flatten().tolist() == [1, 5, 9] and t2d.shape == (12,)


def test_pruned_shipped_drafter_keeps_its_rows_and_passes_the_validator(tmp_path) -> None:
    profile = load_profile("tiny")
    keep = list(range(0, 2048, 4))
    out = prune_draft_vocab(profile.drafter_path(), tmp_path / "pruned", keep)
    full = load_file(f"{profile.drafter_path()}/model.safetensors")["lm_head.weight"]
    pruned = load_file(str(out / "model.safetensors"))
    assert torch.equal(pruned["lm_head.weight"], full[keep])
    report = validate_pair(profile.verifier_path(), out)
    assert report.ok, report.summary()
    assert not report.codes() or set(report.codes()) <= {"verifier_name_mismatch"}
