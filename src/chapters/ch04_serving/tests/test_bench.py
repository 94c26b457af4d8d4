"""chapters.ch04_serving.bench: the crossing sentence computed from the table (notebook 04's
speedup_table cell makes it), and the bounded request counts (the live benchmark runs in notebook 04
under nbval)."""

from __future__ import annotations

import pandas as pd
import pytest

from chapters.ch04_serving.bench import (
    _crossing_concurrency,
    bench_prompts,
    crossing_statement,
    requests_for,
)
from helpers.common.prompts import CATEGORIES, load_prompts
from tests.support import notebook_defs

#: What notebook 04's cells define (speedup_table, reconcile_per_request, counters_frame).
NB = notebook_defs("04_serving_and_benchmarks.ipynb")
speedup_table = NB["speedup_table"]


def bench_frame(
    plain: list[float], spec: list[float], levels: tuple[int, ...] = (1, 2, 4, 8)
) -> pd.DataFrame:
    """A results frame with given output tok/s per level."""
    rows = [
        {"mode": m, "concurrency": c, "repeat": 0, "output_tok_s": v}
        | {"mean_ttft_ms": 10.0, "mean_tpot_ms": 5.0}
        for m, vals in (("plain", plain), ("spec", spec))
        for c, v in zip(levels, vals)
    ]
    return pd.DataFrame(rows)


def test_crossing_found_and_stated() -> None:
    table = speedup_table(bench_frame([100, 180, 300, 400], [200, 300, 290, 300]))
    assert list(table.speedup.round(2)) == [2.0, 1.67, 0.97, 0.75]
    assert _crossing_concurrency(table) == 4
    assert crossing_statement(table).startswith(
        "The ratio first falls below 1 at concurrency 4 (0.97×; 1.67× at 2)"
    )


def test_no_crossing_stated() -> None:
    table = speedup_table(bench_frame([100, 180, 300, 400], [200, 300, 310, 401]))
    assert _crossing_concurrency(table) is None
    assert crossing_statement(table).startswith("The ratio did not cross 1 up to concurrency 8")


def test_always_below_one_stated() -> None:
    table = speedup_table(bench_frame([100, 180], [90, 150], levels=(1, 2)))
    assert _crossing_concurrency(table) == 1
    assert crossing_statement(table).startswith(
        "The ratio is below 1 at every concurrency measured"
    )


def test_requests_per_level_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "false")
    assert [requests_for(c) for c in (1, 2, 4, 8, 16)] == [8, 8, 8, 16, 32]
    monkeypatch.setenv("CI", "true")
    assert [requests_for(c) for c in (1, 2, 4, 8, 16)] == [4, 4, 4, 8, 16]


def test_bench_prompts_interleave_the_categories() -> None:
    prompts = bench_prompts(8)
    assert len(prompts) == 8 and len(set(prompts)) == 8
    per_category = load_prompts()
    assert prompts[:4] == [per_category[c][0] for c in CATEGORIES]


def test_repeats_give_a_median_and_a_range_and_the_sentence_says_when_1_is_inside() -> None:
    frames = []
    for rep, (plain, spec) in enumerate(
        [([100, 100], [150, 90]), ([100, 100], [170, 110]), ([120, 100], [160, 95])]
    ):
        frames.append(bench_frame(plain, spec, levels=(1, 16)).assign(repeat=rep))
    table = speedup_table(pd.concat(frames)).set_index("concurrency")
    assert table.speedup[1] == pytest.approx(1.5) and table.speedup_min[1] == pytest.approx(
        160 / 120
    )
    assert table.speedup_max[16] == pytest.approx(1.1) and int(table.repeats[16]) == 3
    sentence = crossing_statement(table.reset_index())
    assert (
        "medians of 3 repeats" in sentence
        and "at concurrency [16] the repeats fall on both sides" in sentence
    )


def test_interleaved_runs_alternate_modes_and_repeat_every_level(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from types import SimpleNamespace

    from chapters.ch04_serving import bench
    from helpers.common.counters import SpecCounters

    calls = []

    def fake_level(srv, prompts, c, n, max_tokens, limit, mode, ignore_eos=True):
        calls.append((mode, c))
        return bench._LevelRun(mode, c, [], 1.0, 0, SpecCounters(2, 6, 3, (2, 1, 0)))

    monkeypatch.setattr(bench, "_run_level", fake_level)
    monkeypatch.setattr(bench, "_warm_up", lambda *a, **k: None)
    servers = {m: SimpleNamespace(base_url=m, model=m) for m in ("spec", "plain")}
    runs = bench.run_interleaved(servers, ["p"], (1, 4), 8, repeats=2, progress=False)
    assert calls == [
        ("spec", 1),
        ("plain", 1),
        ("spec", 4),
        ("plain", 4),
        ("plain", 1),
        ("spec", 1),
        ("plain", 4),
        ("spec", 4),
    ]
    assert [r.repeat for r in runs] == [0, 0, 0, 0, 1, 1, 1, 1]
    pooled = NB["counters_frame"]([r for r in runs if r.mode == "spec"])
    assert pooled.spec_decode_num_drafts.tolist() == [4, 4]
    assert pooled.tau_min.tolist() == pooled.tau_max.tolist() == [2.5, 2.5]
    assert pooled.repeats.tolist() == [2, 2]


# ---------------------------------------------------------------- per-request records and new columns


def _stream(start: float, latency: float, hist: tuple[int, ...] | None, tokens: int = 9):
    """A finished streamed request: sent at `start`, `latency` s long, with an acceptance record."""
    from chapters.ch04_serving.clients import StreamResult
    from helpers.common.counters import RequestAcceptance

    return StreamResult(
        output_tokens=tokens,
        prompt_tokens=20,
        ttft=0.1,
        latency=latency,
        first_token_at=start + 0.1,
        last_token_at=start + latency,
        finish_reason="stop",
        acceptance=None if hist is None else RequestAcceptance(hist, 3 * sum(hist)),
    )


def test_records_add_up_to_the_counters_or_say_they_do_not() -> None:
    from chapters.ch04_serving import bench
    from helpers.common.counters import SpecCounters

    a, b = _stream(0.0, 1.0, (1, 0, 1, 2)), _stream(0.0, 2.0, (2, 1, 0, 0))
    # a: 4 steps, 8 accepted, per position (3, 3, 2); b: 3 steps, 1 accepted, (1, 0, 0)
    counters = SpecCounters(7, 21, 9, (4, 3, 2))
    run = bench._LevelRun("spec", 2, [a, b], 2.0, 0, counters)
    row = NB["reconcile_per_request"]([run]).iloc[0]
    assert row.equal and row.per_position_equal and row.accepted_requests == 9
    off = bench._LevelRun("spec", 2, [a, b], 2.0, 0, SpecCounters(8, 24, 9, (4, 3, 2)))
    assert not NB["reconcile_per_request"]([off]).equal.iloc[0]  # one step the records missed
    bare = bench._LevelRun("spec", 2, [_stream(0, 1, None), _stream(0, 1, None)], 1.0, 0, counters)
    row = NB["reconcile_per_request"]([bare]).iloc[0]
    assert row.equal == "not available in this vLLM" and row.with_acceptance == 0
    assert row.drafts_requests != row.drafts_requests  # NaN: nothing to add up
    # both requests asked the same prompt (index -1): one unit, the records added up
    assert [u.counters for u in bench.per_prompt([run, bare])[2]] == [counters]


def test_level_row_measures_in_flight_and_user_speed() -> None:
    from chapters.ch04_serving import bench
    from chapters.ch04_serving.clients import EngineStats
    from helpers.common.counters import SpecCounters

    # two slots, 2 s of wall time; the slots were busy 2.0 + 1.0 s: 1.5 requests in flight on average
    res = [_stream(0.0, 2.0, (1, 0, 1, 2)), _stream(0.0, 1.0, (2, 1, 0, 0), tokens=5)]
    # the server's histograms over the level: 2 requests, TPOT 40 and 60 ms (mean 50), TTFT 0.1 s
    latency = {"tpot": (0.1, 2.0), "ttft": (0.2, 2.0), "itl": (0.5, 10.0), "e2e": (3.0, 2.0)}
    run = bench._LevelRun("spec", 2, res, 2.0, 0, SpecCounters(7, 21, 9, (4, 3, 2)))
    run.engine = EngineStats(latency=latency)
    row = run.row()
    assert row["mean_in_flight"] == pytest.approx(1.5)
    # per-user speed is what the server's own TPOT allows; the stream's is kept beside it
    assert row["server_tpot_ms"] == pytest.approx(50.0) and row["per_user_tok_s"] == pytest.approx(
        20
    )
    assert row["server_ttft_ms"] == pytest.approx(100.0)
    assert row["finished_naturally"] == 1.0 and row["length"] == bench._FORCED
    assert row["mean_output_tokens"] == 7


def test_per_prompt_adds_up_each_prompts_requests_into_one_unit() -> None:
    from chapters.ch04_serving import bench
    from helpers.common.counters import SpecCounters

    a, b, c = _stream(0, 1, (1, 0, 1, 2)), _stream(0, 1, (2, 1, 0, 0)), _stream(0, 1, (0, 0, 0, 3))
    a.prompt_index, b.prompt_index, c.prompt_index = 0, 1, 0  # prompt 0 asked twice
    run = bench._LevelRun("spec", 2, [a, b, c], 2.0, 0, SpecCounters())
    (units,) = bench.per_prompt([run]).values()
    assert [u.histogram for u in units] == [(1, 0, 1, 5), (2, 1, 0, 0)]
    assert [u.num_draft_tokens for u in units] == [3 * 7, 3 * 3]
