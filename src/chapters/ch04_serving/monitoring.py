"""A server's /metrics sampled in a thread (`Scraper`), and what its log says (notebook 04)."""

from __future__ import annotations

import math
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from chapters.ch04_serving.clients import (
    EngineStats,
    engine_stats_from_text,
    scrape_metrics_text,
    spec_counters_from_text,
)
from helpers.common.counters import SpecCounters

__all__ = ["Scraper", "wait_for_spec_log", "kv_capacity_from_log"]

#: vLLM's periodic log line (`SpecDecodingLogging.log`), every VLLM_LOG_STATS_INTERVAL seconds.
_LOG_LINE = re.compile(
    r"SpecDecoding metrics: Mean acceptance length: (?P<tau>[\d.]+), "
    r"Accepted throughput: (?P<accepted_per_s>[\d.]+) tokens/s, "
    r"Drafted throughput: (?P<drafted_per_s>[\d.]+) tokens/s, "
    r"Accepted: (?P<accepted>\d+) tokens, Drafted: (?P<drafted>\d+) tokens, "
    r"Per-position acceptance rate: (?P<per_position>[\d., ]+), "
    r"Avg Draft acceptance rate: (?P<rate>[\d.]+)%"
)
#: The KV cache's size the engine logs at start: one line, or two in older vLLMs.
_KV_SIZE_LINE = re.compile(r"KV cache size: (?P<tokens>[\d,]+) tokens")
_MAX_CONCURRENCY_LINE = re.compile(
    r"Maximum concurrency for (?P<max_model_len>[\d,]+) tokens per request: (?P<x>[\d.]+)x"
)


@dataclass(frozen=True)
class _Sample:
    """One scrape: seconds since the start, the spec-decode counters and the engine's figures."""

    t: float
    counters: SpecCounters
    engine: EngineStats = field(default_factory=EngineStats)


@dataclass
class Scraper:
    """Scrape a server's /metrics every `interval` s in a thread: `with Scraper(url) as s:`."""

    base_url: str
    interval: float = 1.0
    samples: list[_Sample] = field(default_factory=list)

    def _scrape(self) -> None:
        """Append one sample (a failed scrape is skipped, as Prometheus would)."""
        try:
            text = scrape_metrics_text(self.base_url)
        except Exception:
            return
        now = time.perf_counter() - self._t0
        self.samples.append(
            _Sample(now, spec_counters_from_text(text), engine_stats_from_text(text))
        )

    def _loop(self) -> None:
        """Scrape until stopped."""
        while not self._stop.wait(self.interval):
            self._scrape()

    def __enter__(self) -> Scraper:
        self._t0, self._stop = time.perf_counter(), threading.Event()
        self._scrape()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._scrape()

    @property
    def total(self) -> SpecCounters:
        """Counter delta between the first and last sample: what a before/after pair measures."""
        return self.samples[-1].counters - self.samples[0].counters

    @property
    def engine_total(self) -> EngineStats:
        """Engine counters between the first and last sample (gauges as at the last)."""
        return self.samples[-1].engine - self.samples[0].engine

    def peak(self, gauge: str) -> float:
        """The highest value an EngineStats gauge took in any sample."""
        return max(getattr(s.engine, gauge) for s in self.samples)


def _spec_log_lines(log_text: str) -> pd.DataFrame:
    """Every SpecDecoding metrics line of a server log as a row (counts since the previous line)."""
    rows = []
    for m in _LOG_LINE.finditer(log_text):
        positions = [float(x) for x in m["per_position"].split(",") if x.strip()]
        row = {k: float(v) for k, v in m.groupdict().items() if k != "per_position"}
        rows.append({**row, "per_position": positions})
    return pd.DataFrame(rows, columns=[*_LOG_LINE.groupindex])


def wait_for_spec_log(
    log_path: Path, counters: SpecCounters, timeout: float, poll: float = 0.2
) -> pd.DataFrame:
    """The log's SpecDecoding lines once they cover `counters` (raise with the gap at `timeout`)."""
    deadline = time.perf_counter() + timeout
    while True:
        lines = _spec_log_lines(log_path.read_text(encoding="utf-8", errors="replace"))
        accepted, drafted = int(lines.accepted.sum()), int(lines.drafted.sum())
        if accepted >= counters.num_accepted_tokens and drafted >= counters.num_draft_tokens:
            return lines
        if time.perf_counter() > deadline:
            raise TimeoutError(
                f"{log_path.name}: after {timeout:.0f} s its {len(lines)} SpecDecoding lines cover "
                f"{accepted} accepted / {drafted} drafted tokens, the counters "
                f"{counters.num_accepted_tokens} / {counters.num_draft_tokens}: is the server "
                f"logging at INFO with VLLM_LOG_STATS_INTERVAL shorter than the timeout?"
            )
        time.sleep(poll)


def kv_capacity_from_log(log_text: str) -> dict[str, float]:
    """The KV cache's tokens, max_model_len and 'maximum concurrency' a server logged (NaN: not)."""
    size, conc = _KV_SIZE_LINE.search(log_text), _MAX_CONCURRENCY_LINE.search(log_text)
    return {
        "kv_cache_tokens": float(size["tokens"].replace(",", "")) if size else math.nan,
        "max_model_len": float(conc["max_model_len"].replace(",", "")) if conc else math.nan,
        "max_concurrency": float(conc["x"]) if conc else math.nan,
    }
