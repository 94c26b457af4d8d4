"""helpers.runner on a kernel that dies by itself (SIGKILL, as the OOM killer sends it): the signal,
the cell and the peak RSS named, the last good copy kept, no kernel left running."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
from pathlib import Path

import nbformat
import psutil
import pytest
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from kit import runner


def _notebook(path: Path, *sources: str) -> Path:
    """A notebook of a markdown title (cell 1) and code cells (cells 2, 3, ...)."""
    cells = [new_markdown_cell(f"# {path.stem}"), *(new_code_cell(src) for src in sources)]
    nbformat.write(new_notebook(cells=cells), str(path))
    return path


def _main(*args: str) -> tuple[int, str]:
    """runner.main(args): (exit code, stdout)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = runner.main(list(args))
    return code, out.getvalue()


def test_a_kernel_killed_by_sigkill_is_named(tmp_path: Path) -> None:
    nb, build, pid_file = tmp_path / "x.ipynb", tmp_path / "build", tmp_path / "kernel.pid"
    _notebook(nb, "print('the good run')")
    assert _main(str(nb), "--build-dir", str(build), "--timeout", "120")[0] == 0
    _notebook(
        nb,
        f"import os, signal\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))",
        "blob = bytearray(64 * 1024**2)\nos.kill(os.getpid(), signal.SIGKILL)",
        "print('never')",
    )
    code, stdout = _main(str(nb), "--build-dir", str(build), "--timeout", "120")
    assert code == 1
    match = re.search(
        r"kernel killed by SIGKILL \(out of memory\?\) in cell 3; peak RSS (\d+\.\d+) GiB", stdout
    )
    assert match, stdout
    assert float(match.group(1)) > 0, "the kernel's memory was never sampled"
    kernel = int(pid_file.read_text())
    assert not psutil.pid_exists(kernel) or psutil.Process(kernel).status() == (
        psutil.STATUS_ZOMBIE
    ), "the kernel is still running"
    assert "the good run" in (build / "x.ipynb").read_text(), "the last good copy was replaced"
    failed = nbformat.read(str(build / "x.failed.ipynb"), as_version=4)
    assert [o.get("ename") for o in failed.cells[2].outputs] == ["DeadKernelError"]
    assert "killed by SIGKILL" in (build / "x.failed.html").read_text()
    assert failed.cells[3].outputs == [], "no cell runs after the kernel died"
    row = json.loads((build / "run-summary.json").read_text())["notebooks"][0]
    assert row["status"] == "FAILED" and row["error"].startswith("kernel killed by SIGKILL")


def _ended(command: str) -> subprocess.Popen[bytes]:
    """A finished `sh -c command` process."""
    process = subprocess.Popen(["sh", "-c", command])
    process.wait()
    return process


@pytest.mark.parametrize(
    ("err", "command", "expected"),
    [
        (DeadKernelError("Kernel died"), "kill -KILL $$", "killed by SIGKILL (out of memory?)"),
        (DeadKernelError("Kernel died"), "kill -SEGV $$", "killed by SIGSEGV"),
        (DeadKernelError("Kernel died"), "exit 3", "exited with status 3"),
        (
            RuntimeError("Kernel died before replying to kernel_info"),
            "exit 1",
            "exited with status 1",
        ),
        (CellTimeoutError("Cell execution timed out"), "kill -KILL $$", None),  # killed by us
        (ValueError("boom"), "exit 1", None),
    ],
)
def test_kernel_death_names_how_it_ended(
    err: BaseException, command: str, expected: str | None
) -> None:
    assert runner._kernel_death(err, _ended(command)) == expected


def test_kernel_death_without_a_process_still_says_died() -> None:
    assert runner._kernel_death(DeadKernelError("Kernel died"), None) == "died"
