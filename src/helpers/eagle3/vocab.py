"""A reduced draft vocabulary: the d2t/t2d maps vLLM reads, and a full-vocabulary drafter pruned to
one (notebook 07's chapter picks which tokens the drafter may propose, and what that costs).

Real EAGLE-3 speculators score only ~32k of Qwen3's 151,936 tokens: the drafter's `lm_head` is the
biggest part of a one-layer drafter, and most of the vocabulary is never the verifier's answer.
The checkpoint then carries `draft_vocab_size` and two maps: `d2t[i]`, an **offset** (vLLM computes
the verifier id of draft id i as i + d2t[i]), and `t2d`, a mask over the verifier's vocabulary
(used in training; vLLM skips it). A token outside the draft vocabulary can never be drafted, so the
share of the verifier's tokens outside it caps how often a draft can be right.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors.torch import save_file

from helpers.common.configs import read_config
from helpers.eagle3.checkpoint import load_weights

__all__ = [
    "vocab_maps",
    "prune_draft_vocab",
]


# Twin of vocab_maps() in notebook 07 (its chapter.json's twins): change both.
def vocab_maps(keep: Sequence[int], vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(d2t, t2d) for a sorted draft vocabulary: offsets [draft] int64 and a mask [vocab] bool."""
    ids = torch.tensor(list(keep), dtype=torch.int64)
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[ids] = True
    return ids - torch.arange(len(ids)), t2d


def prune_draft_vocab(src: str | Path, out: str | Path, keep: Sequence[int]) -> Path:
    """A copy of a full-vocabulary drafter that scores only `keep`: lm_head rows, d2t, t2d, config.

    No retraining: for the kept tokens the pruned drafter's logits are the original ones, so its
    argmax equals the original's whenever that lies in the draft vocabulary.
    """
    src, out = Path(src), Path(out)
    config = read_config(src)
    vocab = config["transformer_layer_config"]["vocab_size"]
    if config.get("draft_vocab_size", vocab) != vocab:
        raise ValueError(f"{src} already has a reduced draft vocabulary")
    weights = load_weights(src / "model.safetensors")
    d2t, t2d = vocab_maps(keep, vocab)
    weights["lm_head.weight"] = weights["lm_head.weight"][d2t + torch.arange(len(keep))].clone()
    weights["d2t"], weights["t2d"] = d2t, t2d
    out.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(
        json.dumps({**config, "draft_vocab_size": len(keep)}, indent=2), encoding="utf-8"
    )
    return out
