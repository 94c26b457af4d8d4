"""The instructors' agenda, computed from the notebooks and the record of their measured run times.

    python -m kit.agenda                   (print the agenda: the table and the day plans)
    python -m kit.agenda guide             (rewrite the agenda block of docs/instructors.md)
    python -m kit.agenda record build/run-summary.json [--conditions TEXT]
                                           (rewrite data/measurements/cpu-notebook-runs.json)

A notebook's room time is the reading time of its markdown, plus its measured run time from the
record, plus an allowance per exercise, per "Check yourself" question and per assert cell, each
counted from the notebook; the constants below say how much and why. A day plan takes the core
notebooks in their order while they fit its length, breaks included; what does not fit becomes a
deep dive, and the numbers are never shrunk to make a plan fit.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.common.paths import BUILD_DIR, DATA_DIR, NOTEBOOKS_DIR, REPO_ROOT
from kit import chapters

__all__ = [
    "main",
]

#: The record of measured run times the agenda reads, and `record` rewrites.
_RECORD: Path = DATA_DIR / "measurements" / "cpu-notebook-runs.json"
#: The instructors' guide whose agenda block `guide` rewrites.
_GUIDE: Path = REPO_ROOT / "docs" / "instructors.md"
#: The block of the guide this module writes, between these two lines.
_BLOCK_START = "<!-- agenda: computed by `python -m kit.agenda guide`; do not edit by hand -->"
_BLOCK_END = "<!-- end of the computed agenda -->"

#: Words per minute for the notebooks' markdown. Adults read English non-fiction silently at about
#: 238 words per minute (Brysbaert 2019, a meta-analysis of 190 studies); text dense with notation,
#: code names and figures to look at is read more slowly, so a quarter less.
_READING_WPM = 180
#: Minutes per open exercise: change a parameter or paste a few lines, re-run one section, read it.
_EXERCISE_MINUTES = 5
#: Minutes per graded exercise: write one function in `exercises/` until `make check-exercises`
#: says ok (the guide's earlier agenda gave two of them 30 minutes).
_GRADED_MINUTES = 15
#: Minutes per "Check yourself" question: think, say an answer, open the collapsed one.
_CHECK_MINUTES = 2
#: Minutes per code cell with an assert: what it proves, invariant or finding ("What to say").
_ASSERT_MINUTES = 1
#: Room times are rounded up to this many minutes.
_ROUND_TO = 5
#: The glossary is skimmed at the start and then used as a reference.
_GLOSSARY_MINUTES = 5
#: Questions at the end of a day.
_QUESTIONS_MINUTES = 15
#: A break comes before the next notebook once this many minutes were taught since the last one.
_BREAK_AFTER = 90
#: A short break, and lunch: the first break of a full day after _LUNCH_FROM minutes on the clock.
_BREAK_MINUTES = 15
_LUNCH_MINUTES = 60
_LUNCH_FROM = 180
#: Why the core is the core (each chapter's chapter.json says its level), as the guide says it.
_CORE_REASON = (
    "one line of argument: what EAGLE-3 is and that it is lossless (01, 02), how "
    "to read τ (03), how a drafter is trained (05), whether it pays on a MoE (06), and the "
    "checklist learners take home (08); 04 (serving in production) and 07 (the other drafting "
    "methods) are deep dives, which need the core and which the core never needs"
)


@dataclass(frozen=True)
class _Day:
    """A day plan: title, length in minutes (breaks included), lunch, and a glossary opening."""

    title: str
    limit: int
    lunch: bool
    glossary: bool = True


#: The plans the guide prints.
_HALF_DAY = _Day("A half day", 240, lunch=False)
_FULL_DAY = _Day("A full day", 480, lunch=True)
_SECOND_HALF_DAY = _Day("The deep dives, a second half day", 240, lunch=False, glossary=False)


@dataclass(frozen=True)
class _Notebook:
    """One notebook's counts (from its cells) and its measured run (from the record)."""

    number: str
    title: str
    words: int
    exercises: int
    graded: int
    checks: int
    asserts: int
    seconds: float
    peak_gib: float

    @property
    def reading_minutes(self) -> float:
        """Its markdown's words at _READING_WPM."""
        return self.words / _READING_WPM

    @property
    def exercise_minutes(self) -> int:
        """The allowance for its open and graded exercises."""
        return (self.exercises - self.graded) * _EXERCISE_MINUTES + self.graded * _GRADED_MINUTES

    @property
    def room_minutes(self) -> int:
        """Reading + run + exercises + checks + asserts, rounded up to _ROUND_TO minutes."""
        total = (
            self.reading_minutes
            + self.seconds / 60
            + self.exercise_minutes
            + self.checks * _CHECK_MINUTES
            + self.asserts * _ASSERT_MINUTES
        )
        return _ROUND_TO * math.ceil(total / _ROUND_TO - 1e-9)


@dataclass(frozen=True)
class _Row:
    """One row of a day plan: its start (minutes from the beginning), length and what."""

    start: int
    minutes: int
    what: str


# --------------------------------------------------------------------------- counting the cells


_FENCE = re.compile(r"```.*?```", re.S)
_TAG = re.compile(r"<[^>]+>")
_LINK = re.compile(r"\]\([^)]*\)")
_WORD = re.compile(r"\w+(?:['’-]\w+)*")
_HEADING = re.compile(r"^(?:#+\s*|\*\*)(.*)$")
_ITEM = re.compile(r"^\d+\.\s")
_ASSERT = re.compile(r"^\s*assert\b", re.M)


def _markdown_words(text: str) -> int:
    """Words of markdown prose: HTML tags and link targets left out."""
    return len(_WORD.findall(_LINK.sub("]", _TAG.sub(" ", text))))


def _block_of(line: str, current: str | None) -> str | None:
    """Which block a markdown line opens ('exercises', 'graded', 'checks', None) or continues."""
    heading = _HEADING.match(line)
    if not heading:
        return current
    title = heading[1].lower()
    if "check yourself" in title:
        return "checks"
    if "write it yourself" in title:
        return "graded"
    if title.startswith("exercises"):
        return "exercises"
    return None if line.startswith("#") else current


def _count_notebook(cells: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Reading words, exercises (and of them graded), Check-yourself questions, assert cells.

    Reading words are the markdown's outside fenced code and outside the exercise and
    Check-yourself blocks, whose reading the allowances per exercise and per question cover. A
    section headed "Appendix" is optional: its words and assert cells are not counted.
    """
    counts = {"words": 0, "exercises": 0, "graded": 0, "checks": 0, "asserts": 0}
    block: str | None = None
    optional = False  # inside an appendix: read by choice, so left out of room time
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code":
            counts["asserts"] += bool(_ASSERT.search(source)) and not optional
            continue
        if cell["cell_type"] != "markdown":
            continue
        for line in _FENCE.sub("", source).splitlines():
            if line.startswith("## "):
                optional = line[3:].lower().startswith("appendix")
            block = _block_of(line, block)
            if optional:
                continue
            if block is None:
                counts["words"] += _markdown_words(line)
            elif block != "checks" and _ITEM.match(line):
                counts["exercises"] += 1
                counts["graded"] += block == "graded" or "(graded)" in line
            elif block == "checks" and "<summary>" in line:
                counts["checks"] += 1
    return counts


def _title(cells: Sequence[Mapping[str, Any]]) -> str:
    """The notebook's title: its first heading after 'NN · '."""
    first = "".join(cells[0]["source"]).splitlines()[0]
    return first.lstrip("# ").split(" · ", 1)[-1]


def _notebook_paths(folder: Path = NOTEBOOKS_DIR) -> list[Path]:
    """The workbook's notebooks, in order."""
    return sorted(folder.glob("[0-9][0-9]_*.ipynb"))


# --------------------------------------------------------------------------- the record


def _load_record(path: Path = _RECORD) -> dict[str, Any]:
    """The record of measured runs, its fields checked."""
    record = json.loads(path.read_text(encoding="utf-8"))
    missing = [key for key in ("source", "date", "conditions", "notebooks") if key not in record]
    if missing:
        raise ValueError(f"{path}: no {', '.join(missing)}")
    for row in record["notebooks"]:
        if not (row.get("seconds", 0) > 0 and row.get("peak_gib", 0) > 0):
            raise ValueError(f"{path}: {row.get('notebook')} has no positive seconds and peak_gib")
    return record


def _load_notebooks(
    folder: Path = NOTEBOOKS_DIR, record: Mapping[str, Any] | None = None
) -> list[_Notebook]:
    """Every notebook counted from its cells, with its run from the record (each must have one)."""
    runs = {row["notebook"]: row for row in (record or _load_record())["notebooks"]}
    out = []
    for path in _notebook_paths(folder):
        if path.name not in runs:
            raise ValueError(
                f"{path.name} has no measured run in the record: `make run`, then "
                "`python -m kit.agenda record build/run-summary.json`"
            )
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        run = runs[path.name]
        out.append(
            _Notebook(
                path.name[:2],
                _title(cells),
                **_count_notebook(cells),
                seconds=run["seconds"],
                peak_gib=run["peak_gib"],
            )
        )
    return out


def _record_from_summary(
    summary: Mapping[str, Any], names: Sequence[str], conditions: str
) -> dict[str, Any]:
    """The record from `make run`'s build/run-summary.json, after checking its rows.

    Every notebook in `names` must be there with status ok, seconds > 0 and a peak; the date is
    that of the last notebook to finish.
    """
    rows = {r.get("notebook"): r for r in summary.get("notebooks", []) if isinstance(r, dict)}
    problems = []
    for name in names:
        row = rows.get(name)
        if row is None:
            problems.append(f"{name}: not in the summary")
        elif row.get("status") != "ok":
            problems.append(f"{name}: status {row.get('status')!r}, not 'ok'")
        elif not (row.get("seconds", 0) > 0 and row.get("peak_rss_gib", 0) > 0):
            problems.append(f"{name}: seconds {row.get('seconds')}, peak {row.get('peak_rss_gib')}")
    if problems:
        raise ValueError("the run summary cannot be recorded: " + "; ".join(problems))
    finished = max(str(rows[name].get("finished_at", "")) for name in names)
    return {
        "what": "each notebook's run time and peak memory under `make run` (learner sizes)",
        "source": "`make run` (kit.runner), its build/run-summary.json, recorded by "
        "`python -m kit.agenda record`",
        "date": finished[:10],
        "conditions": conditions,
        "peak": "the kernel plus the processes it starts, summed (kit.runner)",
        "notebooks": [
            {
                "notebook": name,
                "seconds": round(float(rows[name]["seconds"]), 1),
                "peak_gib": round(float(rows[name]["peak_rss_gib"]), 2),
            }
            for name in names
        ],
    }


def _write_record(summary_path: Path, conditions: str, out: Path = _RECORD) -> Path:
    """Check `make run`'s summary and write the record from it."""
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    names = [p.name for p in _notebook_paths()]
    record = _record_from_summary(summary, names, conditions)
    out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


# --------------------------------------------------------------------------- day plans


def _clock(minutes: int) -> str:
    """Minutes from the start as h:mm."""
    return f"{minutes // 60}:{minutes % 60:02d}"


def _plan_day(notebooks: Sequence[_Notebook], day: _Day) -> tuple[list[_Row], list[_Notebook]]:
    """The rows of the longest prefix of `notebooks` that fits the day, and the ones left out."""
    for count in range(len(notebooks), -1, -1):
        rows = _schedule(notebooks[:count], day)
        if rows[-1].start <= day.limit:
            return rows, list(notebooks[count:])
    raise AssertionError("an empty day always fits")  # pragma: no cover


def _schedule(notebooks: Sequence[_Notebook], day: _Day) -> list[_Row]:
    """Glossary, the notebooks with breaks between them, questions, and the end row."""
    rows = (
        [_Row(0, _GLOSSARY_MINUTES, "00 glossary (skim; then a reference)")] if day.glossary else []
    )
    taught, lunch_due = sum(r.minutes for r in rows), day.lunch
    for nb in notebooks:
        now = rows[-1].start + rows[-1].minutes if rows else 0
        if taught >= _BREAK_AFTER:
            if lunch_due and now >= _LUNCH_FROM:
                rows.append(_Row(now, _LUNCH_MINUTES, "lunch"))
                lunch_due = False
            else:
                rows.append(_Row(now, _BREAK_MINUTES, "break"))
            taught, now = 0, rows[-1].start + rows[-1].minutes
        rows.append(_Row(now, nb.room_minutes, f"{nb.number} {nb.title}"))
        taught += nb.room_minutes
    now = rows[-1].start + rows[-1].minutes if rows else 0
    rows.append(_Row(now, _QUESTIONS_MINUTES, "questions, and what to try at home"))
    end = now + _QUESTIONS_MINUTES
    rows.append(_Row(end, 0, f"end: {end} minutes"))
    return rows


# --------------------------------------------------------------------------- the guide's block


def _duration(minutes: int) -> str:
    """Minutes as 'H h MM min'."""
    return f"{minutes // 60} h {minutes % 60:02d} min"


def _constants_text(record: Mapping[str, Any]) -> str:
    """The record the times read, and every constant they use, as a list."""
    source = f"`{_RECORD.relative_to(REPO_ROOT)}`: {record['source']}; {record['date']}"
    return "\n".join(
        [
            "Every time below is computed by `python -m kit.agenda` from the notebooks and from "
            f"the record of their runs ({source}; {record['conditions']}).",
            "",
            f"- **Room time** of a notebook, rounded up to {_ROUND_TO} min: reading + run + "
            "exercises + check yourself + assert cells.",
            "- **Reading:** the markdown's words outside fenced code and outside the exercise and "
            f"Check-yourself blocks, at {_READING_WPM} words per minute: adults read English "
            'non-fiction at about 238 (Brysbaert 2019, "How many words do we read per minute?", '
            "Journal of Memory and Language, a meta-analysis), and text dense with "
            "notation, code names and figures a quarter slower.",
            "- **Appendix:** a section headed *Appendix* is optional reading; its words and "
            "assert cells are left out (its cells still run, so the run time includes them).",
            "- **Run:** the notebook's measured run time from the record (learners wait for it).",
            f"- **Exercises:** {_EXERCISE_MINUTES} min each (change a parameter or paste a few "
            f"lines, re-run a section, read it), {_GRADED_MINUTES} min for a graded one (write a "
            "function until `make check-exercises` says ok).",
            f"- **Check yourself:** {_CHECK_MINUTES} min per question (think, answer, open the "
            "collapsed answer).",
            f"- **Assert cells:** {_ASSERT_MINUTES} min per code cell with an assert (what to say "
            "there is below).",
            f"- **A day** starts with the glossary ({_GLOSSARY_MINUTES} min) and ends with "
            f"{_QUESTIONS_MINUTES} min of questions; a {_BREAK_MINUTES} min break comes before the "
            f"next notebook once {_BREAK_AFTER} min were taught since the last one, and in a full "
            f"day the first break after {_clock(_LUNCH_FROM)} is a {_LUNCH_MINUTES} min lunch.",
            f"- **The core path** ({', '.join(_core())}): {_CORE_REASON}. A plan takes the core in "
            f"that order while it fits (half day ≤ {_HALF_DAY.limit // 60} h, full day ≤ "
            f"{_FULL_DAY.limit // 60} h, breaks included); what does not fit waits for a deep-dive "
            "session, its time unchanged.",
        ]
    )


def _core() -> tuple[str, ...]:
    """The core path, in teaching order: the numbers of the chapters whose level is core."""
    return tuple(c.number for c in chapters.discover() if c.level == "core")


def _notebook_table(notebooks: Sequence[_Notebook]) -> str:
    """The per-notebook table: counts, allowances and room time."""
    lines = [
        "| # | notebook | path | words · reading | run · peak memory | exercises (graded) "
        "| check yourself | assert cells | room time |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for nb in notebooks:
        path = "core" if nb.number in _core() else "deep dive"
        lines.append(
            f"| {nb.number} | {nb.title} | {path} | {nb.words:,} · "
            f"{nb.reading_minutes:.0f} min | {nb.seconds:,.0f} s · {nb.peak_gib:.1f} GiB | "
            f"{nb.exercises} ({nb.graded}): {nb.exercise_minutes} min | {nb.checks}: "
            f"{nb.checks * _CHECK_MINUTES} min | {nb.asserts}: "
            f"{nb.asserts * _ASSERT_MINUTES} min | {nb.room_minutes} min |"
        )
    total = sum(nb.room_minutes for nb in notebooks)
    lines.append(f"| | all {len(notebooks)} | | | | | | | {total} min ({_duration(total)}) |")
    return "\n".join(lines)


def _plan_text(day: _Day, rows: Sequence[_Row], left: Sequence[_Notebook]) -> str:
    """One day plan: its title with its length, what it leaves out, and its rows."""
    end = rows[-1].start
    taught = [r.what.split()[0] for r in rows if r.what[:2].isdigit() and r.what[:2] != "00"]
    head = f"**{day.title} ({_duration(end)}).** Notebooks {', '.join(taught) or 'none'}"
    head += f"; left for later: {', '.join(nb.number for nb in left)}." if left else "."
    table = ["| start | minutes | what |", "|---|---|---|"]
    table += [f"| {_clock(r.start)} | {r.minutes or ''} | {r.what} |" for r in rows]
    return head + "\n\n" + "\n".join(table)


def _agenda_markdown(notebooks: Sequence[_Notebook], record: Mapping[str, Any]) -> str:
    """The guide's agenda block: the constants, the table, and the half-day and full-day plans."""
    by_number = {nb.number: nb for nb in notebooks}
    core = [by_number[n] for n in _core() if n in by_number]
    half, half_left = _plan_day(core, _HALF_DAY)
    full, dropped = _plan_day(core, _FULL_DAY)
    deep = dropped + [nb for nb in notebooks if nb.number not in _core()]
    second, later = _plan_day(deep, _SECOND_HALF_DAY)
    parts = [
        _constants_text(record),
        _notebook_table(notebooks),
        _plan_text(_HALF_DAY, half, half_left),
        _plan_text(_FULL_DAY, full, dropped),
        _plan_text(_SECOND_HALF_DAY, second, later),
    ]
    return "\n\n".join(parts)


def _rewrite_guide(path: Path = _GUIDE, block: str | None = None) -> bool:
    """Replace the guide's agenda block with the computed one; True when its text changed."""
    text = path.read_text(encoding="utf-8")
    if _BLOCK_START not in text or _BLOCK_END not in text:
        raise ValueError(f"{path} has no agenda block ({_BLOCK_START!r} … {_BLOCK_END!r})")
    block = block if block is not None else _agenda_markdown(_load_notebooks(), _load_record())
    head, rest = text.split(_BLOCK_START, 1)
    tail = rest.split(_BLOCK_END, 1)[1]
    new = f"{head}{_BLOCK_START}\n{block}\n{_BLOCK_END}{tail}"
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def _guide_block(path: Path = _GUIDE) -> str:
    """The agenda block as the guide has it now."""
    text = path.read_text(encoding="utf-8")
    return text.split(_BLOCK_START, 1)[1].split(_BLOCK_END, 1)[0].strip("\n")


# --------------------------------------------------------------------------- command line


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line: print (no command), guide, or record SUMMARY."""
    parser = argparse.ArgumentParser(
        prog="python -m kit.agenda", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("guide", help=f"rewrite the agenda block of {_GUIDE.relative_to(REPO_ROOT)}")
    rec = sub.add_parser("record", help=f"rewrite {_RECORD.relative_to(REPO_ROOT)} from a run")
    rec.add_argument(
        "summary", type=Path, nargs="?", default=BUILD_DIR / "run-summary.json", help="its summary"
    )
    rec.add_argument(
        "--conditions",
        default=None,
        help="the machine and how it ran (default: this machine, from helpers.common.envinfo)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the agenda, rewrite the guide's block, or record a run; 0 on success."""
    args = _parse_args(argv)
    try:
        if args.command == "record":
            from helpers.common.envinfo import device_description
            from kit.manifest import write_manifest

            conditions = args.conditions or f"{device_description()}, `make run` at learner sizes"
            out = _write_record(args.summary, conditions)
            manifest = write_manifest(DATA_DIR)
            print(f"wrote {out} and {manifest}; now `python -m kit.agenda guide`")
        elif args.command == "guide":
            changed = _rewrite_guide()
            print(f"{_GUIDE}: {'rewritten' if changed else 'already current'}")
        else:
            print(_agenda_markdown(_load_notebooks(), _load_record()))
    except (OSError, ValueError) as err:
        print(f"[agenda] {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
