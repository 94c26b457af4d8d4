"""scripts/soak_notebook.py: runs a notebook again and again, some at once, and counts hangs, failed
kernel starts and other failures from each run's summary record."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from helpers.common.paths import REPO_ROOT
from tests.support import load_script

soak = load_script("soak_notebook")


@pytest.mark.parametrize(
    ("code", "record", "expected"),
    [
        (0, {"status": "ok", "error": None, "restarts": []}, ("ok", 0)),
        (0, {"status": "ok", "error": None, "restarts": ["kernel exited ..."]}, ("ok", 1)),
        (1, {"status": "FAILED", "error": "x.ipynb cell 23: silent for 130 s (…)"}, ("hang", 0)),
        (1, {"status": "FAILED", "error": "notebook timeout after 90 s; …"}, ("hang", 0)),
        (
            1,
            {"status": "FAILED", "error": "kernel exited with status 1 in kernel start; …"},
            ("failed start", 1),
        ),
        (1, {"status": "FAILED", "error": "cell 4: ValueError: boom"}, ("failed", 0)),
        (1, None, ("failed", 0)),
    ],
)
def test_each_run_is_classified(code: int, record: dict | None, expected: tuple) -> None:
    assert soak._classify(code, record)[:2] == expected


def test_two_lanes_count_every_run(tmp_path: Path) -> None:
    nb = tmp_path / "quick.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("print('hi')")]), str(nb))
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "soak_notebook.py"), str(nb)]
        + ["--runs", "3", "--lanes", "2", "--out", str(tmp_path / "soak")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert sum(line.startswith("run ") for line in done.stdout.splitlines()) == 3
    assert "quick.ipynb, 2 at once: 3 runs: 3 ok, 0 hangs, 0 failed kernel starts" in done.stdout


def test_a_run_over_four_times_the_median_is_slow() -> None:
    runs = [soak._Run(1, n, seconds, "ok", 0, "") for n, seconds in enumerate([10, 11, 12, 125])]
    assert [r.number for r in soak._slow(runs)] == [3]
    assert "slow (over 4 × the median): run 3 125 s;" in soak._report(runs)
