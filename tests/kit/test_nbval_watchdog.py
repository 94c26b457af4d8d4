"""kit.nbval_watchdog: under nbval, a cell running past its watchdog limit fails in one line with
the notebook, the cell and its last output (not after --nbval-cell-timeout's 2,000 s); the cells
that passed record their times."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from kit import watchdog


def _nbval(root: Path, *options: str) -> tuple[subprocess.CompletedProcess, float]:
    """pytest --nbval-lax on root/stall.ipynb with the plugin: (the run, its seconds)."""
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax"]
        + ["--nbval-current-env", "-p", "kit.nbval_watchdog", "stall.ipynb"]
        + ["--watchdog-build", "build", *options],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done, time.monotonic() - start


def test_a_cell_past_its_limit_fails_in_one_line(tmp_path: Path) -> None:
    cells = [
        new_markdown_cell("# stall"),
        new_code_cell("print('ready')"),
        new_code_cell("import time\nprint('waiting for the server')\ntime.sleep(300)"),
        new_code_cell("print('after')"),
    ]
    nbformat.write(new_notebook(cells=cells), str(tmp_path / "stall.ipynb"))
    done, seconds = _nbval(tmp_path, "--watchdog-limit", "3")
    assert done.returncode == 1 and seconds < 120, done.stdout
    line = next(line for line in done.stdout.splitlines() if "stall.ipynb cell 3" in line)
    assert "still running after 3 s (limit 3 s: the limit given)" in line, line
    assert line.endswith("last output: 'waiting for the server'"), line
    assert "1 failed, 1 passed" in done.stdout, done.stdout  # then nbval's xfail: cell 4
    times = watchdog.read_times(tmp_path / "build", "stall.ipynb")
    assert set(times) == {cells[1].id, cells[3].id}, "the stalled cell has no time to record"


def test_a_measured_cell_gets_its_own_limit_and_never_more_than_nbvals(tmp_path: Path) -> None:
    cells = [new_code_cell("import time\ntime.sleep(0.2)\nprint('done')")]
    nbformat.write(new_notebook(cells=cells), str(tmp_path / "stall.ipynb"))
    done, _ = _nbval(tmp_path)
    assert done.returncode == 0, done.stdout
    (measured,) = watchdog.read_times(tmp_path / "build", "stall.ipynb").values()
    assert 0.2 <= measured < 30
    # Measured at 0.2 s, the cell may run 120 s; nbval's own cap of 1 s is lower and wins.
    (tmp_path / "stall.ipynb").write_text(
        nbformat.writes(new_notebook(cells=[new_code_cell("import time\ntime.sleep(30)")]))
    )
    nb = nbformat.read(str(tmp_path / "stall.ipynb"), as_version=4)
    record = {"stall.ipynb": {nb.cells[0].id: 0.2}}
    (tmp_path / "build" / watchdog.TIMES_NAME).write_text(json.dumps(record))
    done, seconds = _nbval(tmp_path, "--nbval-cell-timeout", "1")
    assert done.returncode == 1 and seconds < 60, done.stdout
    assert "(limit 1 s: --nbval-cell-timeout)" in done.stdout, done.stdout
