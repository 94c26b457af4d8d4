"""make test's notebooks, shared by its two lanes: each notebook runs once, in whichever lane
claims it first.

    python -m kit.nbval_queue --claims DIR [--from-end] NOTEBOOK ...
    python -m kit.nbval_queue --claims DIR --verify NOTEBOOK ...

The notebooks are queued longest first, by their run times in the agenda's record
(data/measurements/cpu-notebook-runs.json; a notebook it lacks counts as the longest). The
notebooks lane takes them from the front, the tests lane (once its tests are done) from the back,
the shortest first; a lane claims a notebook by creating DIR/<notebook> (one `mkdir`, which only one
process can win), runs it under nbval and the watchdog (`pytest --nbval-lax --nbval-current-env -p
kit.nbval_watchdog NOTEBOOK`), and stops at the first notebook the other lane has claimed: the lanes
end close together, whichever turns out slower on the day. A notebook that fails stops its lane
with pytest's status. --verify (after both lanes) fails unless every notebook was claimed once and
passed. The notebooks are independent of each other (`make run NOTEBOOKS=...` runs any one alone),
so their order does not matter.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from kit import agenda

__all__ = ["main"]

#: Written into a claim once its notebook has run: pytest's exit status.
_STATUS = "status"
#: nbval as make test runs it (the Makefile's NBVAL), for one notebook.
_NBVAL = ("--nbval-lax", "--nbval-current-env", "-p", "kit.nbval_watchdog", "--durations=5")


def _queue(notebooks: Sequence[str], seconds: Mapping[str, float]) -> list[str]:
    """The notebooks longest first by `seconds` (by file name; one missing counts as longest)."""
    return sorted(notebooks, key=lambda n: -seconds.get(Path(n).name, math.inf))


def _claim(claims: Path, notebook: str) -> Path | None:
    """The claim folder of `notebook`, now this process's; None when the other lane has it."""
    folder = claims / Path(notebook).name
    try:
        folder.mkdir()
    except FileExistsError:
        return None
    return folder


def _nbval(notebook: str) -> int:
    """Run one notebook under nbval and the watchdog in a pytest of its own: its exit status."""
    return subprocess.run([sys.executable, "-m", "pytest", *_NBVAL, notebook]).returncode


def _run_queue(
    claims: Path,
    notebooks: Sequence[str],
    from_end: bool = False,
    run: Callable[[str], int] = _nbval,
) -> tuple[int, list[str]]:
    """Claim and run the queued notebooks from the front (from the back with from_end) until the
    other lane's first claim or a failure: (the exit status, the notebooks this lane ran)."""
    ran: list[str] = []
    for notebook in reversed(notebooks) if from_end else notebooks:
        folder = _claim(claims, notebook)
        if folder is None:
            break
        status = run(notebook)
        (folder / _STATUS).write_text(f"{status}\n", encoding="utf-8")
        ran.append(notebook)
        if status != 0:
            return status, ran
    return 0, ran


def _verify(claims: Path, notebooks: Sequence[str]) -> list[str]:
    """One line per notebook that did not run and pass in either lane (empty: all did)."""
    problems = []
    for notebook in notebooks:
        status = claims / Path(notebook).name / _STATUS
        if not status.is_file():
            problems.append(f"{notebook}: never ran (no lane claimed it, or its run was cut short)")
        elif (code := status.read_text(encoding="utf-8").strip()) != "0":
            problems.append(f"{notebook}: failed (pytest status {code})")
    return problems


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(prog="python -m kit.nbval_queue", description=__doc__)
    parser.add_argument("--claims", type=Path, required=True, help="the folder both lanes share")
    parser.add_argument("--from-end", action="store_true", help="take the notebooks from the last")
    parser.add_argument("--verify", action="store_true", help="check every notebook ran and passed")
    parser.add_argument("notebooks", nargs="+", help="the notebooks")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run this lane's share of the notebooks (or --verify both lanes'); pytest's exit status."""
    args = _parse_args(argv)
    if args.verify:
        problems = _verify(args.claims, args.notebooks)
        for line in problems:
            print(f"nbval_queue: {line}")
        if not problems:
            print(f"nbval_queue: every notebook ran once and passed ({len(args.notebooks)})")
        return 1 if problems else 0
    args.claims.mkdir(parents=True, exist_ok=True)
    queue = _queue(args.notebooks, agenda.run_seconds())
    status, ran = _run_queue(args.claims, queue, args.from_end)
    names = ", ".join(Path(n).stem for n in ran) or "none (the other lane had them all)"
    print(f"nbval_queue: this lane ran {names}")
    return status


if __name__ == "__main__":
    sys.exit(main())
