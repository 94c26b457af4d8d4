"""Outcome sentences come from the run: rankings, directions, crossings and "best k" are computed
from the run's tables by a few functions, and the notebooks print them through those functions.

Each function is tested where its outcome flips: the same table with the outcome reversed must
give the reversed sentence, and a table the run cannot decide must say so. A sentence typed in
prose would not flip; one printed through these functions cannot outlive its run.
"""

from __future__ import annotations

import ast
import json

import pytest

from helpers.analytics.intervals import Interval, ranking
from helpers.common.paths import NOTEBOOKS_DIR
from kit import chapters

#: (notebook, the functions that state its outcomes, each called in a code cell), as each
#: chapter's chapter.json declares them; the trunk's are flipped here, a chapter's in its
#: tests/test_outcomes.py.
OUTCOME_CALLS = [(c.notebook, set(c.outcome_calls)) for c in chapters.discover() if c.outcome_calls]


def test_a_ranking_reverses_with_its_intervals() -> None:
    high, low = Interval(3.6, 3.5, 3.7, 8), Interval(2.0, 1.9, 2.1, 8)
    said = ranking({"code": high, "prose": low})
    flipped = ranking({"code": low, "prose": high})
    assert said.index("code") < said.index("> prose")
    assert flipped.index("prose") < flipped.index("> code")
    assert "the order holds" in said and "the order holds" in flipped
    tied = ranking({"code": Interval(3.0, 1.5, 4.0, 8), "prose": low})
    assert "cannot rank" in tied and "the order holds" not in tied


def _calls(source: str) -> set[str]:
    """`module.function` of every call in a code cell."""
    return {
        ast.unparse(node.func)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }


@pytest.mark.parametrize(("notebook", "expected"), OUTCOME_CALLS, ids=[n for n, _ in OUTCOME_CALLS])
def test_the_notebook_states_its_outcomes_through_the_functions(
    notebook: str, expected: set[str]
) -> None:
    path = NOTEBOOKS_DIR / notebook
    cells = json.loads(path.read_text())["cells"]
    called = set().union(*(_calls("".join(c["source"])) for c in cells if c["cell_type"] == "code"))
    missing = expected - called
    assert not missing, f"{path.name} no longer calls {sorted(missing)}"


def test_the_call_scan_sees_a_call_and_misses_a_typed_sentence() -> None:
    assert "experiments.best_k_sentence" in _calls("print(experiments.best_k_sentence(throughput))")
    assert not _calls("'fastest k=3, then plain'")
