"""helpers.tiny.lab: fresh distillation prompts and the random verifier."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.common.paths import DATA_DIR
from helpers.engine.pairing import validate_pair
from helpers.tiny.lab import (
    distill_examples,
    random_verifier,
)


def test_distill_examples_skip_held_out_prompts() -> None:
    examples = distill_examples(3, seed=5)
    assert len(examples) == 12
    kept = distill_examples(3, seed=5, exclude=[examples[0].user])
    assert examples[0].user not in {ex.user for ex in kept} and len(kept) == 11


def test_random_verifier_refuses_data(tiny_pair) -> None:
    with pytest.raises(ValueError, match="not into data"):
        random_verifier(tiny_pair.verifier, DATA_DIR / "random")


def test_validator_cannot_see_random_weights(tiny_pair, tmp_path: Path) -> None:
    out = random_verifier(tiny_pair.verifier, tmp_path / "tiny-qwen3-moe-random-init")
    report = validate_pair(out, tiny_pair.drafter)
    assert report.ok and set(report.codes()) <= {"verifier_name_mismatch"}
    same_name = random_verifier(tiny_pair.verifier, tmp_path / "elsewhere" / "tiny-qwen3-moe")
    assert validate_pair(same_name, tiny_pair.drafter).problems == []
