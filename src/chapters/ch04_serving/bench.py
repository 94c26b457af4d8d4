"""The bounded serving benchmark of notebook 04, section 6: speculative vs plain per concurrency
level, as `vllm bench serve --max-concurrency C` runs it, with /metrics sampled meanwhile."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from chapters.ch04_serving.clients import (
    EngineStats,
    StreamResult,
    complete_tokens,
    scrape_engine_stats,
    stream_chat,
)
from chapters.ch04_serving.monitoring import Scraper
from chapters.ch04_serving.server import VllmServer
from helpers.common import vllm_names
from helpers.common.ci import ci_scaled
from helpers.common.counters import RequestAcceptance, SpecCounters, acceptance_stats
from helpers.common.prompts import as_messages, interleaved, load_prompts

__all__ = [
    "requests_for",
    "bench_prompts",
    "run_interleaved",
    "results_frame",
    "per_prompt",
    "crossing_statement",
    "trend_statement",
    "run_burst",
]

_LEVEL_TIME_LIMIT = 120.0
_REQUEST_TIMEOUT = 120.0
#: Seconds between two /metrics samples while a level runs (peaks of the running/waiting gauges).
_SAMPLE_EVERY = 0.25
#: A level's output length: exactly max_tokens per request (ignore_eos) ...
_FORCED = "forced"
#: ... or each answer's own, ended by the model (at most max_tokens).
_NATURAL = "natural"


def requests_for(concurrency: int) -> int:
    """Requests sent at one level: max(8, 2·C), or max(4, C) under CI (each fills its C slots)."""
    return ci_scaled(max(8, 2 * concurrency), max(4, concurrency))


def bench_prompts(n: int) -> list[str]:
    """n held-out user prompts, the task categories interleaved."""
    return interleaved(load_prompts(), n)


@dataclass
class _LevelRun:
    """The requests of one concurrency level on one server."""

    mode: str
    concurrency: int
    results: list[StreamResult]
    duration: float
    skipped: int = 0
    counters: SpecCounters = field(default_factory=SpecCounters)
    #: Which repetition of the level this was (run_interleaved repeats every level).
    repeat: int = 0
    #: FORCED (ignore_eos: every request max_tokens long) or NATURAL (each answer's own length).
    length: str = _FORCED
    #: Engine counters over the level (prefix cache, preemptions); gauges as at its end.
    engine: EngineStats = field(default_factory=EngineStats)
    #: Highest sampled running and waiting requests inside the server during the level.
    peak_running: float = 0.0
    peak_waiting: float = 0.0

    @property
    def acceptances(self) -> list[RequestAcceptance]:
        """The per-request acceptance of every request that carried one."""
        return [r.acceptance for r in self.results if r.acceptance is not None]

    def row(self) -> dict[str, float | int | str]:
        """One tidy row: throughput, per-user speed, TTFT, TPOT, τ, the server's cache and queue."""
        res = self.results
        tokens = sum(r.output_tokens for r in res)
        prompt_tokens = sum(r.prompt_tokens for r in res)
        ttft = np.array([r.ttft for r in res]) * 1000
        tpot = np.array([r.tpot for r in res if r.output_tokens > 1]) * 1000
        stats = acceptance_stats(self.counters)
        busy = sum(r.latency for r in res)
        server = {f"server_{n}_ms": 1000 * self.engine.mean_seconds(n) for n in _SERVER_TIMES}
        tpot_server = server["server_tpot_ms"]
        tau = stats[vllm_names.STATS.tau] if self.counters.num_drafts else math.nan
        row = {"mode": self.mode, "length": self.length, "concurrency": self.concurrency}
        row |= {"repeat": self.repeat, "requests": len(res), "skipped": self.skipped}
        return row | {
            "output_tokens": tokens,
            "duration_s": round(self.duration, 3),
            "output_tok_s": tokens / self.duration if self.duration > 0 else 0.0,
            # what the server's own TPOT allows each user (its histogram's mean over the level)
            "per_user_tok_s": 1000 / tpot_server if tpot_server > 0 else math.nan,
            "mean_output_tokens": tokens / len(res) if res else math.nan,
            "finished_naturally": sum(r.finish_reason == "stop" for r in res) / max(1, len(res)),
            "mean_ttft_ms": float(ttft.mean()) if len(ttft) else math.nan,
            "mean_tpot_ms": float(tpot.mean()) if len(tpot) else math.nan,
            "median_tpot_ms": float(np.median(tpot)) if len(tpot) else math.nan,
            **server,
            "chunks_per_request": sum(r.chunks for r in res) / len(res) if res else math.nan,
            "acceptance_length": tau,
            "prompt_tokens": prompt_tokens,
            "prefix_cache_queries": self.engine.prefix_cache_queries,
            "prefix_cache_hits": self.engine.prefix_cache_hits,
            "preemptions": self.engine.preemptions,
            "peak_running": self.peak_running,
            "peak_waiting": self.peak_waiting,
            # time-averaged requests in flight (client side): request-seconds / wall seconds
            "mean_in_flight": busy / self.duration if self.duration > 0 else 0.0,
        }


#: The server's latency histograms a level reports (clients._HISTOGRAMS), as means in ms.
_SERVER_TIMES = ("ttft", "tpot")


def _run_level(
    srv: VllmServer,
    prompts: Sequence[str],
    concurrency: int,
    n_requests: int,
    max_tokens: int,
    time_limit: float,
    mode: str,
    ignore_eos: bool = True,
) -> _LevelRun:
    """Send n_requests streaming requests, `concurrency` in flight, none after `time_limit` s."""
    deadline, url = time.perf_counter() + time_limit, srv.base_url

    def one(i: int) -> StreamResult | None:
        """One request (prompt i mod the list's length), unless the level's time is up."""
        if time.perf_counter() > deadline:
            return None
        index = i % len(prompts)
        messages = as_messages(prompts[index])
        done = stream_chat(
            url, srv.model, messages, max_tokens, _REQUEST_TIMEOUT, ignore_eos=ignore_eos
        )
        return replace(done, prompt_index=index)

    with Scraper(url, interval=_SAMPLE_EVERY) as scraper:
        t0 = time.perf_counter()
        with ThreadPoolExecutor(concurrency, f"bench-c{concurrency}") as pool:
            outcomes = list(pool.map(one, range(n_requests)))
        duration = time.perf_counter() - t0
    done = [r for r in outcomes if r is not None]
    run = _LevelRun(mode, concurrency, done, duration, len(outcomes) - len(done), scraper.total)
    peaks = {"peak_running": scraper.peak("running"), "peak_waiting": scraper.peak("waiting")}
    length = _FORCED if ignore_eos else _NATURAL
    return replace(run, length=length, engine=scraper.engine_total, **peaks)


def _warm_up(base_url: str, model: str, prompts: Sequence[str], max_tokens: int = 16) -> None:
    """A couple of short requests so the first measured level does not pay first-request costs."""
    for p in prompts[:2]:
        stream_chat(base_url, model, as_messages(p), max_tokens, _REQUEST_TIMEOUT)


def run_interleaved(
    servers: Mapping[str, VllmServer],
    prompts: Sequence[str],
    concurrency: Sequence[int],
    max_tokens: int,
    repeats: int = 3,
    time_limit: float = _LEVEL_TIME_LIMIT,
    progress: bool = True,
    ignore_eos: bool = True,
) -> list[_LevelRun]:
    """Every level `repeats` times on servers that are all up, alternating which mode goes first."""
    modes = list(servers)
    for srv in servers.values():
        _warm_up(srv.base_url, srv.model, prompts)
    runs = []
    for rep in range(repeats):
        for c in concurrency:
            for mode in modes if rep % 2 == 0 else modes[::-1]:
                srv = servers[mode]
                run = _run_level(
                    srv, prompts, c, requests_for(c), max_tokens, time_limit, mode, ignore_eos
                )
                run.repeat = rep
                runs.append(run)
        if progress:
            rows = [r.row() for r in runs if r.repeat == rep]
            said = [f"{r['mode']} C={r['concurrency']} {r['output_tok_s']:.0f} tok/s" for r in rows]
            length = _FORCED if ignore_eos else _NATURAL
            print(f"{length} length, repeat {rep + 1}/{repeats}: {', '.join(said)}")
    return runs


def results_frame(*runs: Sequence[_LevelRun]) -> pd.DataFrame:
    """One tidy DataFrame (a row per mode × concurrency) from any number of benchmark runs."""
    rows = [run.row() for group in runs for run in group]
    return pd.DataFrame(rows).sort_values(["mode", "concurrency"], ignore_index=True)


def per_prompt(runs: Sequence[_LevelRun]) -> dict[int, list[RequestAcceptance]]:
    """Per level: one acceptance record per distinct prompt, its requests summed."""
    by_level: dict[int, dict[int, list[RequestAcceptance]]] = {}
    for run in runs:
        prompts = by_level.setdefault(run.concurrency, {})
        for r in run.results:
            if r.acceptance is not None:
                prompts.setdefault(r.prompt_index, []).append(r.acceptance)
    return {
        c: [_summed(records) for _, records in sorted(prompts.items())]
        for c, prompts in sorted(by_level.items())
    }


def _summed(records: Sequence[RequestAcceptance]) -> RequestAcceptance:
    """Several requests' acceptance as one: histograms and draft tokens added."""
    hist = tuple(map(sum, zip(*(r.histogram for r in records), strict=True)))  # k + 1 each
    return RequestAcceptance(hist, sum(r.num_draft_tokens for r in records))


def _crossing_concurrency(table: pd.DataFrame) -> int | None:
    """The first concurrency (ascending) whose speedup is below 1, or None."""
    below = table.sort_values("concurrency")
    below = below[below["speedup"] < 1]
    return None if below.empty else int(below["concurrency"].iloc[0])


def crossing_statement(table: pd.DataFrame) -> str:
    """Where spec/plain output tok/s falls below 1, in one sentence computed from the table."""
    t = table.sort_values("concurrency").reset_index(drop=True)
    first, last = t.iloc[0], t.iloc[-1]
    cross = _crossing_concurrency(t)
    span = f"speedup {first.speedup:.2f}× at concurrency {int(first.concurrency)}, "
    span += f"{last.speedup:.2f}× at {int(last.concurrency)}"
    if t["repeats"].max() > 1:
        unsure = t[(t.speedup_min < 1) & (t.speedup_max > 1)].concurrency.tolist()
        both = f", and at concurrency {unsure} the repeats fall on both sides of 1"
        span += f"; medians of {int(t.repeats.min())} repeats" + (both if unsure else "")
    if cross is None:
        return f"The ratio did not cross 1 up to concurrency {int(last.concurrency)} ({span})."
    if (t["speedup"] < 1).all():
        return (
            f"The ratio is below 1 at every concurrency measured ({span}): on this machine "
            f"speculative decoding never served more tokens per second than plain decoding."
        )
    i = int(t.index[t.concurrency == cross][0])
    prev = f"; {t.speedup[i - 1]:.2f}× at {int(t.concurrency[i - 1])}" if i > 0 else ""
    return (
        f"The ratio first falls below 1 at concurrency {cross} ({t.speedup[i]:.2f}×{prev}): "
        f"from there plain decoding serves more tokens per second ({span})."
    )


def trend_statement(table: pd.DataFrame) -> str:
    """How spec/plain tokens/s moved from the first concurrency to the last, against the repeats."""
    first, last = table.iloc[0], table.iloc[-1]
    band = f"(ranges over repeats {first.speedup_min:.2f}–{first.speedup_max:.2f} and "
    band += f"{last.speedup_min:.2f}–{last.speedup_max:.2f})"
    trend = "moved by less than its repeats spread, so this run cannot tell which way,"
    trend = "rose" if last.speedup_min > first.speedup_max else trend
    trend = "fell" if last.speedup_max < first.speedup_min else trend
    return (
        f"spec/plain tokens/s {trend} from {first.speedup:.2f}x at concurrency "
        f"{int(first.concurrency)} to {last.speedup:.2f}x at {int(last.concurrency)} {band}"
    )


def run_burst(
    srv: VllmServer, mode: str, prompts: Sequence[list[int]], output_tokens: int
) -> dict[str, Any]:
    """Send every prompt at once (forced length), sampling /metrics: capacity and peaks."""

    def one(ids: list[int]) -> dict[str, Any]:
        return complete_tokens(srv.base_url, srv.model, ids, output_tokens, ignore_eos=True)

    cache = scrape_engine_stats(srv.base_url)
    with Scraper(srv.base_url, interval=0.1) as scraper:
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=len(prompts), thread_name_prefix="burst") as pool:
            replies = list(pool.map(one, prompts))
        duration = time.perf_counter() - t0
    produced = {int(r["usage"]["completion_tokens"]) for r in replies}
    if produced != {output_tokens}:
        raise RuntimeError(f"the burst produced {produced} tokens, not {output_tokens}")
    each, blocks, size = len(prompts[0]) + output_tokens, cache.num_gpu_blocks, cache.block_size
    row = {"mode": mode, "num_gpu_blocks": blocks, "block_size": size}
    row |= {"kv_cache_tokens": cache.kv_tokens, "burst_requests": len(prompts)}
    row |= {"tokens_per_request": each, "fit_at_full_length": blocks // math.ceil(each / size)}
    preempted = scraper.engine_total.preemptions
    row |= {"peak_running": scraper.peak("running"), "preemptions": preempted}
    return row | {"peak_kv_usage": scraper.peak("kv_cache_usage"), "duration_s": round(duration, 2)}
