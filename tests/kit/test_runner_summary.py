"""helpers.runner's shared state: run-summary.json under writers at once, a damaged summary, and a
build dir that cannot be written (read-only, full)."""

from __future__ import annotations

import builtins
import errno
import io
import json
import multiprocessing
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from kit import runner

WRITERS, RECORDS = 3, 100


def _result(name: str) -> runner._NotebookResult:
    """A passing NotebookResult without running anything."""
    return runner._NotebookResult(name, True, 1.0, 0.1, f"{name}.ipynb", f"{name}.html")


def _write_many(build: str, writer: int, start: Any) -> None:
    """One writer process: RECORDS summary writes of a record each, once `start` is set."""
    start.wait()
    for i in range(RECORDS):
        runner._write_summary([_result(f"w{writer}-{i:03d}.ipynb")], Path(build))


def test_writers_at_once_keep_every_record(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    start = ctx.Event()
    procs = [
        ctx.Process(target=_write_many, args=(str(tmp_path), w, start)) for w in range(WRITERS)
    ]
    for proc in procs:
        proc.start()
    start.set()
    for proc in procs:
        proc.join(120)
    assert [proc.exitcode for proc in procs] == [0] * WRITERS, "a writer crashed"
    names = [
        r["notebook"] for r in json.loads((tmp_path / "run-summary.json").read_text())["notebooks"]
    ]
    expected = sorted(f"w{w}-{i:03d}.ipynb" for w in range(WRITERS) for i in range(RECORDS))
    assert names == expected, f"kept {len(names)} of {len(expected)} records"
    assert not list(tmp_path.glob(".*.partial")) and not list(tmp_path.glob("*.corrupt*"))


def test_each_writer_stages_under_a_name_of_its_own(tmp_path: Path) -> None:
    target = tmp_path / "x.ipynb"
    first, second = runner._partial_path(target), runner._partial_path(target)
    assert first != second and first.parent == tmp_path
    assert str(os.getpid()) in first.name and first.name.endswith(".partial")


def test_a_damaged_summary_is_kept_aside_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = tmp_path / "run-summary.json"
    runner._write_summary([_result("01_a.ipynb")], tmp_path)
    damaged = summary.read_text()[:40]  # cut short, as a full disk leaves it
    summary.write_text(damaged)
    runner._write_summary([_result("02_b.ipynb")], tmp_path)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and str(summary) in lines[0] and "damaged" in lines[0]
    assert str(tmp_path / "run-summary.json.corrupt") in lines[0]
    assert (tmp_path / "run-summary.json.corrupt").read_text() == damaged
    assert [r["notebook"] for r in json.loads(summary.read_text())["notebooks"]] == ["02_b.ipynb"]
    summary.write_text("[]")  # valid JSON, but no summary: kept aside too, beside the first
    runner._write_summary([_result("03_c.ipynb")], tmp_path)
    assert "run-summary.json.corrupt.1" in capsys.readouterr().err
    assert (tmp_path / "run-summary.json.corrupt.1").read_text() == "[]"
    assert (tmp_path / "run-summary.json.corrupt").read_text() == damaged


def _under(path: Any, root: Path) -> bool:
    """Whether `path` (str, Path or fd) names something inside `root`."""
    if not isinstance(path, (str, os.PathLike)):
        return False
    return Path(os.path.abspath(path)).is_relative_to(root)


def _failing(
    real: Callable[..., Any], root: Path, code: int, arg: int = 0, writes_only: bool = False
) -> Callable[..., Any]:
    """`real`, but raising OSError(code) when its argument `arg` lies under `root`."""

    def call(*args: Any, **kwargs: Any) -> Any:
        mode = args[1] if len(args) > 1 else kwargs.get("mode", "r")
        writing = not writes_only or any(flag in str(mode) for flag in "wax+")
        if len(args) > arg and _under(args[arg], root) and writing:
            raise OSError(code, os.strerror(code), str(args[arg]))
        return real(*args, **kwargs)

    return call


@pytest.fixture
def read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty build dir nothing can be written in: chmod 555, or (as root, whom chmod does not
    stop) open/mkdir/replace failing with EACCES there."""
    build = (tmp_path / "build").resolve()
    build.mkdir()
    if os.geteuid() != 0:
        build.chmod(0o555)
        yield build
        build.chmod(0o755)
        return
    for module, name in ((builtins, "open"), (io, "open")):
        monkeypatch.setattr(
            module, name, _failing(getattr(module, name), build, errno.EACCES, writes_only=True)
        )
    monkeypatch.setattr(os, "mkdir", _failing(os.mkdir, build, errno.EACCES))
    monkeypatch.setattr(os, "replace", _failing(os.replace, build, errno.EACCES, arg=1))
    yield build


def _notebook(path: Path, *sources: str) -> Path:
    """A notebook of a markdown title and code cells."""
    cells = [new_markdown_cell(f"# {path.stem}"), *(new_code_cell(src) for src in sources)]
    nbformat.write(new_notebook(cells=cells), str(path))
    return path


def test_a_read_only_build_dir_is_one_line(
    tmp_path: Path, read_only: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nb = _notebook(tmp_path / "x.ipynb", "print('hello')")
    code = runner.main([str(nb), "--build-dir", str(read_only), "--timeout", "60"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.strip() == f"[run] cannot write {read_only / 'logs'} (Permission denied)"
    assert list(read_only.iterdir()) == []


def test_a_full_disk_keeps_the_notebooks_own_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    build = (tmp_path / "build").resolve()
    nb = _notebook(tmp_path / "x.ipynb", "raise ValueError('boom: the drafter is missing')")
    monkeypatch.setattr(os, "replace", _failing(os.replace, build, errno.ENOSPC, arg=1))
    code = runner.main([str(nb), "--build-dir", str(build), "--timeout", "120"])
    out, err = capsys.readouterr()
    assert code == 1
    assert "cell 2: ValueError: boom: the drafter is missing" in out, "the notebook's own error"
    lines = [line for line in err.splitlines() if line.startswith("[run]") or "Traceback" in line]
    assert lines == [f"[run] cannot write {build / 'x.failed.ipynb'} (No space left on device)"]
    left = sorted(p.name for p in build.iterdir() if p.is_file())
    assert left == [], f"partial or half-written files left: {left}"
