"""kit.runner's kernel starts: one that fails is started once more, each start keeps a log of its
own (the newest 10 per notebook), a run whose kernel never starts ends in one line without a
traceback at exit, and a HOME that cannot be written sends the caches under the build folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from helpers.common.paths import REPO_ROOT
from kit import runner


def _failing_launcher(folder: Path, fails: int) -> Path:
    """A folder whose ipykernel_launcher exits with status 1 (after one line on stderr) at its
    first `fails` starts, then starts the real kernel; it counts its starts in starts.txt."""
    folder.mkdir()
    count = folder / "starts.txt"
    (folder / "ipykernel_launcher.py").write_text(
        "import sys\n"
        "from pathlib import Path\n"
        f"count = Path({str(count)!r})\n"
        "n = int(count.read_text()) + 1 if count.exists() else 1\n"
        "count.write_text(str(n))\n"
        f"if n <= {fails}:\n"
        "    print(f'cannot start: start {n}', file=sys.stderr)\n"
        "    sys.exit(1)\n"
        "from ipykernel import kernelapp\n"
        "kernelapp.launch_new_instance()\n"
    )
    return folder


def _run(tmp_path: Path, launcher: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    """`python -m kit.runner` on a one-cell notebook in tmp_path (build: tmp_path/build)."""
    nb = tmp_path / "one.ipynb"
    cell = "import os\nfor name in ('VLLM_CACHE_ROOT', 'MPLCONFIGDIR'):\n    print(name, os.environ.get(name))\nimport matplotlib.pyplot"
    nbformat.write(new_notebook(cells=[new_code_cell(cell)]), str(nb))
    path = [str(launcher)] if launcher else []
    return subprocess.run(
        [sys.executable, "-m", "kit.runner", str(nb), "--build-dir", str(tmp_path / "build")],
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([*path, str(REPO_ROOT / "src")]),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=300,
    )


def _record(tmp_path: Path) -> dict:
    """The run summary's record of one.ipynb."""
    summary = json.loads((tmp_path / "build" / "run-summary.json").read_text())
    return summary["notebooks"][0]


def test_a_kernel_that_fails_to_start_is_started_once_more(tmp_path: Path) -> None:
    launcher = _failing_launcher(tmp_path / "launcher", fails=1)
    done = _run(tmp_path, launcher)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the kernel did not start (exited with status 1); its log: " in done.stdout
    record = _record(tmp_path)
    assert record["status"] == "ok" and len(record["restarts"]) == 1
    first = Path(record["restarts"][0].split("(log ")[1].rstrip(")"))
    assert "cannot start: start 1" in first.read_text(), "the failed start's log was not kept"
    assert Path(record["kernel_log"]) != first and Path(record["kernel_log"]).is_file()
    assert (launcher / "starts.txt").read_text() == "2"


def test_a_kernel_that_never_starts_fails_in_one_line(tmp_path: Path) -> None:
    launcher = _failing_launcher(tmp_path / "launcher", fails=99)
    done = _run(tmp_path, launcher)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr, done.stderr  # nbclient's exit hook asserted here
    record = _record(tmp_path)
    assert record["error"].startswith("kernel exited with status 1 in kernel start; peak RSS ")
    log = Path(record["error"].split("its log: ")[1])
    assert "cannot start: start 2" in log.read_text()
    assert (launcher / "starts.txt").read_text() == "2", "started more than twice"


def test_each_kernel_start_keeps_its_own_log(tmp_path: Path) -> None:
    nb = tmp_path / "logs.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("import os\nos.write(2, b'noise')")]), nb)
    build = tmp_path / "build"
    logs = [runner._run_notebook(nb, build_dir=build).kernel_log for _ in range(2)]
    assert logs[0] != logs[1]
    assert all("noise" in Path(log).read_text() for log in logs)


def test_only_the_newest_logs_are_kept(tmp_path: Path) -> None:
    nb = tmp_path / "a.ipynb"
    mine = [runner._kernel_log_path(tmp_path, nb) for _ in range(13)]
    other = tmp_path / "kernel-a-b-20261206-101010-1-abcd.log"  # notebook "a-b", not "a"
    for age, log in enumerate([*mine, other]):
        log.write_text("x")
        os.utime(log, (time.time() - 1000 + age, time.time() - 1000 + age))
    runner._prune_logs(tmp_path, nb)
    assert sorted(tmp_path.glob("kernel-*.log")) == sorted([*mine[-runner._KEEP_LOGS :], other])


def test_a_home_that_cannot_be_written_moves_the_caches_under_build(tmp_path: Path) -> None:
    done = _run(tmp_path, HOME="/dev/null/nohome")  # not a folder: unwritable, even for root
    assert done.returncode == 0, done.stdout + done.stderr
    nb = nbformat.read(str(tmp_path / "build" / "one.ipynb"), as_version=4)
    text = "".join(o.get("text", "") for o in nb.cells[0].outputs)
    cache = tmp_path / "build" / "cache"
    assert f"VLLM_CACHE_ROOT {cache / 'vllm'}" in text
    assert f"MPLCONFIGDIR {cache / 'matplotlib'}" in text
    assert "mkdir -p failed" not in text and "temporary cache directory" not in text, text
