"""Run one notebook headless many times, some at once, and count hangs and failed kernel starts.

usage: python scripts/soak_notebook.py [--runs N] [--lanes L] [--timeout S] [--out DIR] [NOTEBOOK]

Each lane runs `python -m kit.runner NOTEBOOK` again and again, with a build folder of its own
under DIR (default build/soak), until the lanes together have run N times (default: 20 runs, 1
lane; the first notebook in notebooks/). Every run's record in its lane's run-summary.json is read back: a hang is a
run the watchdog stopped ("silent for") or that ran out of time; a failed start, a kernel start
the runner had to try again (`restarts`) or that never started; a slow run, one that took over 4 × the median (a wait
that ended by itself, as a lost reply did before the watchdog). The kernel logs of every run that
was not clean are copied to DIR/kept. Prints one line per run as it ends, then the counts and the
seconds (min / median / max). Exit status 0 when there was no hang, no slow run, no failed start
and no other failure. Issue #58's proof: `--runs 100`, then `--runs 100 --lanes 3`.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from helpers.common.paths import BUILD_DIR, NOTEBOOKS_DIR, REPO_ROOT

#: A run over this many times the median is slow.
_SLOW = 4.0


@dataclass(frozen=True)
class _Run:
    """How one runner run went."""

    lane: int
    number: int
    seconds: float
    status: str  # "ok", "hang", "failed start", "failed"
    failed_starts: int  # kernel starts that did not come up (retried or not)
    error: str


def _classify(code: int, record: dict | None) -> tuple[str, int, str]:
    """(status, failed kernel starts, error) of a run from its exit code and summary record."""
    if record is None:
        return "failed", 0, f"exit {code}, no summary record"
    error = record.get("error") or ""
    starts = len(record.get("restarts") or []) + ("in kernel start" in error)
    if code == 0 and record.get("status") == "ok":
        return "ok", starts, ""
    if "silent for" in error or "timed out" in error or "timeout" in error:
        return "hang", starts, error
    return ("failed start" if "in kernel start" in error else "failed"), starts, error


def _keep_logs(record: dict, kept: Path, number: int) -> None:
    """Copy the kernel logs a run's record names (its last start's and its failed starts') to
    `kept`, the run's number in front."""
    text = " ".join([str(record.get("kernel_log") or ""), *(record.get("restarts") or [])])
    kept.mkdir(parents=True, exist_ok=True)
    for log in re.findall(r"\S+/kernel-[^\s)]+\.log", text):
        if Path(log).is_file():
            shutil.copy2(log, kept / f"run{number:04d}-{Path(log).name}")


def _one_run(lane: int, number: int, notebook: Path, build: Path, timeout: float) -> _Run:
    """`python -m kit.runner` once, in this lane's build folder."""
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "kit.runner", str(notebook), "--build-dir", str(build)]
        + ["--timeout", str(timeout)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    seconds = time.monotonic() - start
    record = None
    try:
        records = json.loads((build / "run-summary.json").read_text())["notebooks"]
        record = next(r for r in records if r["notebook"] == notebook.name)
        (build / "run-summary.json").unlink()  # the next run's record is its own
    except (OSError, ValueError, KeyError, StopIteration):
        pass
    status, starts, error = _classify(done.returncode, record)
    if record is not None and (status != "ok" or starts):
        _keep_logs(record, build.parent / "kept", number)
    return _Run(lane, number, seconds, status, starts, error)


def _lane(
    lane: int, numbers: Sequence[int], notebook: Path, root: Path, timeout: float, runs: list[_Run]
) -> None:
    """Run the notebook once for each of `numbers`, printing each run as it ends."""
    build = root / f"lane{lane}"
    for number in numbers:
        run = _one_run(lane, number, notebook, build, timeout)
        runs.append(run)
        note = f" {run.error}" if run.error else ""
        print(f"run {number:>4} lane {lane}: {run.status} in {run.seconds:.1f} s{note}", flush=True)


def _slow(runs: Sequence[_Run]) -> list[_Run]:
    """The runs that took over SLOW × the median."""
    median = statistics.median(r.seconds for r in runs)
    return [r for r in runs if r.seconds > _SLOW * median]


def _report(runs: Sequence[_Run]) -> str:
    """The counts and the seconds."""
    counts = {status: sum(r.status == status for r in runs) for status in ("ok", "hang")}
    starts = sum(r.failed_starts for r in runs)
    failed = sum(r.status in ("failed", "failed start") for r in runs)
    slow = ", ".join(f"run {r.number} {r.seconds:.0f} s" for r in _slow(runs)) or "none"
    seconds = sorted(r.seconds for r in runs)
    return (
        f"{len(runs)} runs: {counts['ok']} ok, {counts['hang']} hangs, {starts} failed kernel "
        f"starts, {failed} other failures; slow (over {_SLOW:.0f} × the median): {slow}; "
        f"seconds min {seconds[0]:.1f} / median {statistics.median(seconds):.1f} / max "
        f"{seconds[-1]:.1f}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Soak the notebook; 0 when every run passed without a hang or a failed start."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", nargs="?", type=Path, help="default: the first notebook")
    parser.add_argument("--runs", type=int, default=20, help="runs in all (default 20)")
    parser.add_argument("--lanes", type=int, default=1, help="runs at once (default 1)")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds per run")
    parser.add_argument("--out", type=Path, default=BUILD_DIR / "soak", help="build folders")
    args = parser.parse_args(argv)
    notebook = args.notebook or min(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"), default=None)
    if notebook is None:
        parser.error(f"no notebook in {NOTEBOOKS_DIR}: name one")
    notebook = notebook.resolve()
    runs: list[_Run] = []
    lanes = [
        threading.Thread(
            target=_lane,
            args=(lane, range(lane, args.runs + 1, args.lanes), notebook, args.out, args.timeout)
            + (runs,),
        )
        for lane in range(1, args.lanes + 1)
    ]
    for thread in lanes:
        thread.start()
    for thread in lanes:
        thread.join()
    print(f"{notebook.name}, {args.lanes} at once: {_report(runs)}")
    clean = all(r.status == "ok" and not r.failed_starts for r in runs)
    return 0 if runs and clean and not _slow(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
