"""vLLM's rejection sampler called directly, without an engine: what the T > 0 accept rule is
graded against (notebook 03's exercise, `kit.grader`).

`vllm/v1/sample/rejection_sampler.py`'s `rejection_sample` takes the draft ids, the verifier's
logits at each draft position (temperature already applied), the drafter's probabilities (None for
EAGLE-3's greedy drafts) and a bonus token per request, drawn beforehand by vLLM's ordinary sampler
from the verifier's distribution after the last draft. It accepts draft d when p(d) / q(d) >= u
(u uniform), and at the first rejection emits a token drawn from max(p − q, 0) by an
exponential race. Here one request is repeated n times in one batch, so one call draws n rounds.
On a CPU vLLM runs its own C++ versions of the Triton kernels (registered first, as a worker
does); on a GPU, Triton's.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from helpers.engine import compat

__all__ = []  # nothing here is used outside the kit


@functools.cache
def _cpu_kernels() -> None:
    """Register vLLM's CPU versions of its Triton kernels in this process, once (a worker does it
    at start-up)."""
    if not compat.supports("kernel_override_registry"):
        raise RuntimeError("this vLLM has no CPU kernels for its rejection sampler: use a GPU")
    from vllm.platforms import current_platform

    current_platform.register_triton_kernel_overrides()


def _metadata(n: int, device: Any) -> Any:
    """Sampling metadata of n random (T > 0) requests without penalties, top-k/p or seeds."""
    import torch
    from vllm.v1.sample.metadata import SamplingMetadata

    return SamplingMetadata(
        temperature=torch.ones(n, device=device),
        all_greedy=False,
        all_random=True,
        top_p=None,
        top_k=None,
        generators={},
        max_num_logprobs=None,
        no_penalties=True,
        prompt_token_ids=None,
        frequency_penalties=torch.zeros(n, device=device),
        presence_penalties=torch.zeros(n, device=device),
        repetition_penalties=torch.ones(n, device=device),
        output_token_ids=[[] for _ in range(n)],
        allowed_token_ids_mask=None,
        bad_words_token_ids={},
        logitsprocs=None,
    )


def vllm_rounds(
    drafts: Sequence[int],
    probs: Any,
    n: int,
    draft_probs: Any | None = None,
    seed: int = 0,
) -> list[tuple[int, ...]]:
    """n rounds of vLLM's rejection sampler on one request: the tokens each round emits.

    probs [k + 1, V]: the verifier's distribution at each draft position and after the last (the
    bonus token's); draft_probs [k, V] or None (greedy drafts).
    """
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        _cpu_kernels()
    from vllm.v1.sample.rejection_sampler import rejection_sample

    torch.manual_seed(seed)
    k = len(drafts)
    probs = probs.to(device=device, dtype=torch.float32)
    bonus = torch.multinomial(probs[k], n, replacement=True).view(n, 1)
    out = rejection_sample(
        torch.tensor(list(drafts), dtype=torch.int32, device=device).repeat(n),
        [k] * n,
        k,
        torch.arange(1, n + 1, dtype=torch.int32, device=device) * k,
        None
        if draft_probs is None
        else draft_probs.to(device=device, dtype=torch.float32).repeat(n, 1).contiguous(),
        probs[:k].log().repeat(n, 1).contiguous(),
        bonus.to(torch.int64).contiguous(),
        _metadata(n, device),
    )
    return [tuple(t for t in row if t >= 0) for row in out.tolist()]
