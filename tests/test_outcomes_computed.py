"""Outcome sentences come from the run: rankings, directions, crossings and "best k" are computed
from the run's tables by a few functions, and the notebooks print them through those functions.

Each function is tested where its outcome flips: the same table with the outcome reversed must
give the reversed sentence, and a table the run cannot decide must say so. A sentence typed in
prose would not flip; one printed through these functions cannot outlive its run.
"""

from __future__ import annotations

import ast
import json

import pandas as pd
import pytest

from chapters.ch03_acceptance import experiments
from chapters.ch04_serving import bench, interactivity
from chapters.ch06_moe import answer, lab
from helpers.analytics.intervals import Interval, ranking
from helpers.common.paths import NOTEBOOKS_DIR
from helpers.common.tables import COLUMNS

#: Per notebook, the functions that state its outcomes (each called in a code cell).
OUTCOME_CALLS: dict[str, set[str]] = {
    "02": {"sweeps.tau_ranking", "calibration.calibration_sentence"},
    "03": {"intervals.ranking", "experiments.best_k_sentence", "calibration.calibration_sentence"},
    "04": {"intervals.ranking", "bench.crossing_statement", "interactivity.gain_statement"},
    "05": {"sweeps.tau_ranking"},
    "06": {"lab.shape_verdict", "lab.union_lines", "answer.summary_lines", "answer.outside_lines"},
    "07": {"intervals.ranking"},
}


def test_a_ranking_reverses_with_its_intervals() -> None:
    high, low = Interval(3.6, 3.5, 3.7, 8), Interval(2.0, 1.9, 2.1, 8)
    said = ranking({"code": high, "prose": low})
    flipped = ranking({"code": low, "prose": high})
    assert said.index("code") < said.index("> prose")
    assert flipped.index("prose") < flipped.index("> code")
    assert "the order holds" in said and "the order holds" in flipped
    tied = ranking({"code": Interval(3.0, 1.5, 4.0, 8), "prose": low})
    assert "cannot rank" in tied and "the order holds" not in tied


def _throughput(tok_s: dict[int, float], spread: float) -> pd.DataFrame:
    """A sweep's throughput table: median tok/s per k with a min-max range of ± spread."""
    return pd.DataFrame(
        {
            COLUMNS.k: list(tok_s),
            "output_tokens_per_s": list(tok_s.values()),
            "tokens_per_s_min": [v - spread for v in tok_s.values()],
            "tokens_per_s_max": [v + spread for v in tok_s.values()],
        }
    )


def test_the_fastest_k_follows_the_table() -> None:
    said = experiments.best_k_sentence(_throughput({0: 100.0, 3: 150.0}, spread=5))
    flipped = experiments.best_k_sentence(_throughput({0: 150.0, 3: 100.0}, spread=5))
    assert said.startswith("fastest k=3") and flipped.startswith("fastest plain")
    assert "do not overlap" in said
    close = experiments.best_k_sentence(_throughput({0: 100.0, 3: 104.0}, spread=5))
    assert "cannot tell them apart" in close


def _band(values: list[float], half_width: float) -> pd.DataFrame:
    """c by concurrency with a band of ± half_width."""
    return pd.DataFrame(
        {
            "concurrency": [1, 4, 16][: len(values)],
            "c": values,
            "c_low": [v - half_width for v in values],
            "c_high": [v + half_width for v in values],
        }
    )


@pytest.mark.parametrize(
    ("values", "verdict"),
    [
        ([1.2, 1.6, 2.0], "rises"),
        ([2.0, 1.6, 1.2], "falls"),
        ([1.2, 2.0, 1.2], "rises then falls"),
        ([1.6, 1.65, 1.6], "stays within its band"),
    ],
)
def test_a_direction_is_read_from_the_bands(values: list[float], verdict: str) -> None:
    assert lab.shape_verdict(_band(values, 0.1), "concurrency", "c", "c_low", "c_high") == verdict


def test_a_direction_the_bands_do_not_show_is_not_stated() -> None:
    said = lab.shape_verdict(_band([1.2, 1.6, 1.65], 0.1), "concurrency", "c", "c_low", "c_high")
    assert said.startswith("this run cannot tell")


def _speedups(values: list[float]) -> pd.DataFrame:
    """spec/plain output tok/s by concurrency."""
    frame = pd.DataFrame({"concurrency": [1, 4, 16], "speedup": values, "repeats": 1})
    return frame.assign(speedup_min=frame.speedup, speedup_max=frame.speedup)


def test_the_crossing_is_where_the_table_crosses() -> None:
    assert "first falls below 1 at concurrency 16" in bench.crossing_statement(
        _speedups([1.5, 1.2, 0.8])
    )
    assert "first falls below 1 at concurrency 4" in bench.crossing_statement(
        _speedups([1.5, 0.9, 0.8])
    )
    assert "did not cross 1" in bench.crossing_statement(_speedups([1.5, 1.2, 1.1]))
    assert "below 1 at every concurrency" in bench.crossing_statement(_speedups([0.9, 0.8, 0.7]))


def _prediction(speedups: dict[int, tuple[float, float, float]]) -> pd.DataFrame:
    """A prediction at one concurrency: per k its speed-up, low and high end."""
    return pd.DataFrame(
        [(1, k, *v) for k, v in speedups.items()],
        columns=["concurrency", COLUMNS.k, "speedup", "speedup_low", "speedup_high"],
    )


def test_the_chosen_k_follows_the_prediction() -> None:
    """Notebook 06 chooses k on the medians in a cell and prints it through answer.summary_lines."""
    from chapters.ch06_moe.tests.test_notebook06_cells import defs

    choose_k = defs()["choose_k"]
    a = _prediction({0: (1.0, 1.0, 1.0), 1: (1.3, 1.2, 1.4), 3: (1.6, 1.5, 1.7)})
    b = _prediction({0: (1.0, 1.0, 1.0), 1: (1.6, 1.5, 1.7), 3: (1.3, 1.2, 1.4)})
    assert answer.summary_lines(a, choose_k(a), "v", "d")[0].startswith("C = 1: k = 3,")
    assert answer.summary_lines(b, choose_k(b), "v", "d")[0].startswith("C = 1: k = 1,")
    close = _prediction({0: (1.0, 1.0, 1.0), 1: (1.3, 0.9, 1.6), 3: (1.35, 0.95, 1.7)})
    assert (
        "cannot tell it from plain, k = 1"
        in answer.summary_lines(close, choose_k(close), "v", "d")[0]
    )


def test_the_outside_check_and_the_union_lines_flip_with_their_tables() -> None:
    check = pd.DataFrame(
        [
            {
                "id": "r",
                "batch": 8,
                "measured": 1.5,
                "predicted_low": 1.2,
                "predicted_high": 1.8,
                "at_concurrency": 8,
                "covered": True,
                "not_comparable": None,
            }
        ]  # fmt: skip
    )
    assert answer.outside_lines(check)[0] == "the prediction covers 1 of 1 comparable public runs"
    missed = check.assign(measured=2.0, covered=False)
    assert answer.outside_lines(missed)[0].startswith("the prediction covers 0 of 1")
    assert answer.outside_lines(missed)[1].endswith("above")
    effect = pd.DataFrame([{"concurrency": 1, "step_ms_low": 6.0, "step_ms_high": 7.0,
                            "union_low": 10.0, "union_high": 29.0, "replicate_spread_ms": 0.1,
                            "separate": True}])  # fmt: skip
    assert lab.union_lines(effect, 3)[0].endswith("the union moved the step")
    hidden = effect.assign(replicate_spread_ms=2.0, separate=False)
    assert lab.union_lines(hidden, 3)[0].endswith("not seen here")


def _gains(gains: list[float]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Equal-speed gains at two per-user speeds, and the curves they were read from."""
    table = pd.DataFrame(
        {
            "per_user_tok_s": [40.0, 20.0],
            "measured": ["plain at concurrency 1", "plain at concurrency 4"],
            "gain": gains,
        }
    )
    curve = pd.DataFrame(
        {"mode": ["plain", "plain", "spec", "spec"], "per_user_tok_s": [20, 40, 25, 45]}
    )
    return table, curve


def test_the_equal_speed_gain_counts_what_the_table_holds() -> None:
    assert "more tokens/s at 2 of the 2" in interactivity.gain_statement(*_gains([1.4, 1.1]))
    assert "more tokens/s at 0 of the 2" in interactivity.gain_statement(*_gains([0.9, 0.7]))
    none = interactivity.gain_statement(pd.DataFrame(), _gains([1.0, 1.0])[1])
    assert "cannot compare them" in none


def _calls(source: str) -> set[str]:
    """`module.function` of every call in a code cell."""
    return {
        ast.unparse(node.func)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }


@pytest.mark.parametrize("number", sorted(OUTCOME_CALLS))
def test_the_notebook_states_its_outcomes_through_the_functions(number: str) -> None:
    (path,) = NOTEBOOKS_DIR.glob(f"{number}_*.ipynb")
    cells = json.loads(path.read_text())["cells"]
    called = set().union(*(_calls("".join(c["source"])) for c in cells if c["cell_type"] == "code"))
    missing = OUTCOME_CALLS[number] - called
    assert not missing, f"{path.name} no longer calls {sorted(missing)}"


def test_the_call_scan_sees_a_call_and_misses_a_typed_sentence() -> None:
    assert "experiments.best_k_sentence" in _calls("print(experiments.best_k_sentence(throughput))")
    assert not _calls("'fastest k=3, then plain'")
