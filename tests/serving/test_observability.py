"""helpers.serving.observability: PromQL panels, the alert, the scraper and the log line, offline."""

from __future__ import annotations

import pytest

from helpers.common.counters import SpecCounters
from helpers.serving import observability as ob


def _samples() -> list[ob.Sample]:
    """10 s of a k=3 server: 10 drafts/s, 2 accepted per draft, then 4 s of 1 accepted per draft."""
    out, c = [], SpecCounters(0, 0, 0, (0, 0, 0))
    for t in range(11):
        out.append(ob.Sample(float(t), c))
        step = (
            SpecCounters(10, 30, 20, (10, 10, 0)) if t < 6 else SpecCounters(10, 30, 10, (10, 0, 0))
        )
        c = c + step
    return out


def test_dashboard_evaluates_the_promql_over_its_window() -> None:
    panels = ob.dashboard(_samples(), window=2.0).set_index("t")
    assert panels.acceptance_length[2.0] == pytest.approx(3.0)
    assert panels.accepted_tokens_per_s[2.0] == pytest.approx(20.0)
    assert panels.acceptance_rate[2.0] == pytest.approx(20 / 30)
    assert panels.position_2[2.0] == pytest.approx(1.0) and panels.position_3[2.0] == 0.0
    assert panels.acceptance_length[10.0] == pytest.approx(2.0)
    # a window that spans the change mixes the two regimes
    assert 2.0 < panels.acceptance_length[7.0] < 3.0
    assert "$interval" in ob.PROMQL["acceptance_length"]


def test_alert_fires_only_after_the_drop_and_only_while_drafting() -> None:
    panels = ob.dashboard(_samples(), window=2.0)
    firing = ob.alert_firing(panels, threshold=2.5)
    assert firing.tolist() == [t >= 8 for t in panels.t]
    assert "SpecDecodeAcceptanceDrop" in ob.TAU_ALERT


def test_scraper_takes_samples_in_a_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = iter(range(1000))
    monkeypatch.setattr(ob, "scrape_spec_counters", lambda url: SpecCounters(next(calls), 0, 0, ()))
    with ob.Scraper("http://x", interval=0.01) as scraper:
        import time

        time.sleep(0.1)
    assert len(scraper.samples) >= 3
    assert scraper.total.num_drafts == len(scraper.samples) - 1
    assert all(a.t <= b.t for a, b in zip(scraper.samples, scraper.samples[1:]))


def test_log_lines_parse() -> None:
    line = (
        "(APIServer pid=1) INFO 12-01 02:52:14 [metrics.py:120] SpecDecoding metrics: Mean "
        "acceptance length: 3.52, Accepted throughput: 101.20 tokens/s, Drafted throughput: "
        "120.00 tokens/s, Accepted: 1012 tokens, Drafted: 1200 tokens, Per-position acceptance "
        "rate: 0.920, 0.860, 0.750, Avg Draft acceptance rate: 84.3%"
    )
    df = ob.spec_log_lines(f"noise\n{line}\nmore\n{line}\n")
    assert len(df) == 2 and df.accepted.sum() == 2024 and df.drafted.iloc[0] == 1200
    assert df.tau.iloc[0] == pytest.approx(3.52) and df.per_position.iloc[0] == [0.92, 0.86, 0.75]
