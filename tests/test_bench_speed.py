"""scripts/bench_speed.py: its table puts every measured figure next to its target, and says which it missed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from helpers.common.paths import REPO_ROOT
from tests.support import load_script

SCRIPT = REPO_ROOT / "scripts" / "bench_speed.py"


bs = load_script("bench_speed")


def result(first_plot: float | None = 250.0) -> dict:
    return {
        "workbook": "2026-12-01 10:00 UTC (a subject)",
        "date": "2026-12-01",
        "machine": "2 cores",
        "make_run": {"seconds": 700.0, "rc": 0, "watched_seconds": first_plot},
        "notebooks": [
            {"notebook": "01_intro.ipynb", "seconds": 6.0},
            {"notebook": "05_train.ipynb", "seconds": 230.0},
            {"notebook": "03_sweep.ipynb", "seconds": 200.0},
        ],
        "notebooks_seconds": 436.0,
        "engine_starts": [{"k": 0, "start_s": 11.5}, {"k": 3, "start_s": 13.0}],
        "make_test": {"seconds": 1100.0, "rc": 0},
    }


def test_every_target_has_a_row_and_05_has_its_own_budget() -> None:
    rows = {what: (target, got) for what, target, got in bs.table_rows(result())}
    assert rows["notebook 05_train"] == (240, 230.0)
    assert rows["notebook 03_sweep"] == (180, 200.0)
    assert rows["engine start (k=3)"] == (12, 13.0)
    assert rows["make test"] == (bs.TARGETS["make test"], 1100.0)


def test_the_table_names_what_it_missed_and_what_it_did_not_measure() -> None:
    text = bs.markdown(result(first_plot=None))
    assert "| notebook 03_sweep | ≤ 180 s | 200 s | **missed** |" in text
    assert "| notebook 05_train | ≤ 240 s | 230 s | met |" in text
    assert "| engine start (k=3) | ≤ 12 s | 13 s | **missed** |" in text
    assert "install included) | ≤ 300 s | — | not measured |" in text
    assert "the workbook as of 2026-12-01 10:00 UTC (a subject)." in text.splitlines()[0]


def test_a_make_run_that_stops_before_any_notebook_ends_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fake_run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess:
        if cmd[:2] == ["git", "clone"]:
            Path(cmd[-1]).mkdir(parents=True)
        return subprocess.CompletedProcess(cmd, 0, stdout="2026-12-01 10:00 UTC (a subject)\n")

    monkeypatch.setattr(bs.subprocess, "run", fake_run)
    monkeypatch.setattr(
        bs, "run_step", lambda *a, **kw: {"step": "make-run", "seconds": 1.0, "rc": 2}
    )
    assert bs.main(["--workdir", str(tmp_path / "clone")]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "wrote no" in out[0] and "run-summary.json" in out[0]
