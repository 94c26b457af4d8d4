"""kit.nbval_queue: make test's two lanes share the notebooks, queued longest first, each run once
by the lane that claims it first, from either end; a failure stops its lane, and --verify catches
what never ran."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat

from helpers.common.paths import REPO_ROOT
from kit import agenda
from kit import nbval_queue as q

NOTEBOOKS = [f"notebooks/0{i}_x.ipynb" for i in range(1, 9)]


def test_two_lanes_at_once_run_every_notebook_once_from_either_end(tmp_path: Path) -> None:
    runs: list[tuple[str, str]] = []

    def lane(name: str, seconds: float):
        def run(notebook: str) -> int:
            runs.append((name, notebook))
            time.sleep(seconds)
            return 0

        return run

    first = threading.Thread(
        target=q._run_queue, args=(tmp_path, NOTEBOOKS, False, lane("a", 0.02))
    )
    first.start()
    time.sleep(0.05)  # the tests lane comes later, and is quicker
    _, ran = q._run_queue(tmp_path, NOTEBOOKS, True, lane("b", 0.001))
    first.join()
    assert sorted(n for _, n in runs) == NOTEBOOKS  # each once
    a = [n for lane_name, n in runs if lane_name == "a"]
    assert a == NOTEBOOKS[: len(a)] and ran == NOTEBOOKS[len(a) :][::-1] and ran, runs
    assert q._verify(tmp_path, NOTEBOOKS) == []


def test_a_failure_stops_its_lane_and_verify_names_it_and_what_never_ran(tmp_path: Path) -> None:
    def run(notebook: str) -> int:
        return 1 if notebook == NOTEBOOKS[2] else 0

    status, ran = q._run_queue(tmp_path, NOTEBOOKS, run=run)
    assert status == 1 and ran == NOTEBOOKS[:3]
    problems = q._verify(tmp_path, NOTEBOOKS)
    assert problems[0] == f"{NOTEBOOKS[2]}: failed (pytest status 1)"
    assert [p.split(":")[0] for p in problems[1:]] == NOTEBOOKS[3:]
    assert all("never ran" in p for p in problems[1:])


def test_a_lane_stops_at_the_first_notebook_the_other_lane_claimed(tmp_path: Path) -> None:
    (tmp_path / Path(NOTEBOOKS[5]).name).mkdir()  # the other lane holds 06
    _, ran = q._run_queue(tmp_path, NOTEBOOKS, from_end=True, run=lambda n: 0)
    assert ran == NOTEBOOKS[6:][::-1]


def test_the_queue_puts_the_longest_first_and_an_unmeasured_one_before_all() -> None:
    seconds = {"01_x.ipynb": 9.0, "02_x.ipynb": 36.0, "03_x.ipynb": 119.0}
    queue = q._queue(
        ["notebooks/01_x.ipynb", "notebooks/02_x.ipynb", "n/03_x.ipynb", "new.ipynb"], seconds
    )
    assert queue == ["new.ipynb", "n/03_x.ipynb", "notebooks/02_x.ipynb", "notebooks/01_x.ipynb"]
    shipped = agenda.run_seconds()
    on_disk = sorted(p.name for p in (REPO_ROOT / "notebooks").glob("*.ipynb"))
    # keyed by the notebooks' file names (a fork's record may list notebooks it dropped)
    assert set(shipped) & set(on_disk) and all(s > 0 for s in shipped.values()), shipped


def test_the_command_runs_nbval_as_the_makefile_does(tmp_path: Path) -> None:
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    flags = re.search(r"^NBVAL := -m pytest (.*)$", makefile, re.M)
    assert flags and " ".join(q._NBVAL).startswith(flags[1]), (flags, q._NBVAL)
    notebook = tmp_path / "01_one_cell.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), notebook)
    claims = tmp_path / "claims"
    done = subprocess.run(
        [sys.executable, "-m", "kit.nbval_queue", "--claims", str(claims), str(notebook)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
        # the cell's time goes to a scratch record, not build/cell-times.json
        env={**os.environ, "PYTEST_ADDOPTS": f"--watchdog-build {tmp_path / 'build'}"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout and "nbval_queue: this lane ran 01_one_cell" in done.stdout
    assert (claims / notebook.name / "status").read_text(encoding="utf-8") == "0\n"
    assert (tmp_path / "build" / "cell-times.json").is_file()
