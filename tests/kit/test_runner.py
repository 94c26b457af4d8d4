"""helpers.runner on two tiny notebooks (one prints, one raises): outputs, statuses, summary, peak RSS."""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import psutil
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from kit import runner


def _write(path: Path, *sources: str) -> Path:
    """A notebook of code cells (plus a markdown title) written with nbformat."""
    cells = [new_markdown_cell(f"# {path.stem}")] + [new_code_cell(src) for src in sources]
    nbformat.write(new_notebook(cells=cells), str(path))
    return path


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, str]:
    """Run the runner's CLI once on 'a_prints' and 'b_raises'; (build dir, exit code, stdout)."""
    root = tmp_path_factory.mktemp("runner")
    nb_dir = root / "notebooks"
    nb_dir.mkdir()
    _write(
        nb_dir / "b_raises.ipynb",
        "print('before')",
        "raise ValueError('boom: the drafter is missing')",
        "print('never')",
    )
    _write(
        nb_dir / "a_prints.ipynb",
        "import os\nprint('hello from', os.getcwd())",
        "x = list(range(10**6))\nprint(len(x))",
        "os.write(2, b'kernel stderr noise\\n')",  # as vLLM's C++ warnings write it
        # A process in its own session that nothing stops: what a killed kernel leaves behind.
        "import subprocess\n"
        "left = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
        f"open({str(root / 'left.pid')!r}, 'w').write(str(left.pid))",
    )
    build = root / "build"
    notebooks = [str(p) for p in runner._find_notebooks(notebooks_dir=nb_dir)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = runner.main([*notebooks, "--build-dir", str(build), "--timeout", "120"])
    return build, code, out.getvalue()


def test_find_notebooks_sorts_by_name(tmp_path: Path) -> None:
    for name in ("02_b.ipynb", "01_a.ipynb", "10_c.ipynb"):
        _write(tmp_path / name, "pass")
    (tmp_path / "notes.txt").write_text("not a notebook")
    assert [p.name for p in runner._find_notebooks(notebooks_dir=tmp_path)] == [
        "01_a.ipynb",
        "02_b.ipynb",
        "10_c.ipynb",
    ]
    assert runner._find_notebooks(["10_c.ipynb"], notebooks_dir=tmp_path) == [
        (tmp_path / "10_c.ipynb").resolve()
    ]
    with pytest.raises(FileNotFoundError, match="nope.ipynb"):
        runner._find_notebooks(["nope.ipynb"], notebooks_dir=tmp_path)


def test_exit_code_and_progress(run_dir: tuple[Path, int, str]) -> None:
    _, code, stdout = run_dir
    assert code == 1
    assert "[run] 1/2 a_prints.ipynb" in stdout and "[run] 2/2 b_raises.ipynb" in stdout
    assert "ValueError: boom: the drafter is missing" in stdout


def test_kernel_stderr_goes_to_a_log_not_the_terminal(run_dir: tuple[Path, int, str]) -> None:
    build, _, stdout = run_dir
    rows = json.loads((build / "run-summary.json").read_text())["notebooks"]
    log = Path(next(row["kernel_log"] for row in rows if row["notebook"] == "a_prints.ipynb"))
    assert log.parent == build / "logs" and log.name.startswith("kernel-a_prints-")
    assert "kernel stderr noise" in log.read_text() and "kernel stderr noise" not in stdout


def test_outputs_written_even_on_failure(run_dir: tuple[Path, int, str]) -> None:
    build, _, _ = run_dir
    for stem in ("a_prints", "b_raises.failed"):
        assert (build / f"{stem}.ipynb").is_file()
        html = (build / f"{stem}.html").read_text()
        assert html.lstrip().lower().startswith("<!doctype html")
    assert not (build / "b_raises.ipynb").exists(), "a failed run is no good copy"
    assert not list(build.glob(".*.partial")), "every output moved into place"
    ok_nb = nbformat.read(str(build / "a_prints.ipynb"), as_version=4)
    text = "".join(
        o.get("text", "") for c in ok_nb.cells if c.cell_type == "code" for o in c.outputs
    )
    assert "hello from" in text and str(Path("notebooks")) in text and "1000000" in text
    bad_nb = nbformat.read(str(build / "b_raises.failed.ipynb"), as_version=4)
    errors = [
        o
        for c in bad_nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "error"
    ]
    assert errors and errors[0].ename == "ValueError"
    assert bad_nb.cells[-1].outputs == [], "cells after the failure must not run"
    assert "boom: the drafter is missing" in (build / "b_raises.failed.html").read_text()


def test_summary_json(run_dir: tuple[Path, int, str]) -> None:
    build, _, _ = run_dir
    summary = json.loads((build / "run-summary.json").read_text())
    assert summary["ok"] is False
    rows = {row["notebook"]: row for row in summary["notebooks"]}
    assert list(rows) == ["a_prints.ipynb", "b_raises.ipynb"]
    assert rows["a_prints.ipynb"]["status"] == "ok" and rows["a_prints.ipynb"]["error"] is None
    assert rows["b_raises.ipynb"]["status"] == "FAILED"
    assert rows["b_raises.ipynb"]["error"] == "cell 3: ValueError: boom: the drafter is missing"
    for row in rows.values():
        assert row["seconds"] > 0
        assert row["peak_rss_gib"] > 0, "the kernel's RSS was never sampled"
        assert row["html"].endswith(".html") and row["executed"].endswith(".ipynb")


def test_summary_table(run_dir: tuple[Path, int, str]) -> None:
    _, _, stdout = run_dir
    table = [
        line
        for line in stdout.splitlines()
        if line.startswith(("notebook", "a_prints", "b_raises"))
    ]
    assert len(table) == 3 and "peak RSS GiB" in table[0]
    assert " ok " in table[1] and "FAILED" in table[2]


def test_what_the_kernel_left_running_is_stopped(run_dir: tuple[Path, int, str]) -> None:
    build, _, stdout = run_dir
    pid = int((build.parent / "left.pid").read_text())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert f"stopped what the kernel left running: sleep (pid {pid})" in stdout
    rows = {
        r["notebook"]: r for r in json.loads((build / "run-summary.json").read_text())["notebooks"]
    }
    assert rows["a_prints.ipynb"]["leftovers"] == [f"sleep (pid {pid})"]


def result(name: str, ok: bool, seconds: float = 1.0) -> runner._NotebookResult:
    """A NotebookResult without running anything."""
    return runner._NotebookResult(name, ok, seconds, 0.1, f"{name}.ipynb", f"{name}.html")


def test_the_summary_merges_records(tmp_path: Path) -> None:
    runner._write_summary([result("01_a.ipynb", True), result("02_b.ipynb", False)], tmp_path)
    runner._write_summary([result("02_b.ipynb", True, seconds=7.0)], tmp_path)
    summary = json.loads((tmp_path / "run-summary.json").read_text())
    assert [r["notebook"] for r in summary["notebooks"]] == ["01_a.ipynb", "02_b.ipynb"]
    assert summary["notebooks"][1]["seconds"] == 7.0 and summary["ok"] is True
    runner._write_summary([result("00_z.ipynb", False)], tmp_path)
    summary = json.loads((tmp_path / "run-summary.json").read_text())
    assert [r["notebook"] for r in summary["notebooks"]][0] == "00_z.ipynb"
    assert summary["ok"] is False and len(summary["notebooks"]) == 3
    (tmp_path / "run-summary.json").write_text("{cut sho")
    runner._write_summary([result("03_c.ipynb", True)], tmp_path)  # damaged: kept aside, anew
    assert (tmp_path / "run-summary.json.corrupt").read_text() == "{cut sho"
    assert json.loads((tmp_path / "run-summary.json").read_text())["notebooks"][0]["notebook"] == (
        "03_c.ipynb"
    )


def test_the_last_good_copy_stays_until_a_run_passes(tmp_path: Path) -> None:
    nb, build = tmp_path / "x.ipynb", tmp_path / "build"
    _write(nb, "print('the good run')")
    assert runner._run_notebook(nb, build_dir=build, timeout=120).ok
    _write(nb, "raise RuntimeError('a bad run')")
    bad = runner._run_notebook(nb, build_dir=build, timeout=120)
    assert not bad.ok and bad.executed == str(build / "x.failed.ipynb")
    assert "the good run" in (build / "x.html").read_text()
    assert "a bad run" in (build / "x.failed.html").read_text()
    assert "a bad run" not in (build / "x.ipynb").read_text()
    _write(nb, "print('the next good run')")
    assert runner._run_notebook(nb, build_dir=build, timeout=120).ok
    assert "the next good run" in (build / "x.html").read_text()
    assert not (build / "x.failed.html").exists() and not (build / "x.failed.ipynb").exists()


def test_describe_error_keeps_two_lines() -> None:
    err = RuntimeError("first\n\nsecond\nthird")
    assert runner._describe_error(err) == "RuntimeError: first\nsecond"


def test_cell_timeout_is_remaining_budget() -> None:
    func = runner._cell_timeout_func(time.monotonic() + 100, None)
    assert 98 <= func(None) <= 100
    assert runner._cell_timeout_func(time.monotonic() + 100, 7)(None) == 7
    assert runner._cell_timeout_func(time.monotonic() - 5, None)(None) == 1, (
        "never 0 (0 means no timeout)"
    )


def test_tree_rss_counts_this_process() -> None:
    assert runner._tree_rss_bytes(os.getpid()) > 10 * 1024**2
    assert runner._tree_rss_bytes(2**22 + 12345) == 0


def test_the_orphan_sweep_runs_the_sweeps_the_chapters_declare(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A chapter that starts servers declares its sweep in chapter.json; one without declares none,
    and the runner names no chapter."""
    declared = [SimpleNamespace(sweeps=("chapters.ch98_planted.tidy",)), SimpleNamespace(sweeps=())]
    sweeps = {"chapters.ch98_planted.tidy": lambda: ["stopped server 1 (its owner died)"]}
    monkeypatch.setattr(runner.chapters, "discover", lambda: declared)
    monkeypatch.setattr(runner.chapters, "load", sweeps.__getitem__)
    assert runner._sweep_orphans() == ["stopped server 1 (its owner died)"]
    monkeypatch.setattr(runner.chapters, "discover", lambda: declared[1:])
    assert runner._sweep_orphans() == []
