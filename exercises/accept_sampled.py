"""Exercise (notebook 03, exercise 8): rejection sampling at T > 0, the rule vLLM's rejection
sampler (`vllm/v1/sample/rejection_sampler.py`) applies to a round of drafts.

Write the body, then run `make check-exercises`: your rounds are compared in distribution with
vLLM's own sampler's. Draw random numbers with `generator` (torch.rand(..., generator=generator),
torch.multinomial(..., generator=generator)).
"""

from collections.abc import Sequence

import torch

from helpers.eagle3 import decode


def accept_sampled(
    drafts: Sequence[int],
    probs: torch.Tensor,
    draft_probs: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> decode.Round:
    """Rejection sampling at T > 0: accept draft i with probability min(1, p_i(d) / q_i(d)), left
    to right; at the first rejection emit a token drawn from max(p_i − q_i, 0), else a bonus token
    drawn from p_k.

    probs [k + 1, V]: the verifier's temperature-T distribution at each draft and after the last;
    draft_probs [k, V]: the drafter's q (None: greedy drafts, q one-hot, as vLLM's EAGLE-3).
    """
    raise NotImplementedError("write accept_sampled")
