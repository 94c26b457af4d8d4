"""The chapters, found and not listed: each `src/chapters/chNN_<topic>/chapter.json` declares what
repo-wide code needs to know of its chapter, and nothing outside a chapter's folder names it.

    python -m kit.chapters                     (a line per chapter: number, level, notebook, title)
    python -m kit.chapters check               (every record read; a bad one in one line, exit 1)
    python -m kit.chapters hooks TARGET        (the modules the chapters add to `make TARGET`)
    python -m kit.chapters gpu-steps           (the GPU steps the chapters add to gpu_check.sh)
    python -m kit.chapters gpu-step NAME       (that step's shell command; exit 2 if none has it)
    python -m kit.chapters readme              (rewrite README.md's chapter rows from the records)

A record holds: `title`; `level` ("core" or "deep dive", the agenda's path); `notebook` (its file
in notebooks/, named NN_*.ipynb for chapter NN); `readme` (what the README's notebook table says
you will do); `promises` (README "When something goes wrong" rows: the case, what you get and
the chapter's test files, relative to its folder); `twins` (a notebook cell's function and
its library twin, `module.function`); `outcome_calls` (`module.function` calls its notebook makes
to state outcomes); `make` (per make target, the modules run as `python -m`, in the chapter's own
package); `gpu_steps` (name -> a bash command gpu_check.sh runs, with $PY, $SHAPE and $LOGS set);
`sweeps` (`module.function`s the runner calls before the notebooks and after each, to stop
what a dead owner left, each returning a line per thing stopped); `max_lines` (the chapter's line
budget, when not the default). Only `title`, `level`, `notebook` and `readme` are required. A bad
record fails in one line naming its file and key.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers.common.paths import REPO_ROOT

__all__ = [
    "main",
]

#: Where the chapter packages live.
_CHAPTERS_DIR: Path = REPO_ROOT / "src" / "chapters"
#: The record's file name inside a chapter's folder.
_RECORD = "chapter.json"
#: The agenda's two paths through the notebooks.
_LEVELS = ("core", "deep dive")
#: A chapter's line budget unless its record says otherwise (issue #59).
_DEFAULT_MAX_LINES = 1_000
#: The steps gpu_check.sh itself has; a chapter's step may not take their names.
_BUILTIN_STEPS = re.compile(r"^(engines|nb|tests|nb-.*|shape-.*)$")
_FOLDER = re.compile(r"^ch(\d\d)_[a-z0-9_]+$")
_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")
_STEP = re.compile(r"^[a-z][a-z0-9-]*$")
_REQUIRED = ("title", "level", "notebook", "readme")
#: README.md, whose notebook table and promise rows `readme` rewrites.
_README = REPO_ROOT / "README.md"
_NOTEBOOK_ROW = re.compile(r"^\| (\d\d) \| `(\w+)` \| (.*) \| ([^|]+) \|$")
_PROMISES_HEADING = "## When something goes wrong"
_CHAPTER_TEST = re.compile(r"`src/chapters/\w+/tests/")
_KEYS = (
    *_REQUIRED,
    "promises",
    "twins",
    "outcome_calls",
    "make",
    "gpu_steps",
    "sweeps",
    "max_lines",
)


class _ChapterError(ValueError):
    """A chapter record that cannot be read: one line, naming the file and the key."""


@dataclass(frozen=True)
class _Promise:
    """A README "When something goes wrong" row: the case, what you get, the chapter's tests."""

    case: str
    what: str
    tests: tuple[str, ...]


@dataclass(frozen=True)
class _Twin:
    """A function a notebook cell defines and the library function it must equal."""

    cell: str
    library: str


@dataclass(frozen=True)
class _Chapter:
    """One chapter's declared record, and where it lives."""

    folder: Path
    title: str
    level: str
    notebook: str
    readme: str
    promises: tuple[_Promise, ...] = ()
    twins: tuple[_Twin, ...] = ()
    outcome_calls: tuple[str, ...] = ()
    make: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    gpu_steps: Mapping[str, str] = field(default_factory=dict)
    sweeps: tuple[str, ...] = ()
    max_lines: int = _DEFAULT_MAX_LINES

    @property
    def name(self) -> str:
        """The folder's name, chNN_<topic>."""
        return self.folder.name

    @property
    def number(self) -> str:
        """NN, shared by the folder and its notebook."""
        return self.name[2:4]

    @property
    def package(self) -> str:
        """The chapter's dotted package name."""
        return f"chapters.{self.name}"

    def test_paths(self, promise: _Promise) -> list[str]:
        """A promise's test files as repo-relative paths, as the README names them."""
        return [f"src/chapters/{self.name}/{t}" for t in promise.tests]


def _bad(path: Path, key: str, problem: str) -> _ChapterError:
    """The one-line error for a key of a record."""
    return _ChapterError(f"{path}: {key}: {problem}")


def _text(path: Path, key: str, value: Any) -> str:
    """A non-empty one-line string."""
    if not isinstance(value, str) or not value.strip() or "\n" in value:
        raise _bad(path, key, f"{value!r} is not a non-empty one-line string")
    return value


def _texts(path: Path, key: str, value: Any, pattern: re.Pattern[str] | None = None) -> tuple:
    """A list of one-line strings, each matching `pattern` when given."""
    if not isinstance(value, list):
        raise _bad(path, key, f"{value!r} is not a list")
    items = tuple(_text(path, key, v) for v in value)
    for item in items:
        if pattern and not pattern.match(item):
            raise _bad(path, key, f"{item!r} is not a dotted name such as module.function")
    return items


def _object(path: Path, key: str, value: Any) -> dict:
    """A JSON object."""
    if not isinstance(value, dict):
        raise _bad(path, key, f"{value!r} is not an object")
    return value


def _promises(path: Path, value: Any) -> tuple[_Promise, ...]:
    """README rows: each {"case": text, "what": text, "tests": [files under the chapter]}."""
    if not isinstance(value, list):
        raise _bad(path, "promises", f"{value!r} is not a list")
    found = []
    for row in value:
        row = _object(path, "promises", row)
        if set(row) != {"case", "what", "tests"}:
            raise _bad(path, "promises", f"a row has keys {sorted(row)}, not case, what, tests")
        tests = _texts(path, "promises", row["tests"])
        for test in tests:
            if not re.match(r"^tests/[\w/]+\.py$", test):
                raise _bad(path, "promises", f"{test!r} is not tests/<file>.py in the chapter")
        texts = [_text(path, "promises", row[k]) for k in ("case", "what")]
        found.append(_Promise(*texts, tests))
    return tuple(found)


def _twins(path: Path, value: Any) -> tuple[_Twin, ...]:
    """Cell/library pairs: each {"cell": function name, "library": module.function}."""
    if not isinstance(value, list):
        raise _bad(path, "twins", f"{value!r} is not a list")
    found = []
    for pair in value:
        pair = _object(path, "twins", pair)
        if set(pair) != {"cell", "library"}:
            raise _bad(path, "twins", f"a pair has keys {sorted(pair)}, not cell and library")
        cell = _text(path, "twins", pair["cell"])
        if not cell.isidentifier():
            raise _bad(path, "twins", f"{cell!r} is not a function name")
        (library,) = _texts(path, "twins", [pair["library"]], _DOTTED)
        found.append(_Twin(cell, library))
    return tuple(found)


def _own(path: Path, key: str, value: Any, package: str) -> tuple[str, ...]:
    """Dotted names inside the chapter's own package."""
    names = _texts(path, key, value, _DOTTED)
    for name in names:
        if not name.startswith(package + "."):
            raise _bad(path, key, f"{name!r} is not in {package}")
    return names


def _make(path: Path, value: Any, package: str) -> dict[str, tuple[str, ...]]:
    """make target -> modules of the chapter's own package."""
    return {t: _own(path, "make", m, package) for t, m in _object(path, "make", value).items()}


def _read_gpu_steps(path: Path, value: Any) -> dict[str, str]:
    """Step name -> bash command; names are lower-case words and not gpu_check.sh's own."""
    steps = {}
    for name, command in _object(path, "gpu_steps", value).items():
        if not _STEP.match(name) or _BUILTIN_STEPS.match(name):
            raise _bad(path, "gpu_steps", f"{name!r} is not a free step name")
        steps[name] = _text(path, "gpu_steps", command)
    return steps


def _read_chapter(path: Path) -> _Chapter:
    """One chapter's record (path is its chapter.json); _ChapterError in one line if it is bad."""
    folder = path.parent
    number = _FOLDER.match(folder.name)
    if not number:
        raise _bad(path, "folder", f"{folder.name!r} is not named chNN_<topic>")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise _ChapterError(f"{path}: not readable JSON ({' '.join(str(err).split())})") from None
    raw = _object(path, "record", raw)
    unknown = sorted(set(raw) - set(_KEYS))
    if unknown:
        raise _bad(path, unknown[0], f"unknown key (known: {', '.join(_KEYS)})")
    missing = [k for k in _REQUIRED if k not in raw]
    if missing:
        raise _bad(path, missing[0], "missing")
    if raw["level"] not in _LEVELS:
        raise _bad(path, "level", f"{raw['level']!r} is not one of {', '.join(_LEVELS)}")
    notebook = _text(path, "notebook", raw["notebook"])
    if not re.match(rf"^{number[1]}_\w+\.ipynb$", notebook):
        raise _bad(path, "notebook", f"{notebook!r} is not {number[1]}_<name>.ipynb")
    package = f"chapters.{folder.name}"
    max_lines = raw.get("max_lines", _DEFAULT_MAX_LINES)
    if isinstance(max_lines, bool) or not isinstance(max_lines, int) or max_lines <= 0:
        raise _bad(path, "max_lines", f"{max_lines!r} is not a positive whole number")
    return _Chapter(
        folder=folder,
        title=_text(path, "title", raw["title"]),
        level=raw["level"],
        notebook=notebook,
        readme=_text(path, "readme", raw["readme"]),
        promises=_promises(path, raw.get("promises", [])),
        twins=_twins(path, raw.get("twins", [])),
        outcome_calls=_texts(path, "outcome_calls", raw.get("outcome_calls", []), _DOTTED),
        make=_make(path, raw.get("make", {}), package),
        gpu_steps=_read_gpu_steps(path, raw.get("gpu_steps", {})),
        sweeps=_own(path, "sweeps", raw.get("sweeps", []), package),
        max_lines=max_lines,
    )


def discover(root: Path = _CHAPTERS_DIR) -> list[_Chapter]:
    """Every chapter under root, by folder name; a chapter package without a record is an error."""
    for package in sorted(root.glob("ch*/__init__.py")):
        if not (package.parent / _RECORD).is_file():
            raise _ChapterError(f"{package.parent}: a chapter package without its {_RECORD}")
    chapters = [_read_chapter(p) for p in sorted(root.glob(f"ch*/{_RECORD}"))]
    numbers = [c.number for c in chapters]
    for chapter in chapters:
        if numbers.count(chapter.number) > 1:
            raise _ChapterError(f"{chapter.folder}: number {chapter.number} has two chapters")
    steps = [s for c in chapters for s in c.gpu_steps]
    for chapter in chapters:
        for step in chapter.gpu_steps:
            if steps.count(step) > 1:
                raise _bad(chapter.folder / _RECORD, "gpu_steps", f"{step!r} is another's too")
    return chapters


def load(dotted: str) -> Callable[..., Any]:
    """The object a dotted `module.name` names (a twin, a sweep)."""
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _hooks(target: str, chapters: Sequence[_Chapter]) -> list[str]:
    """The modules the chapters run for a make target, in chapter order."""
    return [m for c in chapters for m in c.make.get(target, ())]


def _step_commands(chapters: Sequence[_Chapter]) -> dict[str, str]:
    """Every chapter's GPU steps: name -> bash command."""
    return {name: cmd for c in chapters for name, cmd in c.gpu_steps.items()}


def _notebook_rows(lines: list[str], chapters: Sequence[_Chapter]) -> list[str]:
    """The notebook table's rows made the chapters' (number, notebook, 'you will'), each keeping
    its time cell; a new chapter's reads "not measured yet" until `python -m kit.agenda record`."""
    at = [i for i, line in enumerate(lines) if _NOTEBOOK_ROW.match(line)]
    if not at:
        return lines
    times = {m[2]: m[4] for m in map(_NOTEBOOK_ROW.match, lines[at[0] : at[-1] + 1]) if m}
    rows = [
        f"| {c.number} | `{Path(c.notebook).stem}` | {c.readme} | "
        f"{times.get(Path(c.notebook).stem, 'not measured yet')} |"
        for c in chapters
    ]
    return lines[: at[0]] + rows + lines[at[-1] + 1 :]


def _promise_rows(lines: list[str], chapters: Sequence[_Chapter]) -> list[str]:
    """The "When something goes wrong" table with the rows naming a chapter's tests made the
    chapters' declared promises (at the place of the first such row, else the table's end)."""
    start = next((i for i, line in enumerate(lines) if line == _PROMISES_HEADING), None)
    if start is None:
        return lines
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    table = [i for i in range(start, end) if lines[i].startswith("| ")]
    if not table:
        return lines
    ours = [i for i in table if _CHAPTER_TEST.search(lines[i])]
    place = ours[0] if ours else table[-1] + 1
    rows = [
        f"| {p.case} | {p.what} | {', '.join(f'`{t}`' for t in c.test_paths(p))} |"
        for c in chapters
        for p in c.promises
    ]
    kept = [i for i in range(len(lines)) if i not in ours]
    before = [lines[i] for i in kept if i < place]
    return before + rows + [lines[i] for i in kept if i >= place]


def _readme_text(text: str, chapters: Sequence[_Chapter]) -> str:
    """README.md with its chapter rows (the notebook table, the chapters' promises) rewritten."""
    lines = _promise_rows(_notebook_rows(text.split("\n"), chapters), chapters)
    return "\n".join(lines)


def _rows(chapters: Sequence[_Chapter]) -> list[str]:
    """One line per chapter."""
    return [f"{c.number}  {c.level:<9}  {c.notebook}  {c.title}" for c in chapters]


def main(argv: Sequence[str] | None = None) -> int:
    """Print the chapters, check them, or answer make's and gpu_check.sh's questions."""
    parser = argparse.ArgumentParser(
        prog="python -m kit.chapters",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--root", type=Path, default=_CHAPTERS_DIR, help=argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("check", help="read every record; a bad one in one line")
    sub.add_parser("hooks", help="the modules run by a make target").add_argument("target")
    sub.add_parser("gpu-steps", help="the chapters' GPU step names")
    sub.add_parser("gpu-step", help="one GPU step's bash command").add_argument("name")
    sub.add_parser("readme", help="rewrite README.md's chapter rows from the records")
    parser.add_argument("--readme", type=Path, default=_README, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        chapters = discover(args.root)
    except _ChapterError as err:
        print(f"kit.chapters: {err}", file=sys.stderr)
        return 1
    if args.command == "hooks":
        lines = _hooks(args.target, chapters)
    elif args.command == "gpu-steps":
        lines = list(_step_commands(chapters))
    elif args.command == "gpu-step":
        steps = _step_commands(chapters)
        if args.name not in steps:
            known = " ".join(steps) or "none"
            print(f"kit.chapters: no chapter has GPU step {args.name!r} (known: {known})")
            return 2
        lines = [steps[args.name]]
    elif args.command == "readme":
        old = args.readme.read_text(encoding="utf-8")
        new = _readme_text(old, chapters)
        args.readme.write_text(new, encoding="utf-8")
        lines = [f"{args.readme.name}: {'rewritten' if new != old else 'unchanged'}"]
    elif args.command == "check":
        lines = [f"{len(chapters)} chapter records read, all good"]
    else:
        lines = _rows(chapters)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
