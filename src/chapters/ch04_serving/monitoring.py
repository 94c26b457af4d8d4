"""`Scraper`: a server's /metrics sampled in a thread, as Prometheus does (notebook 04). Section 6
reads each level's counters and gauges from it, section 8 the burst's peaks, section 9 the
dashboard's PromQL and the alert rule, which its cells evaluate over the samples.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from chapters.ch04_serving.clients import (
    EngineStats,
    engine_stats_from_text,
    scrape_metrics_text,
    spec_counters_from_text,
)
from helpers.common.counters import SpecCounters

__all__ = [
    "Scraper",
]


@dataclass(frozen=True)
class _Sample:
    """One scrape: seconds since the scraper started, the server's cumulative spec-decode counters,
    and its other engine figures (prefix cache, preemptions, running/waiting gauges)."""

    t: float
    counters: SpecCounters
    engine: EngineStats = field(default_factory=EngineStats)


@dataclass
class Scraper:
    """Scrape a server's spec-decode counters every `interval` s in a thread: `with
    Scraper(url):`."""

    base_url: str
    interval: float = 1.0
    samples: list[_Sample] = field(default_factory=list)

    def _scrape(self) -> None:
        """Append one sample (a failed scrape is skipped, as Prometheus would)."""
        try:
            text = scrape_metrics_text(self.base_url)
        except Exception:
            return
        sample = _Sample(
            time.perf_counter() - self._t0,
            spec_counters_from_text(text),
            engine_stats_from_text(text),
        )
        self.samples.append(sample)

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
        """The highest value an EngineStats gauge ('running', 'waiting', 'kv_cache_usage') took
        in any sample."""
        return max(getattr(s.engine, gauge) for s in self.samples)
