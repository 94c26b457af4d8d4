"""A pytest plugin for nbval runs: keep every executed notebook with its outputs, and time it.

    pytest --nbval-lax --nbval-current-env notebooks -p kit.nbval_keep --nbval-keep DIR

nbval executes each cell and compares (or, with --nbval-lax, only runs) it, but keeps nothing; this
plugin writes what that one execution produced: DIR/<notebook>.ipynb with each cell's outputs as
the kernel sent them (a failing cell keeps its traceback; nbval runs the cells after it too), and
DIR/nbval-times.json with one record per notebook: start and end (epoch seconds), seconds, cells
passed / failed / skipped, and the first failing cell. Without --nbval-keep it does nothing.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest

__all__ = [
    "pytest_addoption",
    "pytest_runtest_makereport",
    "pytest_sessionfinish",
]

_OPTION = "--nbval-keep"
_TIMES_NAME = "nbval-times.json"
#: Per notebook file (in the session's stash): its nbval file node and the record being filled in.
_SEEN = pytest.StashKey[dict[str, dict[str, Any]]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add --nbval-keep DIR."""
    parser.addoption(
        _OPTION,
        metavar="DIR",
        default=None,
        help="write each notebook nbval executed, with its outputs, and nbval-times.json to DIR",
    )


def _is_cell(item: pytest.Item) -> bool:
    """True for one of nbval's notebook-cell items."""
    return hasattr(item, "cell") and hasattr(item, "test_outputs")


def _record(item: pytest.Item) -> dict[str, Any]:
    """The record of the notebook this cell belongs to (created at its first cell)."""
    seen = item.config.stash.setdefault(_SEEN, {})
    key = str(item.parent.path)
    if key not in seen:
        seen[key] = {
            "file": item.parent,
            "notebook": item.parent.path.name,
            "start": time.time(),  # the first cell's setup
            "end": None,
            "passed": 0,
            "failed": 0,
            "skipped": 0,
            "first_failed_cell": None,
            "executed": 0,
        }
    return seen[key]


def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    """Copy what the kernel sent into the notebook cell, count the cell's outcome, and time the
    notebook from its first cell's setup to its last cell's teardown."""
    if not (item.config.getoption(_OPTION) and _is_cell(item)):
        return
    record = _record(item)
    if call.when == "teardown":
        record["end"] = call.stop
    if call.when == "call":
        record["executed"] += 1
        item.cell.outputs = [nbformat.from_dict(dict(out)) for out in item.test_outputs or []]
        item.cell.execution_count = record["executed"]
        for out in item.cell.outputs:
            if out.output_type == "execute_result":
                out.execution_count = record["executed"]
    if call.when == "call" or call.excinfo is not None:
        if call.excinfo is None:
            record["passed"] += 1
        elif call.excinfo.errisinstance(pytest.skip.Exception):
            record["skipped"] += 1
        else:
            record["failed"] += 1
            if record["first_failed_cell"] is None:
                record["first_failed_cell"] = getattr(item, "cell_num", None)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write the kept notebooks and nbval-times.json."""
    out = session.config.getoption(_OPTION)
    seen = session.config.stash.get(_SEEN, {})
    if not out or not seen:
        return
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    times = []
    for record in seen.values():
        nb = record.pop("file").nb
        record.pop("executed")
        nbformat.write(nb, str(folder / record["notebook"]))
        record["seconds"] = round(record["end"] - record["start"], 1)
        times.append(record)
    (folder / _TIMES_NAME).write_text(json.dumps(times, indent=1) + "\n", encoding="utf-8")
