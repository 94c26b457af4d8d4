"""Section 7 of notebook 04: the equal-user-speed gain (its cells' own definitions), and
chapters.ch04_serving.interactivity's sentence and checks."""

from __future__ import annotations

import pandas as pd
import pytest

from chapters.ch04_serving import interactivity as it
from tests.support import notebook_defs

#: What notebook 04's cells define (curves, gain_at_equal_speed).
NB = notebook_defs("04_serving_and_benchmarks.ipynb")


def sweep(rows: list[tuple[str, int, float, float]]) -> pd.DataFrame:
    """(mode, concurrency, total tok/s, tok/s per user) rows, one repeat each."""
    return pd.DataFrame(rows, columns=["mode", "concurrency", "output_tok_s", "per_user_tok_s"])


def test_gain_is_read_at_the_same_user_speed_by_interpolation() -> None:
    # plain: 100 tok/s/user at C=1 (100 total), 50 at C=4 (200 total);
    # spec:  80 tok/s/user at C=4 (320 total), 150 at C=1 (150 total)
    curve = NB["curves"](
        sweep(
            [
                ("plain", 1, 100, 100),
                ("plain", 4, 200, 50),
                ("spec", 1, 150, 150),
                ("spec", 4, 320, 80),
            ]
        )
    )
    gains = NB["gain_at_equal_speed"](curve).set_index("per_user_tok_s")
    # at 100 tok/s/user spec lies between 80 (320) and 150 (150): 320 - 20/70 * 170
    assert gains.spec_tok_s[100] == pytest.approx(320 - 20 / 70 * 170)
    assert gains.gain[100] == pytest.approx((320 - 20 / 70 * 170) / 100)
    # at 80 tok/s/user plain lies between 50 (200) and 100 (100): 200 - 30/50 * 100
    assert gains.plain_tok_s[80] == pytest.approx(140) and gains.gain[80] == pytest.approx(
        320 / 140
    )
    # 150 and 50 lie outside the other curve: never extrapolated
    assert set(gains.index) == {100, 80}
    sentence = it.gain_statement(gains.reset_index(), curve)
    assert sentence.startswith(
        "At equal per-user speed the speculative server delivered 2.71× at 100"
    )
    assert "more tokens/s at 2 of the 2 shared speeds" in sentence


def test_no_shared_speed_is_said() -> None:
    curve = NB["curves"](
        sweep([("plain", 1, 100, 100), ("plain", 4, 200, 50), ("spec", 1, 300, 300)])
    )
    gains = NB["gain_at_equal_speed"](curve)
    assert gains.empty
    assert "share no per-user speed" in it.gain_statement(gains, curve)


def level(mode: str, c: int, tok: float, **over: float) -> dict:
    """One results row that passes every check unless overridden."""
    row = {
        "mode": mode,
        "concurrency": c,
        "output_tok_s": tok,
        "peak_waiting": 0.0,
        "mean_in_flight": float(c),
        "preemptions": 0.0,
        "prompt_tokens": 100,
        "requests": 4,
        "mean_output_tokens": 100.0,
        "prefix_cache_hits": 0.0,
        "server_tpot_ms": 10.0,
        "mean_tpot_ms": 10.0,
        "chunks_per_request": 100.0 if mode == "plain" else 40.0,
        "acceptance_length": float("nan") if mode == "plain" else 2.5,
    }
    return {**row, **over}


def test_checks_hold_on_a_clean_run_and_name_each_failure() -> None:
    clean = pd.DataFrame(
        [level(m, c, 100.0 + r) for m in ("plain", "spec") for c in (1, 4) for r in (0, 1, 2)]
    )
    checks = it.validity_checks(clean)
    assert checks.holds.all() and set(checks.check) == {
        "repeats", "queueing", "waves", "preemptions", "prefix cache", "server timing", "stream"
    }  # fmt: skip
    assert all("holds at all" in line for line in it.check_lines(checks))
    dirty = pd.DataFrame(
        [
            level("plain", 4, 100.0),
            level("plain", 4, 120.0, peak_waiting=2.0),  # 20 % apart, and a queue
            level("spec", 4, 100.0, mean_in_flight=2.0, prefix_cache_hits=100.0),  # half the slots
            level("spec", 4, 100.0, preemptions=1.0, prefix_cache_hits=100.0),
        ]
    )
    checks = it.validity_checks(dirty).set_index(["check", "where"])
    assert not checks.holds[("repeats", "plain C=4")]
    assert checks.value[("repeats", "plain C=4")] == pytest.approx(20 / 110)
    assert not checks.holds[("queueing", "plain C=4")] and not checks.holds[("waves", "spec C=4")]
    assert not checks.holds[("preemptions", "spec C=4")]
    cache = checks.xs("prefix cache", level="check")
    assert not cache.holds.iloc[0] and cache.value.iloc[0] == pytest.approx(100 / 500)
    lines = it.check_lines(it.validity_checks(dirty))
    assert any(
        line.startswith("waves: FAILS at 1 of 2") and "spec C=4: 0.5" in line for line in lines
    )


def test_a_coalesced_stream_fails_its_check_and_prints_no_gain() -> None:
    """A front end that sends each answer in one burst: the client sees TPOT → 0 and one chunk,
    while the server's own TPOT says 10 ms; no gain may be printed from such a run."""
    rows = [level(m, c, 100.0 * c) for m in ("plain", "spec") for c in (1, 4)]
    rows[2] |= {"mean_tpot_ms": 0.01, "chunks_per_request": 1.0}  # spec C=1: coalesced
    results = pd.DataFrame(rows).assign(per_user_tok_s=[100.0, 50.0, 150.0, 80.0])
    checks = it.validity_checks(results)
    stream = checks[checks.check == "stream"].set_index("where")
    assert not stream.holds["spec C=1"] and stream.holds["plain C=1"]
    assert stream.value["spec C=1"] == pytest.approx(0.001)
    curve = NB["curves"](results)
    sentence = it.gain_statement(NB["gain_at_equal_speed"](curve), curve)
    printed = it.gated(sentence, checks, it.EQUAL_SPEED_NEEDS, "the gain at equal per-user speed")
    assert "×" not in printed and printed.startswith("This run cannot say the gain at equal")
    assert "stream at spec C=1" in printed
    # the same run passes the checks the ratio at a concurrency rests on
    assert it.gated("ratio", checks, it.CROSSING_NEEDS, "where the ratio crosses 1") == "ratio"


def test_no_server_timing_fails_its_check() -> None:
    results = pd.DataFrame([level("plain", 1, 100.0, server_tpot_ms=float("nan"))])
    checks = it.validity_checks(results).set_index("check")
    assert not checks.holds["server timing"]


def test_noisy_repeats_gate_the_ratio_and_the_gain_alike() -> None:
    rows = [level(m, c, 100.0 * c) for m in ("plain", "spec") for c in (1, 4)]
    results = pd.DataFrame(rows).assign(per_user_tok_s=[100.0, 50.0, 150.0, 80.0])
    clean = it.validity_checks(results)
    assert it.holds(clean, it.CROSSING_NEEDS) and it.holds(clean, it.EQUAL_SPEED_NEEDS)
    noisy = clean.copy()
    noisy.loc[noisy.check == "repeats", "holds"] = [False] + [True] * (
        int((noisy.check == "repeats").sum()) - 1
    )
    assert not it.holds(noisy, it.CROSSING_NEEDS) and not it.holds(noisy, it.EQUAL_SPEED_NEEDS)
    assert it.gated("ratio", noisy, it.CROSSING_NEEDS, "where the ratio crosses 1").startswith(
        "This run cannot say where the ratio crosses 1: repeats at"
    )
