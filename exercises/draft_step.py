"""Exercise (notebook 03 §4): one EAGLE-3 draft step, and the k steps of one round.

Write both bodies, then run `make check-exercises`. The pieces you need:
`d.layers[0]` (the drafter's one layer: its `hidden_norm`, `input_layernorm`,
`post_attention_layernorm`, `mlp`), `d.norm`, `d.lm_head`, `d.fc` and `d.target_ids` of the
drafter; `drafter.KVCache(d).attend` is the layer's self-attention with a KV cache;
`pair.verifier.get_input_embeddings()` embeds token ids.
"""

from collections.abc import Sequence

import torch

from helpers.eagle3 import decode, drafter


def draft_step(
    d: drafter.Eagle3Drafter, embeds: torch.Tensor, hidden: torch.Tensor, attend: drafter.Attend
) -> tuple[torch.Tensor, torch.Tensor]:
    """One draft step: [embed ‖ hidden] through the drafter's layer; logits and pre-norm output.

    `hidden` is fc(taps) at the first step and the previous step's pre-norm output after it;
    `attend` is the layer's self-attention (it keeps the KV cache). Return the logits over the
    draft vocabulary and the pre-norm output, the next step's `hidden`.
    """
    raise NotImplementedError("write draft_step")


@torch.no_grad()
def draft(pair: decode.ReferencePair, ids: Sequence[int], aux: torch.Tensor, k: int) -> list[int]:
    """k greedy drafts from the last root (position len(ids) - 2): aux[p] pairs with token p + 1.

    aux [1, len(ids), 3H]: the verifier's three taps at every position of ids. Return k verifier
    token ids.
    """
    raise NotImplementedError("write draft")
