"""Runs on an in-process engine: per-category acceptance, the lossless check, throughput,
self-distillation."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from helpers.common.counters import (
    Meter,
    RequestAcceptance,
    SpecCounters,
    acceptance_stats,
    request_acceptance,
)
from helpers.common.prompts import Messages, as_messages

__all__ = [
    "NEAR_TIE_MARGIN",
    "sampling",
    "CategoryRun",
    "run_prompts",
    "pooled",
    "merge_runs",
    "run_categories",
    "lossless_check",
    "throughput",
    "self_distill",
]


#: Logit margins (top-1 minus top-2, in nats) below which two kernels may legitimately pick
#: different argmaxes. The verifier's logits here are of order 10-30. TF32 (how GPUs multiply
#: float32 by default) keeps 10 mantissa bits, a relative rounding of 2^-11 = 4.9e-4: about 0.01 on
#: a logit of 25 per rounding, and a 1-token and a (k+1)-token step round differently in several of
#: the last layers' products, so near-ties up to ~0.05 can flip. bfloat16 keeps 7 bits, 8x coarser:
#: ~0.5. On a CPU, float32 is not rounded to TF32, and the workbook asserts exact identity instead.
NEAR_TIE_MARGIN: dict[str, float] = {"float32": 0.05, "bfloat16": 0.5, "float16": 0.5}


def sampling(
    max_tokens: int,
    temperature: float = 0.0,
    ignore_eos: bool = False,
    seed: int = 0,
    logprobs: int | None = None,
) -> Any:
    """vLLM SamplingParams; T=0 is greedy. `logprobs=2` keeps each token's top-2
    log-probabilities."""
    from vllm import SamplingParams

    return SamplingParams(
        temperature=temperature,
        max_tokens=max_tokens,
        ignore_eos=ignore_eos,
        seed=seed,
        logprobs=logprobs,
    )


def _top2_margins(logprobs: Sequence[Mapping[int, Any]] | None) -> list[float]:
    """Per generated token, top-1 minus top-2 log-probability (= logit margin); [] without
    logprobs."""
    margins = []
    for step in logprobs or []:
        values = sorted((lp.logprob for lp in step.values()), reverse=True)
        margins.append(values[0] - values[1] if len(values) > 1 else float("inf"))
    return margins


@dataclass
class CategoryRun:
    """What one batch of prompts produced: token ids, texts, wall time and spec-decode stats."""

    token_ids: list[list[int]]
    texts: list[str]
    seconds: float
    counters: SpecCounters = field(default_factory=SpecCounters)
    margins: list[list[float]] = field(default_factory=list)
    finished_naturally: list[bool] = field(default_factory=list)
    #: Per-request acceptance histograms (empty without a drafter or on a vLLM that lacks them).
    requests: list[RequestAcceptance] = field(default_factory=list)

    @property
    def stats(self) -> dict[str, Any]:
        """Acceptance statistics of this batch (empty counters without a drafter)."""
        return acceptance_stats(self.counters)

    @property
    def output_tokens(self) -> int:
        """Total generated tokens."""
        return sum(map(len, self.token_ids))


def run_prompts(
    llm: Any, prompts: Sequence[str | Messages], params: Any, **chat_kwargs: Any
) -> CategoryRun:
    """Generate for all prompts in one batch (chat template applied by vLLM), measuring counters.

    A prompt is a user message, or a whole chat (a list of messages); `chat_kwargs` go to
    `LLM.chat` (e.g. `chat_template=`, to serve with another template than the tokenizer's).
    """
    chats = [as_messages(p) if isinstance(p, str) else p for p in prompts]
    with Meter(llm) as meter:
        t0 = time.perf_counter()
        outs = llm.chat(chats, params, use_tqdm=False, **chat_kwargs)
        seconds = time.perf_counter() - t0
    return CategoryRun(
        [list(o.outputs[0].token_ids) for o in outs],
        [o.outputs[0].text for o in outs],
        seconds,
        meter.delta,
        [_top2_margins(o.outputs[0].logprobs) for o in outs],
        [o.outputs[0].finish_reason == "stop" for o in outs],
        [r for o in outs if (r := request_acceptance(o.outputs[0])) is not None],
    )


def pooled(runs: Mapping[str, CategoryRun]) -> SpecCounters:
    """Counters of several runs added up: pooled, not an average of ratios (τ is a ratio of
    sums)."""
    return sum((r.counters for r in runs.values()), SpecCounters())


def merge_runs(runs: Sequence[CategoryRun]) -> CategoryRun:
    """Several runs as one: outputs and per-request histograms concatenated, counters pooled."""
    return CategoryRun(
        [ids for r in runs for ids in r.token_ids],
        [t for r in runs for t in r.texts],
        sum(r.seconds for r in runs),
        sum((r.counters for r in runs), SpecCounters()),
        [m for r in runs for m in r.margins],
        [f for r in runs for f in r.finished_naturally],
        [q for r in runs for q in r.requests],
    )


def run_categories(llm: Any, prompts: dict[str, list[str]], params: Any) -> dict[str, CategoryRun]:
    """run_prompts for each task category, with counter deltas kept apart per category."""
    return {cat: run_prompts(llm, items, params) for cat, items in prompts.items()}


@dataclass(frozen=True)
class _LosslessReport:
    """How many outputs are token-identical, and where the others first differ."""

    identical: int
    total: int
    first_differences: list[int]
    #: The plain run's top-1 minus top-2 logit margin at each first difference (None: unknown).
    margins: list[float | None] = field(default_factory=list)

    @property
    def all_identical(self) -> bool:
        """True when every output matched."""
        return self.identical == self.total

    def all_at_near_ties(self, threshold: float) -> bool:
        """True when every divergence starts where the plain run's margin is below `threshold`."""
        return all(m is not None and m < threshold for m in self.margins)


def lossless_check(
    plain: Sequence[Sequence[int]],
    spec: Sequence[Sequence[int]],
    plain_margins: Sequence[Sequence[float]] = (),
) -> _LosslessReport:
    """Compare plain and speculative outputs token by token; margins say how close each call was."""
    diffs, margins = [], []
    for n, (a, b) in enumerate(zip(plain, spec, strict=True)):
        if list(a) != list(b):
            at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            diffs.append(at)
            known = n < len(plain_margins) and at < len(plain_margins[n])
            margins.append(plain_margins[n][at] if known else None)
    return _LosslessReport(len(plain) - len(diffs), len(plain), diffs, margins)


def throughput(
    llm: Any, prompts: Sequence[str], concurrency: int, max_tokens: int, ignore_eos: bool = True
) -> dict[str, float]:
    """Output tokens/s with `concurrency` requests in flight (batches of that size).

    `ignore_eos=True` forces every answer to `max_tokens` (equal work per request); False lets
    answers end where the model ends them. One warm-up request runs first; at concurrency 1 the
    requests run one after another.
    """
    params = sampling(max_tokens, ignore_eos=ignore_eos)
    llm.chat([as_messages(prompts[0])], params, use_tqdm=False)
    tokens, t0 = 0, time.perf_counter()
    for i in range(0, len(prompts), concurrency):
        outs = llm.chat(
            [as_messages(p) for p in prompts[i : i + concurrency]], params, use_tqdm=False
        )
        tokens += sum(len(o.outputs[0].token_ids) for o in outs)
    seconds = time.perf_counter() - t0
    return {
        "concurrency": concurrency,
        "requests": len(prompts),
        "output_tokens": tokens,
        "seconds": seconds,
        "output_tokens_per_s": tokens / seconds,
    }


def self_distill(llm: Any, prompts: Sequence[str], max_tokens: int = 320) -> list[list[int]]:
    """Token ids of each chat prompt followed by the verifier's greedy answer and a pad token."""
    outs = llm.chat([as_messages(p) for p in prompts], sampling(max_tokens), use_tqdm=False)
    pad = llm.get_tokenizer().pad_token_id
    return [list(o.prompt_token_ids) + list(o.outputs[0].token_ids) + [pad] for o in outs]
