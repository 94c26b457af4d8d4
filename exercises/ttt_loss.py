"""Exercise (notebook 05 §4): the training-time-test (TTT) loss of an EAGLE-3 drafter.

Write the body, then run `make check-exercises`. The pieces you need: `taps.verifier_taps`
(the verifier's taps and logits), `d.draft_scores` and `d.target_ids` (the draft vocabulary),
`drafter.draft_chain` (every root's chain of draft steps) with `drafter.teacher_forced`.
"""

from collections.abc import Sequence

import torch
from transformers import PreTrainedModel

from helpers.eagle3 import drafter, taps  # noqa: F401 - taps: you will need it


def ttt_loss(
    d: drafter.Eagle3Drafter,
    verifier: PreTrainedModel,
    x: torch.Tensor,
    aux_layers: Sequence[int],
    steps: int,
    decay: float = 0.8,
) -> tuple[torch.Tensor, list[float]]:
    """Training-time-test loss: soft cross-entropy of each draft step against the verifier.

    Step j at root t predicts token t+2+j: it is scored against the verifier's distribution at
    position t+1+j over the draft vocabulary, weighted decay**j. Also returns each step's top-1
    agreement with the verifier's argmax there.
    """
    raise NotImplementedError("write ttt_loss")
