"""kit.watchdog: a cell's silence limit from its measured time, the times record (merged, shared by
writers at once, a damaged one read as none) and the one line a stalled cell fails with."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_output

from kit import watchdog


def test_the_limit_follows_the_measured_time_with_a_floor() -> None:
    cells = [new_markdown_cell("# t"), new_code_cell("a"), new_code_cell("b"), new_code_cell("c")]
    times = {cells[1].id: 0.4, cells[2].id: 45.0}
    limits = watchdog.cell_limits(cells, times)
    assert [limit.seconds for limit in limits] == [
        watchdog._DEFAULT,
        watchdog._FLOOR,  # 10 × 0.4 s is below the floor
        450.0,
        watchdog._DEFAULT,  # never measured
    ]
    assert limits[2].reason == "10 × its last 45.0 s, at least 120 s"
    assert limits[3].reason == "never measured"
    fixed = watchdog.cell_limits(cells, times, fixed=3.0)
    assert {limit.seconds for limit in fixed} == {3.0}


def test_a_cell_without_an_id_is_keyed_by_its_place() -> None:
    cell = new_code_cell("x")
    del cell["id"]
    assert watchdog.cell_key(cell, 7) == "#7"
    assert watchdog.cell_limit(cell, 7, {"#7": 30.0}).seconds == 300.0


def test_times_are_merged_per_notebook(tmp_path: Path) -> None:
    watchdog.record_times(tmp_path, "a.ipynb", {"c1": 1.0, "c2": 2.0})
    watchdog.record_times(tmp_path, "b.ipynb", {"c1": 9.0})
    watchdog.record_times(tmp_path, "a.ipynb", {"c2": 3.0})
    assert watchdog.read_times(tmp_path, "a.ipynb") == {"c1": 1.0, "c2": 3.0}
    assert watchdog.read_times(tmp_path, "b.ipynb") == {"c1": 9.0}
    assert watchdog.read_times(tmp_path, "none.ipynb") == {}
    assert not list(tmp_path.glob(".*.partial"))


@pytest.mark.parametrize(
    "text",
    [
        "{cut sho",
        "[1, 2]",
        '{"a.ipynb": [1]}',
        '{"a.ipynb": {"c1": "fast", "c2": -1, "c3": 1e999}}',
    ],
)
def test_a_damaged_record_is_read_as_never_measured(tmp_path: Path, text: str) -> None:
    (tmp_path / watchdog.TIMES_NAME).write_text(text)
    assert watchdog.read_times(tmp_path, "a.ipynb") == {}
    watchdog.record_times(tmp_path, "a.ipynb", {"c1": 2.0})  # and rewritten whole
    assert json.loads((tmp_path / watchdog.TIMES_NAME).read_text())["a.ipynb"] == {"c1": 2.0}


def _write_many(build: str, notebook: str) -> None:
    """Record 30 cells of one notebook, one at a time (a process of the test below)."""
    for i in range(30):
        watchdog.record_times(Path(build), notebook, {f"c{i}": float(i)})


def test_writers_at_once_lose_nothing(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    writers = [
        context.Process(target=_write_many, args=(str(tmp_path), f"{n}.ipynb")) for n in range(3)
    ]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
    for n in range(3):
        assert len(watchdog.read_times(tmp_path, f"{n}.ipynb")) == 30


def test_the_last_output_is_its_last_line() -> None:
    outputs = [
        new_output("stream", name="stdout", text="loading\nstep 3 of 9\n\n"),
        new_output("display_data", data={"image/png": "..."}),
    ]
    assert watchdog.last_output(outputs) == "'display_data (image/png)'"
    assert watchdog.last_output(outputs[:1]) == "'step 3 of 9'"
    assert watchdog.last_output([]) == "(none)"
    long = watchdog.last_output([new_output("stream", name="stdout", text="x" * 500)])
    assert len(long) < 200 and long.endswith("…'")
    error = new_output("error", ename="ValueError", evalue="boom", traceback=[])
    assert watchdog.last_output([error]) == "'ValueError: boom'"


def test_the_stall_line_names_notebook_cell_limit_and_last_output() -> None:
    limit = watchdog.CellLimit(120.0, "10 × its last 1.2 s, at least 120 s")
    line = watchdog.stall_line("01_x.ipynb", 23, "silent for 121 s", limit, "'τ 2.30'")
    assert line == (
        "01_x.ipynb cell 23: silent for 121 s (limit 120 s: 10 × its last 1.2 s, at least "
        "120 s); last output: 'τ 2.30'"
    )
