"""The tiny pair's lab pieces several notebooks share: where the drafter lab writes (`LAB_DIR`),
fresh corpus exchanges for self-distillation (notebooks 05 and 07), and a randomly initialised
verifier of the same shape to pair with (04, 05, 08). Notebook 05's drafter lab itself is
in its chapter (drafter_lab).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

from helpers.common.paths import BUILD_DIR, DATA_DIR
from helpers.common.prompts import CATEGORIES
from helpers.tiny.corpus import Example, make_examples

__all__ = [
    "LAB_DIR",
    "distill_examples",
    "random_verifier",
]

#: Where notebook 05 writes checkpoints and the random verifier (git-ignored, never data/).
LAB_DIR: Path = BUILD_DIR / "drafter-lab"


# --------------------------------------------------------------------------- training data


def distill_examples(per_category: int, seed: int, exclude: Sequence[str] = ()) -> list[Example]:
    """Fresh corpus exchanges of every category; their user turns become self-distillation
    prompts."""
    banned = set(exclude)
    return [
        ex
        for c in CATEGORIES
        for ex in make_examples(c, per_category, seed)
        if ex.user not in banned
    ]


# --------------------------------------------------------------------------- checkpoints


# --------------------------------------------------------------------------- the EAGLE-3 inputs


# --------------------------------------------------------------------------- τ in vLLM


# --------------------------------------------------------------------------- the learning curve


# --------------------------------------------------------------------------- the wrong verifier


#: Files copied verbatim from the trained verifier: its config and what vLLM needs to tokenize.
#: Not its weights, and not its model card (README.md), which describes the trained model.
_COPIED_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer*",
    "special_tokens_map.json",
    "chat_template*",
    "vocab.*",
    "merges.txt",
)


def random_verifier(like_dir: str | Path, out_dir: str | Path, seed: int = 0) -> Path:
    """A randomly initialized verifier with like_dir's exact config and tokenizer files."""
    like_dir, out_dir = Path(like_dir), Path(out_dir)
    if out_dir.resolve().is_relative_to(DATA_DIR.resolve()):
        raise ValueError(f"write the random verifier under build/, not into data/ ({out_dir})")
    torch.manual_seed(seed)
    model = Qwen3MoeForCausalLM(Qwen3MoeConfig.from_pretrained(like_dir))
    shutil.rmtree(out_dir, ignore_errors=True)
    model.save_pretrained(out_dir)
    for pattern in _COPIED_FILES:
        for f in like_dir.glob(pattern):
            shutil.copy2(f, out_dir / f.name)
    return out_dir
