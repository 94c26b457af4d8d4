"""Drop a chapter, checked: delete it from a scratch copy of the tree and see what still holds.

    python -m kit.drop_check [NN ...]          (each chapter on its own; all of them by default)
    python -m kit.drop_check --keep 01,02,03   (the fork: every other chapter dropped at once)
    python -m kit.drop_check --markdown        (also rewrite the table in docs/layout.md)

For each chapter NN (found, never listed: a notebook `notebooks/NN_*.ipynb` or a package
`src/chapters/chNN_*/`), a scratch copy of the tracked files (`git ls-files`, as they are in the
working tree) loses the notebook and the chapter's folder (its modules, tests/, tools/ and data/),
and nothing else. What is derived from the tree is then rewritten (data/'s manifest, the
instructors' agenda, the README's chapter rows), and the checks run: `ruff check`, then in one
Python process (a fork of a server that imported the tree once, so torch and vLLM are imported
once for all the drops) an import of every module under src/, `pytest --collect-only`, and the
repo-wide static tests (`tests/test_*.py`, `-m "not vllm and not process and not
whole_workbook"`, less the tests of one script in scripts/: those hold that script's behaviour,
which dropping a chapter cannot change). The `whole_workbook` tests (a name nothing uses any more)
run last, unless --no-trim; what they find is the fork's trim list, noted and not failed. One row
per chapter: green or red, seconds, the first failing lines. Two chapters run at a time; the
scratch copies are removed afterwards.
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from helpers.common.paths import REPO_ROOT

__all__ = ["main"]

#: Where a chapter lives, NN standing for its two digits: everything dropping it deletes.
_CHAPTER_GLOBS = ("notebooks/{nn}_*.ipynb", "src/chapters/ch{nn}_*")
#: The globs that find the chapters.
_FOUND_BY = _CHAPTER_GLOBS
_NN = re.compile(r"^(?:ch)?(\d\d)_")
#: The head of pytest's section for a file it could not collect.
_COLLECTING = re.compile(r"^_+ ERROR collecting (\S+) _+$")
#: The layout doc whose "Dropping a chapter" table `--markdown` rewrites, between these lines.
_DOC = REPO_ROOT / "docs" / "layout.md"
_TABLE_START = "<!-- drop-check: computed by `python -m kit.drop_check --markdown`; do not edit -->"
_TABLE_END = "<!-- end of the drop-check table -->"
#: Failing lines shown per row; a step's output is cut to this many characters a line.
_SHOWN = 3
_WIDTH = 200
#: A step that runs longer than this (seconds) fails.
_STEP_TIMEOUT = 1800
#: The repo-wide tests a drop reruns: the static ones (no engine, no program started and
#: watched) that hold in any fork.
_STATIC = "not vllm and not process and not whole_workbook"
#: The line that opens a phase of the checks' process, and the one that closes it with its status.
_PHASE, _PHASE_END = "[drop_check phase]", "[drop_check phase done]"
#: The phases whose failing lines are notes (the fork's trim list), not failures.
_ADVISORY = ("trim",)


def _module_names(root: Path) -> list[str]:
    """The dotted names of the modules under root/src/ that sit in packages."""
    src, names = root / "src", []
    for path in sorted(src.rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        if all((src.joinpath(*parts[:i]) / "__init__.py").is_file() for i in range(1, len(parts))):
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


#: The checks after ruff, in one process so torch and vLLM are imported once: an import of every
#: module under src/ (one line per module that fails), `pytest --collect-only`, the repo-wide
#: tests, then the `whole_workbook` ones (advisory). argv[1]: "trim" to run those, else
#: "no-trim"; argv[2:]: the repo-wide test files.
_CHECKS = (
    r"""
import importlib, sys
from pathlib import Path
import pytest

def phase(name, run):
    print(f"PHASE {name}", flush=True)
    status = int(run())
    print(f"PHASE_END {name} {status}", flush=True)
    return status

MODULE_NAMES
def import_all():
    failed = 0
    for name in _module_names(Path(".")):
        try:
            importlib.import_module(name)
        except BaseException as err:
            failed += 1
            print(f"ERROR import {name}: {type(err).__name__}: {err}".splitlines()[0])
    return 1 if failed else 0

quiet, trim, tests = ["-p", "no:cacheprovider", "-q"], sys.argv[1] == "trim", sys.argv[2:]
statuses = [
    phase("imports", import_all),
    phase("collect", lambda: pytest.main([*quiet, "--collect-only"])),
    phase("repo-wide", lambda: pytest.main(
        [*quiet, "--continue-on-collection-errors", "-m", _STATIC, *tests]
    ) if tests else 0),
    # pytest's 5: no test selected (a repo without whole_workbook tests)
    phase("trim", lambda: pytest.main(
        [*quiet, "--continue-on-collection-errors", "-m", "whole_workbook", *tests]) % 5
          if tests and trim else 0),
]
sys.exit(1 if any(statuses[:3]) else 0)
""".replace("MODULE_NAMES", inspect.getsource(_module_names))
    .replace("PHASE_END", _PHASE_END)
    .replace("PHASE", _PHASE)
    .replace("_STATIC", repr(_STATIC))
)


@dataclass(frozen=True)
class _Step:
    """One command run in the scratch tree, named for the table."""

    name: str
    argv: tuple[str, ...]


@dataclass(frozen=True)
class _Row:
    """One dropped set of chapters: its label, verdict, seconds, failing lines and extra output."""

    label: str
    green: bool
    seconds: float
    failures: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _derived_steps(python: str = sys.executable) -> list[_Step]:
    """What is rewritten from the tree after a drop, as docs/layout.md says."""
    return [
        _Step("manifest", (python, "-m", "kit.manifest")),
        _Step("agenda", (python, "-m", "kit.agenda", "guide")),
        _Step("readme", (python, "-m", "kit.chapters", "readme")),
    ]


def _repo_wide_tests(root: Path) -> list[str]:
    """tests/test_*.py, less each test of one script (tests/test_X.py beside scripts/X.py)."""
    scripts = {p.stem for p in (root / "scripts").glob("*.py")}
    tests = sorted((root / "tests").glob("test_*.py"))
    return [str(p.relative_to(root)) for p in tests if p.stem.removeprefix("test_") not in scripts]


def _check_steps(root: Path, python: str = sys.executable, trim: bool = True) -> list[_Step]:
    """The checks run on a tree after a drop (root: that tree, for the repo-wide tests' names);
    trim: also the whole_workbook tests, the fork's trim list."""
    return [
        _Step("ruff", (python, "-m", "ruff", "check", "--output-format", "concise", ".")),
        _Step(
            "checks",
            (python, "-c", _CHECKS, "trim" if trim else "no-trim", *_repo_wide_tests(root)),
        ),
    ]


def _phases(output: str) -> list[tuple[str, int, str]]:
    """The checks' output cut into its phases: (name, status, output) each; what came before the
    first phase (an import that killed the process) is one phase named 'checks', status 1."""
    phases, name, lines = [], "checks", []
    for line in output.splitlines():
        if line.startswith(f"{_PHASE_END} "):
            phase, status = line.removeprefix(f"{_PHASE_END} ").rsplit(" ", 1)
            phases.append((phase, int(status), "\n".join(lines)))
            name, lines = "checks", []
        elif line.startswith(f"{_PHASE} "):
            if lines and any(x.strip() for x in lines):
                phases.append((name, 1, "\n".join(lines)))
            name, lines = line.removeprefix(f"{_PHASE} "), []
        else:
            lines.append(line)
    if any(x.strip() for x in lines):  # a phase that never ended: the process died in it
        phases.append((name, 1, "\n".join(lines)))
    return phases


def _chapters(root: Path) -> list[str]:
    """The chapters' two-digit numbers, found by their notebooks and packages."""
    found = {
        match[1]
        for pattern in _FOUND_BY
        for path in root.glob(pattern.format(nn="[0-9][0-9]"))
        if path.suffix == ".ipynb" or path.is_dir()
        if (match := _NN.match(path.name))
    }
    return sorted(found)


def _chapter_paths(root: Path, nn: str) -> list[Path]:
    """Everything dropping chapter NN deletes under root."""
    return sorted(p for pattern in _CHAPTER_GLOBS for p in root.glob(pattern.format(nn=nn)))


def _copy_tracked(root: Path, dest: Path) -> None:
    """Copy the files git tracks under root, as the working tree has them, into dest."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True
    ).stdout
    for name in os.fsdecode(listed).split("\0"):
        source = root / name
        if not name or not (source.is_file() or source.is_symlink()):
            continue  # deleted in the working tree
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest / name, follow_symlinks=False)


def _collection_reasons(lines: Sequence[str]) -> dict[str, str]:
    """pytest's reason per file it could not collect: the last `E   ` line of its section."""
    reasons, current = {}, None
    for line in lines:
        if line.startswith(("___", "===")):  # a section's head ends the one before
            current = match[1] if (match := _COLLECTING.match(line)) else None
        elif current and line.startswith("E   "):
            reasons[current] = line[4:].strip()
    return reasons


def _failing_lines(output: str) -> list[str]:
    """The lines that say what failed: pytest's FAILED/ERROR summary (a file it could not collect
    with its reason), else a traceback's last line, else the first lines."""
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    reasons = _collection_reasons(lines)
    summary = [
        f"{line} - {reasons[line[6:]]}" if line[6:] in reasons else line
        for line in lines
        if line.startswith(("FAILED ", "ERROR "))
    ]
    if summary:
        return summary
    if any(line.startswith("Traceback ") for line in lines):
        return lines[-1:]
    return lines[:_SHOWN] or ["(no output)"]


def _in_fork(tree: str, code: str, argv: Sequence[str], env: dict[str, str], out: str) -> None:
    """In a child of the fork server: forget every module from outside the Python installation
    (the repo's, imported by the preload), put tree first, run code as `python -c` would there."""
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    installed = tuple({sys.prefix, sys.base_prefix, sys.exec_prefix})
    for name, module in list(sys.modules.items()):
        own = getattr(module, "__dict__", {})  # never getattr: a lazy module imports on it
        paths = [own.get("__file__"), *(own.get("__path__") or ())]
        if any(isinstance(p, str) and not p.startswith(installed) for p in paths):
            del sys.modules[name]
    sys.path[:] = ["", str(Path(tree) / "src")] + [p for p in sys.path if p.startswith(installed)]
    os.chdir(tree)
    os.environ.clear()  # the caller's environment now, not the server's when it started
    os.environ.update(env | _step_env(Path(tree)))
    sys.argv = ["-c", *argv]
    exec(compile(code, "<string>", "exec"), {"__name__": "__main__"})


class _Forks:
    """A fork server that has imported every module of the repo (so torch, vLLM and the rest are
    imported once): the checks' process of each drop is a fork of it, not a new interpreter."""

    def __init__(self, root: Path) -> None:
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(["pytest", *_module_names(root)])

    def run(self, step: _Step, tree: Path) -> subprocess.CompletedProcess[str] | None:
        """Run a `python -c CODE ARGS` step in a fork; None when it timed out."""
        handle, name = tempfile.mkstemp(prefix="drop-check-", suffix=".out")
        os.close(handle)
        out = Path(name)
        child = self._context.Process(
            target=_in_fork,
            args=(str(tree), step.argv[2], step.argv[3:], dict(os.environ), str(out)),
        )
        try:
            child.start()
            child.join(_STEP_TIMEOUT)
            if child.exitcode is None:
                child.kill()
                child.join()
                return None
            text = out.read_text(encoding="utf-8", errors="replace")
        finally:
            out.unlink()
        return subprocess.CompletedProcess(step.argv, child.exitcode, text, "")


def _step_env(tree: Path) -> dict[str, str]:
    """What a step's environment changes: tree's src/ first on the path, wide pytest lines."""
    # pytest cuts its summary lines to COLUMNS: wide enough for a failure's first words
    return {"PYTHONPATH": str(tree / "src"), "COLUMNS": str(2 * _WIDTH)}


def _execute(
    step: _Step, tree: Path, forks: _Forks | None = None
) -> subprocess.CompletedProcess[str] | None:
    """Run one step in tree with tree's src/ first on the path (a `python -c` step in a fork
    when given forks); None when it timed out."""
    if forks is not None and step.argv[1:2] == ("-c",):
        return forks.run(step, tree)
    env = {**os.environ, **_step_env(tree)}
    try:
        return subprocess.run(
            step.argv,
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=_STEP_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None


def _run_step(step: _Step, tree: Path, forks: _Forks | None = None) -> tuple[list[str], list[str]]:
    """Run one step in tree: its failing lines (empty when it passed) and its advisory lines."""
    done = _execute(step, tree, forks)
    if done is None:
        return [f"{step.name}: still running after {_STEP_TIMEOUT} s"], []
    output = done.stdout + done.stderr
    if _PHASE not in output:
        lines = _failing_lines(output) if done.returncode else []
        return [f"{step.name}: {line[:_WIDTH]}" for line in lines], []
    failures: list[str] = []
    advisory: list[str] = []
    for name, status, text in _phases(done.stdout):
        if status:
            lines = _failing_lines(text)
            if name in _ADVISORY:  # its failed tests (a file not collected: the collect phase)
                advisory += [f"{name}: {x[:_WIDTH]}" for x in lines if x.startswith("FAILED ")]
            else:
                failures += [f"{name}: {x[:_WIDTH]}" for x in lines]
    if done.returncode and not failures:
        failures = [f"{step.name}: {line[:_WIDTH]}" for line in _failing_lines(output)]
    return failures, advisory


def _output(step: _Step, tree: Path) -> str:
    """A step's whole output, as a note of the row."""
    done = _execute(step, tree)
    text = "(timed out)" if done is None else done.stdout + done.stderr
    return f"$ {' '.join(step.argv[1:])}\n{text}".rstrip()


def _check_drop(
    root: Path,
    drop: Iterable[str],
    derived: Sequence[_Step],
    checks: Sequence[_Step],
    label: str,
    report: Sequence[_Step] = (),
    into: Path | None = None,
    forks: _Forks | None = None,
) -> _Row:
    """Drop chapters from a scratch copy of root, rewrite what is derived, run the checks; the
    row. Every step runs, so the row names each failing one; report's outputs become its notes.
    into: build the tree there and keep it (it must not exist), instead of a removed scratch;
    forks: run the checks' process as a fork of that server."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="drop-check-") as scratch:
        tree = into if into is not None else Path(scratch) / "tree"
        tree.mkdir(parents=True)
        _copy_tracked(root, tree)
        for nn in drop:
            for path in _chapter_paths(tree, nn):
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink()
        failures, trim = [], []
        for step in (*derived, *checks):
            failed, advisory = _run_step(step, tree, forks)
            failures += failed
            trim += advisory
        notes = [_output(step, tree) for step in report]
        if trim:  # names this drop left unused: what a fork may make private
            notes.insert(
                0, f"{len(trim)} advisory lines (the fork's trim list):\n" + "\n".join(trim)
            )
    row = _Row(
        label=label,
        green=not failures,
        seconds=time.monotonic() - start,
        failures=tuple(failures),
        notes=tuple(notes),
    )
    print(f"[drop_check] {_table([row])}\n", file=sys.stderr, flush=True)  # a long run's progress
    return row


def _shown(row: _Row) -> str:
    """A row's failing lines as the table shows them: the first few, and how many more."""
    more = len(row.failures) - _SHOWN
    return " / ".join(row.failures[:_SHOWN]) + (f" (+{more} more)" if more > 0 else "")


def _table(rows: Sequence[_Row]) -> str:
    """The rows as a plain-text table, full failing lines below it."""
    lines = [f"{'dropped':16s} {'result':6s} {'seconds':>7s}  first failing lines"]
    lines += [
        f"{r.label:16s} {'green' if r.green else 'red':6s} {r.seconds:7.0f}  {_shown(r)}"
        for r in rows
    ]
    for row in rows:
        lines += [f"\n{row.label}: {len(row.failures)} failing lines", *row.failures]
        lines += [f"\n{note}" for note in row.notes]
    return "\n".join(lines)


def _markdown(rows: Sequence[_Row], seconds: float, jobs: int) -> str:
    """The rows as the markdown block docs/layout.md holds."""
    green = sum(r.green for r in rows)
    day = datetime.date.today().isoformat()
    cores = os.cpu_count()
    head = (
        f"`python -m kit.drop_check`, {day}: {green} of {len(rows)} green, {seconds:.0f} s in all "
        f"({jobs} at a time on {cores} cores).\n\n"
        "| dropped | result | seconds | first failing lines |\n|---|---|---|---|"
    )
    body = [
        f"| {r.label} | {'green' if r.green else 'red'} | {r.seconds:.0f} | "
        + "<br>".join(f.replace("|", "\\|") for f in r.failures[:_SHOWN])
        + (f"<br>(+{len(r.failures) - _SHOWN} more)" if len(r.failures) > _SHOWN else "")
        + " |"
        for r in rows
    ]
    return "\n".join([head, *body])


def _rewrite_doc(path: Path, block: str) -> None:
    """Replace the table between the drop-check markers of path with block."""
    text = path.read_text(encoding="utf-8")
    if _TABLE_START not in text or _TABLE_END not in text:
        raise ValueError(f"{path} has no drop-check table ({_TABLE_START!r} … {_TABLE_END!r})")
    head, rest = text.split(_TABLE_START, 1)
    tail = rest.split(_TABLE_END, 1)[1]
    path.write_text(f"{head}{_TABLE_START}\n{block}\n{_TABLE_END}{tail}", encoding="utf-8")


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="python -m kit.drop_check", description=__doc__.splitlines()[0]
    )
    parser.add_argument("chapters", nargs="*", metavar="NN", help="chapters to drop (default: all)")
    parser.add_argument(
        "--keep", metavar="NN,NN", help="drop every other chapter at once (the fork)"
    )
    parser.add_argument("--into", type=Path, help="with --keep: build the fork there and keep it")
    parser.add_argument("--jobs", type=int, default=2, help="chapters at a time (default 2)")
    parser.add_argument("--markdown", action="store_true", help=f"rewrite the table in {_DOC}")
    parser.add_argument(
        "--no-trim", action="store_true", help="skip the whole_workbook tests (the trim list)"
    )
    return parser.parse_args(argv)


def _refusal(args: argparse.Namespace, known: Sequence[str]) -> str | None:
    """Why the command line cannot run, in one line; None when it can."""
    keep = args.keep.split(",") if args.keep else []
    unknown = sorted(set(args.chapters + keep) - set(known))
    if unknown:
        return f"no chapter {', '.join(unknown)} here (chapters: {' '.join(known)})"
    if args.keep and args.chapters:
        return "--keep drops every other chapter: name no chapter beside it"
    if args.into and not args.keep:
        return "--into builds a fork: it needs --keep"
    if args.into and args.into.exists():
        return f"{args.into} exists: --into builds a new folder"
    if args.jobs < 1:
        return "--jobs must be 1 or more"
    return None


def main(argv: Sequence[str] | None = None, root: Path = REPO_ROOT) -> int:
    """Drop each chapter (or all but --keep) in a scratch copy and check it; 0 when all green."""
    args = _parse_args(argv)
    known = _chapters(root)
    refusal = _refusal(args, known)
    if refusal:
        print(f"[drop_check] {refusal}", file=sys.stderr)
        return 2
    derived, checks = _derived_steps(), _check_steps(root, trim=not args.no_trim)
    forks = _Forks(root)
    start = time.monotonic()
    if args.keep:
        keep = sorted(set(args.keep.split(",")))
        drop = [nn for nn in known if nn not in keep]
        homes = [_Step("homes", (sys.executable, "-m", "kit.homes"))]
        label = "all but " + ",".join(keep)
        rows = [_check_drop(root, drop, derived, checks, label, homes, args.into, forks)]
    else:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            rows = list(
                pool.map(
                    lambda nn: _check_drop(root, [nn], derived, checks, nn, forks=forks),
                    args.chapters or known,
                )
            )
    seconds = time.monotonic() - start
    print(_table(rows))
    print(f"\n{sum(r.green for r in rows)} of {len(rows)} green, {seconds:.0f} s")
    if args.markdown:
        _rewrite_doc(_DOC, _markdown(rows, seconds, args.jobs))
        print(f"rewrote the table in {_DOC}")
    return 0 if all(r.green for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
