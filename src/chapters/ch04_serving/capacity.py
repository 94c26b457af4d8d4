"""What speculation costs in capacity: the KV cache a drafter takes from a fixed budget, the
requests a server then holds at once, and the prefix-cache block EAGLE drops (notebook 04).

A server's KV cache is a pool of blocks of `block_size` tokens cut from a fixed number of bytes
(`kv_cache_memory_bytes`). An EAGLE-3 drafter's attention layer keeps its own K and V for every
token in the same blocks, so at the same budget a speculative server gets fewer blocks; every
running request also reserves slots for k draft tokens beyond its length (the lookahead). Both
show in `/metrics` (`vllm:cache_config_info`'s `num_gpu_blocks`), in the server's start-up log
("Maximum concurrency for N tokens per request"), and under load: a burst of long requests is
held `peak running` at a time, and a request that no longer fits is preempted (pushed out and
recomputed later, `vllm:num_preemptions`).

EAGLE also drops the last block of every prefix-cache hit (its drafter needs the verifier's hidden
states of that block, which the cache does not keep), so a shared system prompt hits one block
less per request than on a plain server; a vLLM with `disable_eagle_block_drop` (see
helpers.engine.compat) can keep it.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from chapters.ch04_serving.clients import (
    EngineStats,
    chat,
    complete_tokens,
    scrape_engine_stats,
    tokenize,
)
from chapters.ch04_serving.monitoring import Scraper

__all__ = [
    "PREFIX_REQUESTS",
    "burst_size",
    "burst_prompts",
    "run_burst",
    "shared_prefix_text",
    "run_shared_prefix",
]

#: Seconds between /metrics samples during a burst (the running gauge's peak).
_BURST_SAMPLE_EVERY = 0.1
#: A burst asks for this many times the requests the plain server's cache holds at full length.
_BURST_OVERLOAD = 1.25
#: The shared system prompt's length in KV blocks: three whole blocks can hit, the half never does.
_SHARED_PREFIX_BLOCKS = 3.5
#: Requests under one shared system prompt: the first fills the cache, the others are counted.
PREFIX_REQUESTS = 6


def burst_size(cache: EngineStats, tokens_per_request: int) -> int:
    """Requests in a burst: BURST_OVERLOAD times what the cache holds at that length, rounded up."""
    if cache.kv_tokens <= 0:
        raise ValueError(
            "burst_size: the server's /metrics gave no KV cache size (vllm:cache_config_info's "
            "num_gpu_blocks and block_size)"
        )
    return math.ceil(_BURST_OVERLOAD * cache.kv_tokens / tokens_per_request)


def burst_prompts(
    base_url: str, model: str, texts: list[str], n: int, length: int
) -> list[list[int]]:
    """n prompts of exactly `length` token ids from the server's tokenizer, each starting one token
    further into the same text, so no two share a first block (no prefix-cache sharing)."""
    ids: list[int] = []
    for text in texts:
        ids += tokenize(base_url, model, text + "\n")
    if not ids:
        raise ValueError("burst_prompts: the texts tokenized to nothing")
    need = length + n
    stream = ids * math.ceil(need / len(ids))
    if len(ids) <= n:
        raise ValueError(f"burst_prompts: {len(ids)} tokens of text repeat within {n} offsets")
    return [stream[i : i + length] for i in range(n)]


def run_burst(
    base_url: str,
    model: str,
    mode: str,
    prompts: list[list[int]],
    output_tokens: int,
    sample_every: float = _BURST_SAMPLE_EVERY,
) -> dict[str, Any]:
    """Send every prompt at once (forced output length) and sample /metrics meanwhile; one row: the
    cache's size, what the burst needed (`fit_at_full_length`: requests its blocks hold at their
    final length, lookahead not counted), how many ran together at most, how full the cache got,
    and how many were preempted."""

    def one(ids: list[int]) -> dict[str, Any]:
        """One request of the burst."""
        return complete_tokens(base_url, model, ids, output_tokens, ignore_eos=True)

    cache = scrape_engine_stats(base_url)
    with Scraper(base_url, interval=sample_every) as scraper:
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=len(prompts), thread_name_prefix="burst") as pool:
            replies = list(pool.map(one, prompts))
        duration = time.perf_counter() - t0
    produced = {int(r["usage"]["completion_tokens"]) for r in replies}
    if produced != {output_tokens}:
        raise RuntimeError(f"run_burst: requests produced {produced} tokens, not {output_tokens}")
    blocks_each = math.ceil((len(prompts[0]) + output_tokens) / cache.block_size)
    return {
        "mode": mode,
        "num_gpu_blocks": cache.num_gpu_blocks,
        "block_size": cache.block_size,
        "kv_cache_tokens": cache.kv_tokens,
        "burst_requests": len(prompts),
        "tokens_per_request": len(prompts[0]) + output_tokens,
        "fit_at_full_length": cache.num_gpu_blocks // blocks_each,
        "peak_running": scraper.peak("running"),
        "preemptions": scraper.engine_total.preemptions,
        "peak_kv_usage": scraper.peak("kv_cache_usage"),
        "duration_s": round(duration, 2),
    }


def shared_prefix_text(texts: list[str], base_url: str, model: str, block_size: int) -> str:
    """A system prompt of at least SHARED_PREFIX_BLOCKS KV blocks of tokens: the texts, one per
    line, as many as needed (repeated if they run out)."""
    min_tokens = _SHARED_PREFIX_BLOCKS * block_size
    lines: list[str] = []
    count = 0
    for i in range(10_000):
        line = texts[i % len(texts)]
        lines.append(line)
        count += len(tokenize(base_url, model, line + "\n"))
        if count >= min_tokens:
            return "Reference notes for this conversation:\n" + "\n".join(lines)
    raise ValueError("shared_prefix_text: the texts never reach the length asked for")


def run_shared_prefix(
    base_url: str, model: str, mode: str, system: str, questions: list[str], max_tokens: int = 8
) -> dict[str, Any]:
    """The same system prompt with each question, sent one at a time; one row: the prompt tokens
    of every request after the first (which found the cache cold) looked up in the prefix cache,
    found, per request and in blocks, and the hit rate."""

    def ask(question: str) -> None:
        """One short chat request under the shared system prompt."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
        chat(base_url, model, messages, max_tokens=max_tokens)

    ask(questions[0])
    before = scrape_engine_stats(base_url)
    for question in questions[1:]:
        ask(question)
    after = scrape_engine_stats(base_url)
    delta, later = after - before, len(questions) - 1
    return {
        "mode": mode,
        "requests_after_first": later,
        "prompt_tokens": delta.prefix_cache_queries,
        "hit_tokens": delta.prefix_cache_hits,
        "hit_tokens_per_request": delta.prefix_cache_hits / later,
        "hit_blocks_per_request": delta.prefix_cache_hits / later / after.block_size,
        "hit_rate": delta.prefix_hit_rate,
    }
