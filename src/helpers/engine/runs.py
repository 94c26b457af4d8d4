"""Runs on an in-process engine: per-category acceptance, the lossless check, throughput, self-distillation."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from helpers.common.counters import Meter, SpecCounters, acceptance_stats
from helpers.common.prompts import as_messages

__all__ = [
    "sampling",
    "CategoryRun",
    "run_prompts",
    "pooled",
    "run_categories",
    "LosslessReport",
    "lossless_check",
    "throughput",
    "self_distill",
]


def sampling(
    max_tokens: int, temperature: float = 0.0, ignore_eos: bool = False, seed: int = 0
) -> Any:
    """vLLM SamplingParams; T=0 is greedy (the only setting that is bit-identical to plain decoding)."""
    from vllm import SamplingParams

    return SamplingParams(
        temperature=temperature, max_tokens=max_tokens, ignore_eos=ignore_eos, seed=seed
    )


@dataclass
class CategoryRun:
    """What one batch of prompts produced: token ids, texts, wall time and spec-decode stats."""

    token_ids: list[list[int]]
    texts: list[str]
    seconds: float
    counters: SpecCounters = field(default_factory=SpecCounters)

    @property
    def stats(self) -> dict[str, Any]:
        """Acceptance statistics of this batch (empty counters without a drafter)."""
        return acceptance_stats(self.counters)

    @property
    def output_tokens(self) -> int:
        """Total generated tokens."""
        return sum(map(len, self.token_ids))


def run_prompts(llm: Any, prompts: Sequence[str], params: Any) -> CategoryRun:
    """Generate for all prompts in one batch (chat template applied by vLLM), measuring counters."""
    with Meter(llm) as meter:
        t0 = time.perf_counter()
        outs = llm.chat([as_messages(p) for p in prompts], params, use_tqdm=False)
        seconds = time.perf_counter() - t0
    return CategoryRun(
        [list(o.outputs[0].token_ids) for o in outs],
        [o.outputs[0].text for o in outs],
        seconds,
        meter.delta,
    )


def pooled(runs: Mapping[str, CategoryRun]) -> SpecCounters:
    """Counters of several runs added up: pooled, not an average of ratios (τ is a ratio of sums)."""
    return sum((r.counters for r in runs.values()), SpecCounters())


def run_categories(llm: Any, prompts: dict[str, list[str]], params: Any) -> dict[str, CategoryRun]:
    """run_prompts for each task category, with counter deltas kept apart per category."""
    return {cat: run_prompts(llm, items, params) for cat, items in prompts.items()}


@dataclass(frozen=True)
class LosslessReport:
    """How many outputs are token-identical, and where the others first differ."""

    identical: int
    total: int
    first_differences: list[int]

    @property
    def all_identical(self) -> bool:
        """True when every output matched."""
        return self.identical == self.total


def lossless_check(plain: Sequence[Sequence[int]], spec: Sequence[Sequence[int]]) -> LosslessReport:
    """Compare outputs of plain and speculative decoding token by token."""
    diffs = []
    for a, b in zip(plain, spec, strict=True):
        if list(a) != list(b):
            diffs.append(
                next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            )
    return LosslessReport(len(plain) - len(diffs), len(plain), diffs)


def throughput(
    llm: Any, prompts: Sequence[str], concurrency: int, max_tokens: int
) -> dict[str, float]:
    """Output tokens/s with `concurrency` requests in flight (batches of that size, ignore_eos).

    One warm-up request runs first; at concurrency 1 the requests run one after another.
    """
    params = sampling(max_tokens, ignore_eos=True)
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
