"""helpers.runner on two tiny notebooks (one prints, one raises): outputs, statuses, summary, peak RSS."""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from helpers.tools import runner


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
    )
    build = root / "build"
    notebooks = [str(p) for p in runner.find_notebooks(notebooks_dir=nb_dir)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = runner.main([*notebooks, "--build-dir", str(build), "--timeout", "120"])
    return build, code, out.getvalue()


def test_find_notebooks_sorts_by_name(tmp_path: Path) -> None:
    for name in ("02_b.ipynb", "01_a.ipynb", "10_c.ipynb"):
        _write(tmp_path / name, "pass")
    (tmp_path / "notes.txt").write_text("not a notebook")
    assert [p.name for p in runner.find_notebooks(notebooks_dir=tmp_path)] == [
        "01_a.ipynb",
        "02_b.ipynb",
        "10_c.ipynb",
    ]
    assert runner.find_notebooks(["10_c.ipynb"], notebooks_dir=tmp_path) == [
        (tmp_path / "10_c.ipynb").resolve()
    ]
    with pytest.raises(FileNotFoundError, match="nope.ipynb"):
        runner.find_notebooks(["nope.ipynb"], notebooks_dir=tmp_path)


def test_exit_code_and_progress(run_dir: tuple[Path, int, str]) -> None:
    _, code, stdout = run_dir
    assert code == 1
    assert "[run] 1/2 a_prints.ipynb" in stdout and "[run] 2/2 b_raises.ipynb" in stdout
    assert "ValueError: boom: the drafter is missing" in stdout


def test_kernel_stderr_goes_to_a_log_not_the_terminal(run_dir: tuple[Path, int, str]) -> None:
    build, _, stdout = run_dir
    log = build / "logs" / "kernel-a_prints.log"
    assert "kernel stderr noise" in log.read_text() and "kernel stderr noise" not in stdout


def test_outputs_written_even_on_failure(run_dir: tuple[Path, int, str]) -> None:
    build, _, _ = run_dir
    for stem in ("a_prints", "b_raises"):
        assert (build / f"{stem}.ipynb").is_file()
        html = (build / f"{stem}.html").read_text()
        assert html.lstrip().lower().startswith("<!doctype html")
    ok_nb = nbformat.read(str(build / "a_prints.ipynb"), as_version=4)
    text = "".join(
        o.get("text", "") for c in ok_nb.cells if c.cell_type == "code" for o in c.outputs
    )
    assert "hello from" in text and str(Path("notebooks")) in text and "1000000" in text
    bad_nb = nbformat.read(str(build / "b_raises.ipynb"), as_version=4)
    errors = [
        o
        for c in bad_nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "error"
    ]
    assert errors and errors[0].ename == "ValueError"
    assert bad_nb.cells[-1].outputs == [], "cells after the failure must not run"
    assert "boom: the drafter is missing" in (build / "b_raises.html").read_text()


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


def test_describe_error_keeps_two_lines() -> None:
    err = RuntimeError("first\n\nsecond\nthird")
    assert runner.describe_error(err) == "RuntimeError: first\nsecond"


def test_cell_timeout_is_remaining_budget() -> None:
    func = runner.cell_timeout_func(time.monotonic() + 100, None)
    assert 98 <= func(None) <= 100
    assert runner.cell_timeout_func(time.monotonic() + 100, 7)(None) == 7
    assert runner.cell_timeout_func(time.monotonic() - 5, None)(None) == 1, (
        "never 0 (0 means no timeout)"
    )


def test_tree_rss_counts_this_process() -> None:
    assert runner.tree_rss_bytes(os.getpid()) > 10 * 1024**2
    assert runner.tree_rss_bytes(2**22 + 12345) == 0
