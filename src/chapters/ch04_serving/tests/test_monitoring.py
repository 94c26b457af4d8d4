"""Notebook 04 offline: its cells' PromQL panels and alert rule (the notebook's own definitions),
and chapters.ch04_serving.monitoring's scraper, log-line and KV-log readers."""

from __future__ import annotations

import pytest

from chapters.ch04_serving import monitoring as ob
from helpers.common.counters import SpecCounters
from tests.support import notebook_defs

NOTEBOOK = "04_serving_and_benchmarks.ipynb"
#: The notebook's dashboard and alert, as its cells define them.
NB = notebook_defs(
    NOTEBOOK,
    "ACCEPTED",
    "DRAFTS",
    "PROMQL",
    "TAU_ALERT",
)


def _samples() -> list[ob._Sample]:
    """10 s of a k=3 server: 10 drafts/s, 2 accepted per draft, then 4 s of 1 accepted per draft."""
    out, c = [], SpecCounters(0, 0, 0, (0, 0, 0))
    for t in range(11):
        out.append(ob._Sample(float(t), c))
        step = (
            SpecCounters(10, 30, 20, (10, 10, 0)) if t < 6 else SpecCounters(10, 30, 10, (10, 0, 0))
        )
        c = c + step
    return out


def test_dashboard_evaluates_the_promql_over_its_window() -> None:
    panels = NB["dashboard"](_samples(), window=2.0).set_index("t")
    assert panels.acceptance_length[2.0] == pytest.approx(3.0)
    assert panels.accepted_tokens_per_s[2.0] == pytest.approx(20.0)
    assert panels.acceptance_rate[2.0] == pytest.approx(20 / 30)
    assert panels.position_2[2.0] == pytest.approx(1.0) and panels.position_3[2.0] == 0.0
    assert panels.acceptance_length[10.0] == pytest.approx(2.0)
    # a window that spans the change mixes the two regimes
    assert 2.0 < panels.acceptance_length[7.0] < 3.0
    assert "$interval" in NB["PROMQL"]["acceptance_length"]


def test_alert_fires_only_after_the_drop_and_only_while_drafting() -> None:
    panels = NB["dashboard"](_samples(), window=2.0)
    firing = NB["alert_states"](panels, threshold=2.5, for_seconds=0.0) == "firing"
    assert firing.tolist() == [t >= 8 for t in panels.t]
    assert "SpecDecodeAcceptanceDrop" in NB["TAU_ALERT"] and "for: $for" in NB["TAU_ALERT"]


def test_the_rules_for_holds_the_alert_pending_first() -> None:
    panels = NB["dashboard"](_samples(), window=2.0)
    states = NB["alert_states"](panels, threshold=2.5, for_seconds=1.5).tolist()
    # true from t = 8: pending at 8 and 9, firing from 8 + 1.5 on
    expected = ["inactive"] * 7 + ["pending", "pending", "firing"]  # t = 1 .. 10
    assert states == expected
    assert set(NB["alert_states"](panels, 2.5, for_seconds=60.0)) == {"inactive", "pending"}


def metrics_text(drafts: int, running: int) -> str:
    """A /metrics page with one spec-decode counter and the running gauge."""
    return (
        "# TYPE vllm:spec_decode_num_drafts_total counter\n"
        f'vllm:spec_decode_num_drafts_total{{engine="0"}} {drafts}\n'
        "# TYPE vllm:num_requests_running gauge\n"
        f'vllm:num_requests_running{{engine="0"}} {running}\n'
    )


def test_scraper_takes_samples_in_a_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = iter(range(1000))

    def page(url: str) -> str:
        n = next(calls)
        return metrics_text(n, 5 if n == 2 else 1)

    monkeypatch.setattr(ob, "scrape_metrics_text", page)
    with ob.Scraper("http://x", interval=0.01) as scraper:
        import time

        time.sleep(0.1)
    assert len(scraper.samples) >= 3
    assert scraper.total.num_drafts == len(scraper.samples) - 1
    assert all(a.t <= b.t for a, b in zip(scraper.samples, scraper.samples[1:]))
    assert scraper.peak("running") == 5 and scraper.samples[-1].engine.running == 1


def test_log_lines_parse() -> None:
    line = (
        "(APIServer pid=1) INFO 12-01 02:52:14 [metrics.py:120] SpecDecoding metrics: Mean "
        "acceptance length: 3.52, Accepted throughput: 101.20 tokens/s, Drafted throughput: "
        "120.00 tokens/s, Accepted: 1012 tokens, Drafted: 1200 tokens, Per-position acceptance "
        "rate: 0.920, 0.860, 0.750, Avg Draft acceptance rate: 84.3%"
    )
    df = ob._spec_log_lines(f"noise\n{line}\nmore\n{line}\n")
    assert len(df) == 2 and df.accepted.sum() == 2024 and df.drafted.iloc[0] == 1200
    assert df.tau.iloc[0] == pytest.approx(3.52) and df.per_position.iloc[0] == [0.92, 0.86, 0.75]


def test_wait_for_spec_log_returns_once_the_log_covers_the_counters(tmp_path) -> None:
    import threading

    line = (
        "INFO SpecDecoding metrics: Mean acceptance length: 2.00, Accepted throughput: 1.00 "
        "tokens/s, Drafted throughput: 3.00 tokens/s, Accepted: {a} tokens, Drafted: {d} tokens, "
        "Per-position acceptance rate: 0.500, 0.300, 0.200, Avg Draft acceptance rate: 33.3%\n"
    )
    log = tmp_path / "server.log"
    log.write_text(line.format(a=10, d=30))
    # the last interval arrives a moment later, as a server prints it one interval after the traffic
    later = threading.Timer(0.1, lambda: log.write_text(log.read_text() + line.format(a=5, d=15)))
    later.start()
    lines = ob.wait_for_spec_log(log, SpecCounters(20, 45, 15, ()), timeout=5, poll=0.01)
    later.join()
    assert len(lines) == 2 and lines.accepted.sum() == 15 and lines.drafted.sum() == 45


def test_wait_for_spec_log_fails_with_the_gap(tmp_path) -> None:
    log = tmp_path / "server.log"
    log.write_text("no spec lines yet\n")
    with pytest.raises(
        TimeoutError, match="cover 0 accepted / 0 drafted tokens, the counters 7 / 9"
    ):
        ob.wait_for_spec_log(log, SpecCounters(3, 9, 7, ()), timeout=0.05, poll=0.01)


def test_kv_capacity_from_both_log_formats() -> None:
    one_line = (
        "(EngineCore pid=9) INFO [kv_cache_utils.py:2462] CPU KV cache size: 7,168 tokens, "
        "Maximum concurrency for 1,024 tokens per request: 7.00x"
    )
    assert ob.kv_capacity_from_log(one_line) == {
        "kv_cache_tokens": 7168.0,
        "max_model_len": 1024.0,
        "max_concurrency": 7.0,
    }
    two_lines = (
        "INFO GPU KV cache size: 21,845 tokens\n"
        "INFO Maximum concurrency for 4,096 tokens per request: 5.33x\n"
    )
    assert ob.kv_capacity_from_log(two_lines)["max_concurrency"] == pytest.approx(5.33)
    nothing = ob.kv_capacity_from_log("quiet log")
    assert all(v != v for v in nothing.values())  # NaN where the server logged nothing
