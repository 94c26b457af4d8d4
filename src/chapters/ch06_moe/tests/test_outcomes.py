"""06's outcome sentences flip with their tables: a direction read from the bands, the chosen k,
the outside check and the union lines (the repo-wide rule: tests/test_outcomes_computed.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from chapters.ch06_moe import answer, lab
from helpers.common.tables import COLUMNS
from tests.support import notebook_defs

#: The notebook whose cell chooses k.
NOTEBOOK = "06_does_eagle3_pay_on_moe.ipynb"


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


def _prediction(speedups: dict[int, tuple[float, float, float]]) -> pd.DataFrame:
    """A prediction at one concurrency: per k its speed-up, low and high end."""
    return pd.DataFrame(
        [(1, k, *v) for k, v in speedups.items()],
        columns=["concurrency", COLUMNS.k, "speedup", "speedup_low", "speedup_high"],
    )


def test_the_chosen_k_follows_the_prediction() -> None:
    """Notebook 06 chooses k on the medians in a cell and prints it through answer.summary_lines."""
    choose_k = notebook_defs(NOTEBOOK)["choose_k"]
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
