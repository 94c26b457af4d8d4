"""A pytest plugin that holds nbval's notebook cells to the watchdog's limits (kit.watchdog).

    pytest --nbval-lax --nbval-current-env -p kit.nbval_watchdog notebooks

A cell still running past its limit is interrupted (nbval's own timeout, set per cell) and fails
in one line naming the notebook, the cell and its last output, instead of waiting out
--nbval-cell-timeout (2,000 s unless given); nbval marks the notebook's later cells xfail. nbval
reads a cell's output only when the cell ends, so here the limit caps the cell's running time: 10 ×
its last measured time, at least 120 s, 600 s when never measured, never more than
--nbval-cell-timeout; --watchdog-limit S gives every cell S instead. The times of the cells that
passed go to build/cell-times.json (--watchdog-build DIR) at the end of the session, for the next
run (kit.runner reads and writes the same record).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.common.paths import BUILD_DIR
from kit import watchdog

__all__ = [
    "pytest_addoption",
    "pytest_runtest_call",
    "pytest_runtest_makereport",
    "pytest_sessionfinish",
]

_LIMIT_OPTION, _BUILD_OPTION = "--watchdog-limit", "--watchdog-build"
#: Per notebook: the seconds of its cells that passed this session, by cell key.
_TIMES = pytest.StashKey[dict[str, dict[str, float]]]()
#: On a cell item: its stall line, when its limit stopped it.
_STALL = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add --watchdog-limit S and --watchdog-build DIR."""
    group = parser.getgroup("kit.nbval_watchdog")
    group.addoption(
        _LIMIT_OPTION,
        type=float,
        default=None,
        metavar="S",
        help="seconds every notebook cell may run (default: from its measured time)",
    )
    group.addoption(
        _BUILD_OPTION,
        type=Path,
        default=BUILD_DIR,
        metavar="DIR",
        help=f"where {watchdog.TIMES_NAME} is read and written (default build/)",
    )


def _is_cell(item: pytest.Item) -> bool:
    """True for one of nbval's notebook-cell items."""
    return all(hasattr(item, name) for name in ("cell", "cell_num", "test_outputs"))


def _position(item: Any) -> int:
    """The cell's index among all the notebook's cells (0-based; nbval counts code cells)."""
    cells = item.parent.nb.cells
    return next(i for i, cell in enumerate(cells) if cell is item.cell)


def _limit(item: Any, index: int) -> watchdog.CellLimit:
    """This cell's limit, never more than --nbval-cell-timeout."""
    config = item.config
    times = watchdog.read_times(config.getoption(_BUILD_OPTION), item.parent.path.name)
    limit = watchdog.cell_limit(item.cell, index, times, config.getoption(_LIMIT_OPTION))
    cap = float(config.option.nbval_cell_timeout)
    return limit if limit.seconds <= cap else watchdog.CellLimit(cap, "--nbval-cell-timeout")


def _last_output(outputs: list[Any] | None) -> str:
    """The cell's last output before the interrupt that stopped it."""
    kept = [
        out
        for out in outputs or []
        if not (out.get("output_type") == "error" and out.get("ename") == "KeyboardInterrupt")
    ]
    return watchdog.last_output(kept)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Run an nbval cell with its limit as nbval's cell timeout; time the cells that pass, and
    note the stall line of one its limit stopped."""
    if not _is_cell(item):
        return (yield)
    option = item.config.option
    index = _position(item)
    limit = _limit(item, index)
    notebook = item.parent.path.name
    timed_out, saved = item.parent.timed_out, option.nbval_cell_timeout
    option.nbval_cell_timeout = limit.seconds
    start = time.monotonic()
    try:
        result = yield
    except BaseException:
        if item.parent.timed_out and not timed_out:
            what = f"still running after {time.monotonic() - start:.0f} s"
            last = _last_output(item.test_outputs)
            item.stash[_STALL] = watchdog.stall_line(notebook, index + 1, what, limit, last)
        raise
    finally:
        option.nbval_cell_timeout = saved
    seconds = round(time.monotonic() - start, 2)
    times = item.config.stash.setdefault(_TIMES, {})
    times.setdefault(notebook, {})[watchdog.cell_key(item.cell, index)] = seconds
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Iterator[pytest.TestReport]:
    """A cell its limit stopped fails with the stall line alone."""
    report = yield
    if call.when == "call" and report.failed and _STALL in item.stash:
        report.longrepr = item.stash[_STALL]
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Record the times of the cells that passed (a build folder that cannot be written is said
    in one line and keeps the old record)."""
    build = session.config.getoption(_BUILD_OPTION)
    for notebook, times in session.config.stash.get(_TIMES, {}).items():
        try:
            watchdog.record_times(build, notebook, times)
        except OSError as err:
            print(f"kit.nbval_watchdog: cannot record the cell times in {build} ({err})")
            return
