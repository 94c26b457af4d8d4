"""Acceptance the way production reads it: Prometheus series, the dashboard's PromQL, an alert rule,
and the server's "SpecDecoding metrics" log line, each reconciled with counter deltas.

A Prometheus server scrapes `/metrics` every few seconds and a Grafana panel evaluates PromQL over
the stored series. `Scraper` does the scraping here (a thread, one sample per `interval`), and
`dashboard` evaluates the queries vLLM documents for its spec-decode metrics
(`vllm/v1/spec_decode/metrics.py`, `SpecDecodingProm`) over a rate window:

    τ              1 + rate(vllm:spec_decode_num_accepted_tokens_total[W])
                       / rate(vllm:spec_decode_num_drafts_total[W])
    per position   rate(vllm:spec_decode_num_accepted_tokens_per_pos_total[W])
                       / rate(vllm:spec_decode_num_drafts_total[W])
    accepted/s     rate(vllm:spec_decode_num_accepted_tokens_total[W])

`rate` here is Prometheus's without its extrapolation to the window's edges: the increase between
the first and last sample inside the window over the time between them. τ is a ratio of two rates
over the same samples, so extrapolation would cancel in it anyway.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field

import pandas as pd

from helpers.common import vllm_names
from helpers.common.counters import SpecCounters, acceptance_stats
from helpers.serving.clients import scrape_spec_counters

__all__ = [
    "PROMQL",
    "TAU_ALERT",
    "Sample",
    "Scraper",
    "dashboard",
    "alert_firing",
    "LOG_LINE",
    "spec_log_lines",
]


def _rate(metric: str) -> str:
    """PromQL: the per-second rate of a vLLM counter's exported samples over $interval."""
    return f"rate({vllm_names.exported(metric)}[$interval])"


_ACCEPTED = _rate(vllm_names.NUM_ACCEPTED_TOKENS_METRIC)
_DRAFTS = _rate(vllm_names.NUM_DRAFTS_METRIC)

#: The dashboard's queries, as vLLM documents them ($interval is the rate window).
PROMQL: dict[str, str] = {
    "acceptance_length": f"1 + ({_ACCEPTED} / {_DRAFTS})",
    "acceptance_rate": f"{_ACCEPTED} / {_rate(vllm_names.NUM_DRAFT_TOKENS_METRIC)}",
    "per_position": f"{_rate(vllm_names.ACCEPTED_PER_POS_METRIC)} / {_DRAFTS}",
    "accepted_tokens_per_s": _ACCEPTED,
}
#: A Prometheus alerting rule for a drop in τ while the server is drafting ($threshold: your floor).
TAU_ALERT = f"""- alert: SpecDecodeAcceptanceDrop
  expr: |
    (1 + {_ACCEPTED}
       / {_DRAFTS}) < $threshold
    and {_DRAFTS} > 0
  for: 1m
  annotations:
    summary: "EAGLE-3 acceptance length below $threshold: drafter and verifier out of step?\""""


@dataclass(frozen=True)
class Sample:
    """One scrape: seconds since the scraper started, and the server's cumulative counters."""

    t: float
    counters: SpecCounters


@dataclass
class Scraper:
    """Scrape a server's spec-decode counters every `interval` s in a thread: `with Scraper(url):`."""

    base_url: str
    interval: float = 1.0
    samples: list[Sample] = field(default_factory=list)

    def _scrape(self) -> None:
        """Append one sample (a failed scrape is skipped, as Prometheus would)."""
        try:
            counters = scrape_spec_counters(self.base_url)
        except Exception:  # noqa: BLE001 - a missed scrape is a gap in the series, not an error
            return
        self.samples.append(Sample(time.perf_counter() - self._t0, counters))

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


def dashboard(samples: list[Sample], window: float) -> pd.DataFrame:
    """The dashboard's panels at every sample: τ, acceptance rate, accepted tokens/s, per position."""
    rows = []
    for i, now in enumerate(samples):
        inside = [s for s in samples[: i + 1] if s.t >= now.t - window]
        first, span = inside[0], now.t - inside[0].t
        delta = now.counters - first.counters
        if span <= 0 or delta.num_drafts == 0:
            continue
        stats = acceptance_stats(delta)  # vLLM's formulas, as everywhere in the workbook
        row = {
            "t": now.t,
            "acceptance_length": stats[vllm_names.TAU],
            "acceptance_rate": stats[vllm_names.ACCEPTANCE_RATE] / 100,
            "accepted_tokens_per_s": delta.num_accepted_tokens / span,
            "drafts_per_s": delta.num_drafts / span,
        }
        rates = stats[vllm_names.PER_POSITION_RATES]
        row |= {f"position_{j + 1}": r for j, r in enumerate(rates)}
        rows.append(row)
    return pd.DataFrame(rows)


def alert_firing(panels: pd.DataFrame, threshold: float) -> pd.Series:
    """TAU_ALERT's expression at each evaluation: τ below the threshold while drafts flow."""
    return (panels.acceptance_length < threshold) & (panels.drafts_per_s > 0)


#: vLLM's periodic log line (`SpecDecodingLogging.log`), every VLLM_LOG_STATS_INTERVAL seconds.
LOG_LINE = re.compile(
    r"SpecDecoding metrics: Mean acceptance length: (?P<tau>[\d.]+), "
    r"Accepted throughput: (?P<accepted_per_s>[\d.]+) tokens/s, "
    r"Drafted throughput: (?P<drafted_per_s>[\d.]+) tokens/s, "
    r"Accepted: (?P<accepted>\d+) tokens, Drafted: (?P<drafted>\d+) tokens, "
    r"Per-position acceptance rate: (?P<per_position>[\d., ]+), "
    r"Avg Draft acceptance rate: (?P<rate>[\d.]+)%"
)


def spec_log_lines(log_text: str) -> pd.DataFrame:
    """Every SpecDecoding metrics line of a server log as a row (counts since the previous line)."""
    rows = []
    for m in LOG_LINE.finditer(log_text):
        row = {k: float(v) for k, v in m.groupdict().items() if k != "per_position"}
        row["per_position"] = [float(x) for x in m["per_position"].split(",") if x.strip()]
        rows.append(row)
    return pd.DataFrame(rows)
