"""Notebook 06's own functions, written in its cells because they are the lesson: the bytes-only
c(k, B), the fixed + bytes step model fitted to the lab, the utility controller and the replay of
static k, the schedule and the controller, and the predicted speed-up with PR #49163's choice of
k. Each is read from the notebook's cells and run as written."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from chapters.ch06_moe import answer, lab, schedule
from helpers.analytics import speedup
from helpers.common.tables import COLUMNS
from tests.chapters.ch06_moe.test_answer import _costs, _taus
from tests.chapters.ch06_moe.test_schedule import (
    ALPHA,
    COSTS,
    expected_tokens_per_step,
    iid_trace,
    taus,
)
from tests.support import notebook_defs, shape_named

NOTEBOOK = "06_does_eagle3_pay_on_moe.ipynb"


@functools.cache
def defs() -> dict[str, Any]:
    """What notebook 06's cells define (functions, classes, literal constants), run as written."""
    return notebook_defs(NOTEBOOK)


def fitted_model(record: dict) -> Callable[[int, int, float], float]:
    """Section 4's fitted step model on a record's as-loaded cells, as (k, C, GB) -> ms."""
    ns = defs()
    table = lab.cells(record)
    coef = ns["fit_step_model"](table[table.routing == lab.AS_LOADED])
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
    assert len(out) == len(speedup.trusted_rows(lab.load_lab()))
    assert np.isfinite(out.residual).all()


def test_a_fit_bounded_by_the_peak_never_credits_more_bandwidth() -> None:
    ns = defs()
    table = lab.cells(lab.load_lab())
    fit = ns["fit_step_model"](table[table.routing == lab.AS_LOADED], peak_tb_s=1.0)
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


# ------------------------------------------------------------ section 7: prediction, best k


def predict(costs: pd.DataFrame, published: pd.DataFrame) -> pd.DataFrame:
    """Section 7's prediction, as notebook 06 writes it."""
    return defs()["predict"](costs, published)


def best_by_concurrency(prediction: pd.DataFrame, **kwargs: Any) -> dict[int, int]:
    """Section 7's choice of k per concurrency (vLLM PR #49163), as notebook 06 writes it."""
    return defs()["best_by_concurrency"](prediction, **kwargs)


def test_the_prediction_bands_tau_over_c() -> None:
    p = predict(_costs(), _taus()).set_index(["concurrency", COLUMNS.k])
    row = p.loc[(1, 3)]
    assert row.speedup == pytest.approx(1.9 / 1.8)
    assert (row.speedup_low, row.speedup_high) == pytest.approx((1.8 / 1.9, 2.0 / 1.7))
    assert p.loc[(64, 0)].speedup == pytest.approx(1 / answer.k0_cost(64))


def test_best_k_takes_the_smaller_of_tied_candidates() -> None:
    p = predict(_costs(), _taus())
    # C = 1: k = 1's low end 1.6 / 1.5 beats k = 3's 1.8 / 1.9; C = 64: k = 3's 1.8 / 1.15 wins
    assert best_by_concurrency(p) == {1: 1, 64: 3}
    tied = p.assign(speedup_low=p.speedup_low.where(p[COLUMNS.k] != 3, 1.6 / 1.5 * 0.995))
    assert best_by_concurrency(tied)[1] == 1
    assert best_by_concurrency(p, tie=0.5)[64] == 0, "a wide tie falls back to the smallest"


def test_the_shipped_prediction_rests_on_the_trusted_cells() -> None:
    p = predict(lab.c_table(lab.load_lab()), answer.published_taus("Qwen3-30B-A3B"))
    assert set(p.concurrency) == {1, 4, 16, 64} and (p.speedup_low <= p.speedup_high).all()
    config = answer.speculative_config("d", best_by_concurrency(p))
    assert not config or config["num_speculative_tokens"] >= 1
