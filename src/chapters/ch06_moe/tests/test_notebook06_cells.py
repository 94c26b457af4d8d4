"""Notebook 06's own functions, written in its cells because they are the lesson: the bytes-only
c(k, B), the fixed + bytes step model fitted to the lab, the utility controller and the replay of
static k, the schedule and the controller, and the predicted speed-up with its choice of k on the
medians and the ks the bands cannot tell apart. Each is read from the notebook's cells and run as
written."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from chapters.ch06_moe import answer, lab, schedule
from chapters.ch06_moe.tests.shapes import shape_named
from chapters.ch06_moe.tests.test_schedule import (
    ALPHA,
    COSTS,
    expected_tokens_per_step,
    iid_trace,
    taus,
)
from helpers.analytics import speedup
from helpers.common.tables import COLUMNS
from helpers.engine import lifecycle
from tests.support import notebook_defs

NOTEBOOK = "06_does_eagle3_pay_on_moe.ipynb"


@functools.cache
def defs() -> dict[str, Any]:
    """What notebook 06's cells define (functions, classes, literal constants), run as written."""
    return notebook_defs(NOTEBOOK)


def fitted_model(record: dict) -> Callable[[int, int, float], float]:
    """Section 4's fitted step model on a record's as-loaded cells, as (k, C, GB) -> ms."""
    ns = defs()
    table = lab.cells(record)
    coef = ns["fit_step_model"](table[table.routing == speedup.AS_LOADED])
    return functools.partial(ns["step_ms"], coef)


# ------------------------------------------------------------------------ section 4: bytes, fit


@pytest.mark.parametrize("name", ["qwen3-30b-a3b", "qwen3-235b-a22b"])
def test_cost_grows_with_k_and_with_independence(name: str) -> None:
    relative_cost = defs()["relative_cost"]
    shape = shape_named(name)
    assert 1 < relative_cost(shape, 1, 1, 0.0) < relative_cost(shape, 3, 1, 0.0)
    assert relative_cost(shape, 3, 1, 1.0) < relative_cost(shape, 3, 1, 0.0)


def synthetic(coef: dict[str, float]) -> pd.DataFrame:
    """Cells whose step times follow the model exactly."""
    rows = []
    for k in (0, 1, 3, 5):
        for c in (1, 4, 16, 64):
            gb = 6.0 + 0.8 * c**0.5 + 0.6 * k
            t = coef["fixed_ms"] + k * coef["per_draft_ms"] + gb * coef["ms_per_gb"]
            t += c * (k + 1) * coef["per_token_ms"]
            rows.append(
                {COLUMNS.k: k, "concurrency": c, "gb_per_step": gb, "tokens": c * (k + 1)}
                | {"step_ms": t}
            )
    return pd.DataFrame(rows)


def test_fit_recovers_the_costs_it_was_built_from() -> None:
    ns = defs()
    coef = {"fixed_ms": 2.5, "per_draft_ms": 0.2, "ms_per_gb": 1 / 3.0, "per_token_ms": 0.01}
    fit = ns["fit_step_model"](synthetic(coef))
    for name, value in coef.items():
        assert fit[name] == pytest.approx(value, rel=1e-6), name
    assert ns["residuals"](fit, synthetic(coef)).residual.abs().max() < 1e-9
    assert ns["step_ms"](fit, 3, 16, 9.0) == pytest.approx(2.5 + 0.6 + 3.0 + 0.64)


def test_fit_keeps_every_cost_non_negative() -> None:
    ns = defs()
    coef = {"fixed_ms": 2.0, "per_draft_ms": 0.0, "ms_per_gb": 0.25, "per_token_ms": 0.0}
    table = synthetic(coef)
    table["step_ms"] *= np.where(table[COLUMNS.k] > 0, 0.9, 1.0)  # drafts cheaper than free
    fit = ns["fit_step_model"](table)
    assert all(v >= 0 for v in fit.values())
    out = ns["residuals"](fit, table)
    assert (out.residual == out.model_ms / out.step_ms - 1).all()


def test_fit_on_the_shipped_record_reports_every_cell() -> None:
    ns = defs()
    table = lab.cells(lab.load_lab())
    out = ns["residuals"](ns["fit_step_model"](table), table)
    assert len(out) == len(speedup.lab_rows(lab.load_lab()))
    assert np.isfinite(out.residual).all()


def test_a_fit_bounded_by_the_peak_never_credits_more_bandwidth() -> None:
    ns = defs()
    table = lab.cells(lab.load_lab())
    fit = ns["fit_step_model"](table[table.routing == speedup.AS_LOADED], peak_tb_s=1.0)
    assert fit["ms_per_gb"] >= 1.0 - 1e-12


# ------------------------------------------------------------------ section 6: controller, replay


def test_static_and_schedule_replays_are_tau_over_c() -> None:
    replay_table = defs()["replay_table"]
    trace = [0, 1, 5, 2, 3, 0]
    table = replay_table({"t": [trace]}, {1: {3: 1.5}}, {"t": [(1, 1, 3)]}).iloc[0]
    assert table["k=3"] == pytest.approx(schedule.trace_tau(trace, 3) / 1.5)
    assert table.schedule == table["k=3"], "the schedule drafts 3 at batch 1"
    plain = replay_table({"t": [trace]}, {1: {3: 1.5}}, {"t": [(1, 1, 0)]}, k0_cost=lambda b: 1.25)
    assert plain.schedule.iloc[0] == pytest.approx(1 / 1.25), "a k = 0 entry costs what it costs"
    on_v1 = replay_table(
        {"t": [trace]}, {1: {3: 1.5}}, {"t": [(1, 1, 3)]}, schedule_costs={1: {3: 1.8}}
    )
    assert on_v1.schedule.iloc[0] == pytest.approx(schedule.trace_tau(trace, 3) / 1.8)
    assert on_v1["k=3"].iloc[0] == table["k=3"], "static k keeps the default runner's price"
    unpriced = replay_table({"t": [trace]}, {1: {3: 1.5}}, {}, schedule_costs={})
    assert math.isnan(unpriced.schedule.iloc[0]), "no runner check: the schedule is not priced"


def test_utility_controller_stops_speculating_when_it_does_not_pay() -> None:
    replay_utility = defs()["replay_utility"]
    never = [[0] * 200 for _ in range(4)]
    speed, share = replay_utility(never, COSTS[1], probe_every=16)
    assert share < 0.15 and speed > 0.9  # probes cost a little, as Cascade caps slowdown
    always = [[5] * 200 for _ in range(4)]
    speed, share = replay_utility(always, COSTS[1], probe_every=16)
    assert share > 0.95 and speed == pytest.approx(6 / 1.9, rel=0.05)


def test_utility_controller_learns_alpha_from_what_it_drafted() -> None:
    ctl = defs()["UtilityController"](COSTS[4])
    for seed in range(400):
        ctl.observe(5, min(iid_trace(0.7, 1, seed=seed)[0], 5))
    assert ctl.expected_tokens(3) == pytest.approx(expected_tokens_per_step(3, 0.7), abs=0.15)


def test_replay_table_has_every_rule_per_trace_and_batch() -> None:
    replay_table = defs()["replay_table"]
    traces = {"alpha 0.4": [iid_trace(ALPHA, 300, seed=s) for s in range(4)]}
    best = {b: schedule.best_k(taus(), c)[0] for b, c in COSTS.items()}
    table = replay_table(traces, COSTS, {"alpha 0.4": schedule.schedule_ranges(best)})
    assert len(table) == len(COSTS)
    assert {"k=1", "k=3", "k=5", "schedule", "utility", "speculated_share"} <= set(table.columns)
    at16 = table.set_index("batch").loc[16]
    assert at16["num_speculative_tokens (schedule)"] == 0 and at16.schedule == 1.0


# ------------------------------------------------------------ section 7: prediction, choice of k


def _bands() -> pd.DataFrame:
    rows = [
        (1, 1, 1.4, 1.3, 1.5),
        (1, 3, 1.8, 1.7, 1.9),
        (64, 1, 1.05, 1.0, 1.1),
        (64, 3, 1.12, 1.1, 1.15),
    ]
    return pd.DataFrame(rows, columns=["concurrency", COLUMNS.k, "c", "c_low", "c_high"])


def _taus() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "source": ["a", "a", "b", "b", "c"],
            COLUMNS.k: [1, 3, 3, 3, 3],
            "tau": [1.6, 2.0, 1.8, 2.4, 3.0],
        }
    )


def test_tau_by_k_counts_each_source_once() -> None:
    t = defs()["tau_by_k"](_taus())
    # k = 3: the sources' medians are 2.0, 2.1 and 3.0; their median is 2.1 (not 2.2 of all four)
    assert t.loc[3].tau == pytest.approx(2.1) and t.loc[3].sources == 3
    assert (t.loc[3].tau_low, t.loc[3].tau_high) == (1.8, 3.0)


def test_the_prediction_bands_tau_over_c() -> None:
    p = defs()["predict"](_bands(), _taus()).set_index(["concurrency", COLUMNS.k])
    row = p.loc[(1, 3)]
    assert row.speedup == pytest.approx(2.1 / 1.8)
    assert (row.speedup_low, row.speedup_high) == pytest.approx((1.8 / 1.9, 3.0 / 1.7))
    assert p.loc[(64, 0)].speedup == 1.0 and p.loc[(64, 0)].speedup_low == 1.0


def _prediction(rows: list[tuple[int, float, float, float]]) -> pd.DataFrame:
    """One concurrency: (k, speed-up, low, high) per k."""
    return pd.DataFrame(
        [(1, k, s, lo, hi) for k, s, lo, hi in rows],
        columns=["concurrency", COLUMNS.k, "speedup", "speedup_low", "speedup_high"],
    )


def test_k_is_chosen_on_the_medians_and_overlaps_are_named() -> None:
    choose_k = defs()["choose_k"]
    clear = _prediction([(0, 1.0, 1.0, 1.0), (1, 1.2, 1.1, 1.3), (3, 1.6, 1.4, 1.8)])
    assert choose_k(clear) == {1: {"k": 3, "cannot_tell": []}}
    overlapping = _prediction([(0, 1.0, 1.0, 1.0), (1, 1.3, 1.1, 1.5), (3, 1.4, 0.9, 1.9)])
    assert choose_k(overlapping) == {1: {"k": 3, "cannot_tell": [0, 1]}}
    losing = _prediction([(0, 1.0, 1.0, 1.0), (3, 0.8, 0.7, 0.9)])
    assert choose_k(losing) == {1: {"k": 0, "cannot_tell": []}}
    tied = _prediction([(0, 1.0, 1.0, 1.0), (1, 1.5, 1.4, 1.6), (3, 1.5, 1.2, 1.8)])
    assert choose_k(tied)[1]["k"] == 1, "a tie goes to the smaller k"


def test_the_shipped_prediction_gives_every_concurrency_a_static_k() -> None:
    ns = defs()
    bands = answer.c_bands(lab.load_lab())
    p = ns["predict"](bands, answer.with_derived(answer.published_taus(), (1, 3, 5)))
    assert set(p.concurrency) == set(bands.concurrency) and (p.speedup_low <= p.speedup_high).all()
    choice = ns["choose_k"](p)
    assert set(choice) == set(bands.concurrency)
    for ch in choice.values():
        config = lifecycle.speculative_config("d", ch["k"]) if ch["k"] else {}
        assert "num_speculative_tokens_per_batch_size" not in config
