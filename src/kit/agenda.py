"""The instructors' agenda, computed from the notebooks and the record of their measured run times.

    python -m kit.agenda                   (print the agenda: the table and the day plans)
    python -m kit.agenda guide             (rewrite the agenda block of docs/instructors.md)
    python -m kit.agenda record build/run-summary.json [--conditions TEXT]
                                           (rewrite data/measurements/cpu-notebook-runs.json)

A notebook's room time is the reading time of its markdown and of its code on screen, a talk time
per section, its measured run time from the record, and an allowance per exercise, per "Check
yourself" question and per assert cell, each counted from the notebook; the constants below say
how much and why. Cells tagged "optional" (cell metadata) are a reading list, counted apart and not
in the day. The core day is computed twice, exercises done in the room and set as homework, and
says whether each fits; the numbers are never shrunk to make a plan fit.
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
#: Non-blank code lines read on screen per minute. A line of the notebooks' code holds 6 to 8 words
#: (runs of letters and digits, 01-08), so 20 lines a minute is 120 to 160 words a minute, below the
#: prose rate: code is read back and forth, not once through (Busjahn et al. 2015, "Eye movements
#: in code reading", ICPC), and the instructor says what each part does.
_CODE_LINES_PER_MINUTE = 20
#: Minutes of talk per `## ` section taught: say what it asks and what to look at, then sum it up.
_TALK_MINUTES_PER_SECTION = 2
#: The cell tag (metadata "tags") of optional reading: counted apart, a reading list, not the day.
_OPTIONAL_TAG = "optional"
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
_CORE_DAY = _Day("The core day", 480, lunch=True)
_SECOND_HALF_DAY = _Day("The deep dives, a second half day", 240, lunch=False, glossary=False)


@dataclass(frozen=True)
class _Notebook:
    """One notebook's counts (from its cells) and its measured run (from the record)."""

    number: str
    title: str
    words: int
    code_lines: int
    sections: int
    exercises: int
    graded: int
    checks: int
    asserts: int
    optional_words: int
    optional_code_lines: int
    seconds: float
    peak_gib: float
    optional_titles: tuple[str, ...] = ()

    @property
    def reading_minutes(self) -> float:
        """Its markdown's words at _READING_WPM."""
        return self.words / _READING_WPM

    @property
    def code_minutes(self) -> float:
        """Its code lines on screen at _CODE_LINES_PER_MINUTE."""
        return self.code_lines / _CODE_LINES_PER_MINUTE

    @property
    def talk_minutes(self) -> int:
        """_TALK_MINUTES_PER_SECTION per section taught."""
        return self.sections * _TALK_MINUTES_PER_SECTION

    @property
    def exercise_minutes(self) -> int:
        """The allowance for its open and graded exercises."""
        return (self.exercises - self.graded) * _EXERCISE_MINUTES + self.graded * _GRADED_MINUTES

    @property
    def optional_minutes(self) -> float:
        """Reading its optional cells: their words and their code lines, at the same rates."""
        return (
            self.optional_words / _READING_WPM + self.optional_code_lines / _CODE_LINES_PER_MINUTE
        )

    def minutes(self, exercises: bool = True) -> int:
        """Reading + code + talk + run + checks + asserts, and the exercises when `exercises`,
        rounded up to _ROUND_TO minutes."""
        total = (
            self.reading_minutes
            + self.code_minutes
            + self.talk_minutes
            + self.seconds / 60
            + (self.exercise_minutes if exercises else 0)
            + self.checks * _CHECK_MINUTES
            + self.asserts * _ASSERT_MINUTES
        )
        return _round_up(total)

    @property
    def room_minutes(self) -> int:
        """Its room time with the exercises done in the room."""
        return self.minutes(exercises=True)


def _round_up(minutes: float) -> int:
    """Minutes rounded up to _ROUND_TO."""
    return _ROUND_TO * math.ceil(minutes / _ROUND_TO - 1e-9)


@dataclass(frozen=True)
class _Row:
    """One row of a day plan: its start (minutes from the beginning), length and what."""

    start: int
    minutes: int
    what: str


# --------------------------------------------------------------------------- counting the cells


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


def _is_optional(cell: Mapping[str, Any]) -> bool:
    """True for a cell tagged _OPTIONAL_TAG in its metadata."""
    return _OPTIONAL_TAG in cell.get("metadata", {}).get("tags", [])


def _count_notebook(cells: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Reading words, code lines, sections, exercises (and of them graded), Check-yourself
    questions and assert cells; and apart, the words and code lines of the optional cells.

    Reading words are the markdown's outside fenced code and outside the exercise and
    Check-yourself blocks, whose reading the allowances per exercise and per question cover; code
    lines are the non-blank lines of code cells and of fenced code outside those blocks; a section
    is a `## ` heading that opens neither block. A cell tagged optional counts only its words and
    code lines, into the optional counts.
    """
    counts = dict.fromkeys(
        ("words", "code_lines", "sections", "exercises", "graded", "checks", "asserts"), 0
    )
    counts |= {"optional_words": 0, "optional_code_lines": 0}
    block: str | None = None
    for cell in cells:
        source = "".join(cell["source"])
        optional = _is_optional(cell)
        words, code_lines = (
            ("optional_words", "optional_code_lines") if optional else ("words", "code_lines")
        )
        if cell["cell_type"] == "code":
            counts[code_lines] += sum(bool(line.strip()) for line in source.splitlines())
            counts["asserts"] += bool(_ASSERT.search(source)) and not optional
            continue
        if cell["cell_type"] != "markdown":
            continue
        fenced = False
        for line in source.splitlines():
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            if fenced:
                counts[code_lines] += bool(line.strip()) and block is None
                continue
            block = _block_of(line, block)
            if block is None:
                counts[words] += _markdown_words(line)
                counts["sections"] += line.startswith("## ") and not optional
            elif optional:
                continue
            elif block != "checks" and _ITEM.match(line):
                counts["exercises"] += 1
                counts["graded"] += block == "graded" or "(graded)" in line
            elif block == "checks" and "<summary>" in line:
                counts["checks"] += 1
    return counts


def _optional_titles(cells: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The heading (or bold lead) of each run of optional cells, in order."""
    titles: list[str] = []
    before = False
    for cell in cells:
        optional = _is_optional(cell)
        if optional and not before:
            first = "".join(cell["source"]).strip().splitlines()[0]
            heading = _HEADING.match(first)
            titles.append((heading[1] if heading else first).split("**")[0].strip().rstrip("."))
        before = optional
    return tuple(titles)


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


def run_seconds(path: Path = _RECORD) -> dict[str, float]:
    """Each notebook's measured run time in the record (`make run`, learner sizes), by file name."""
    return {row["notebook"]: float(row["seconds"]) for row in _load_record(path)["notebooks"]}


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
                optional_titles=_optional_titles(cells),
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


def _fits(rows: Sequence[_Row], day: _Day) -> bool:
    """True when a schedule's end row is within the day's length."""
    return rows[-1].start <= day.limit


def _plan_day(
    notebooks: Sequence[_Notebook], day: _Day, exercises: bool = True
) -> tuple[list[_Row], list[_Notebook]]:
    """The rows of the longest prefix of `notebooks` that fits the day, and the ones left out."""
    for count in range(len(notebooks), -1, -1):
        rows = _schedule(notebooks[:count], day, exercises)
        if _fits(rows, day):
            return rows, list(notebooks[count:])
    raise AssertionError("an empty day always fits")  # pragma: no cover


def _schedule(notebooks: Sequence[_Notebook], day: _Day, exercises: bool = True) -> list[_Row]:
    """Glossary, the notebooks with breaks between them, questions, and the end row; the
    notebooks' exercises in the room when `exercises`, else set as homework."""
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
        rows.append(_Row(now, nb.minutes(exercises), f"{nb.number} {nb.title}"))
        taught += nb.minutes(exercises)
    now = rows[-1].start + rows[-1].minutes if rows else 0
    rows.append(_Row(now, _QUESTIONS_MINUTES, "questions, and what to try at home"))
    end = now + _QUESTIONS_MINUTES
    rows.append(_Row(end, 0, f"end: {end} minutes"))
    return rows


def _hours(minutes: int) -> str:
    """Minutes as '8 h' when whole hours, else as _duration does."""
    return _duration(minutes).replace(" h 00 min", " h")


def _verdict(rows: Sequence[_Row], day: _Day) -> str:
    """'fits 8 h' or 'does not fit 8 h, 1 h 05 min over', for a schedule and its day."""
    over = rows[-1].start - day.limit
    limit = _hours(day.limit)
    return f"fits {limit}" if over <= 0 else f"does not fit {limit}, {_duration(over)} over"


def _core_verdict(in_room: Sequence[_Row], homework: Sequence[_Row], day: _Day) -> str:
    """Which variant of the core day fits the day, in one bold sentence with both lengths."""
    room, home = _duration(in_room[-1].start), _duration(homework[-1].start)
    room_over, limit = _duration(in_room[-1].start - day.limit), _hours(day.limit)
    if _fits(in_room, day):
        return f"**The core day fits {limit} with the exercises done in the room ({room}).**"
    if _fits(homework, day):
        return (
            f"**The core day fits {limit} only with the exercises set as homework "
            f"({home}); done in the room they make it {room}, {room_over} over.** The half "
            "day and the deep dives below set them as homework too."
        )
    return (
        f"**The core day {_verdict(homework, day)}, even with the exercises set as homework "
        f"({home}; {room} with them done in the room).**"
    )


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
            f"- **Room time** of a notebook, rounded up to {_ROUND_TO} min: reading + code + talk "
            "+ run + exercises + check yourself + assert cells; *as homework*, the same without "
            "the exercises.",
            "- **Reading:** the markdown's words outside fenced code and outside the exercise and "
            f"Check-yourself blocks, at {_READING_WPM} words per minute: adults read English "
            'non-fiction at about 238 (Brysbaert 2019, "How many words do we read per minute?", '
            "Journal of Memory and Language, a meta-analysis), and text dense with "
            "notation, code names and figures a quarter slower.",
            "- **Code:** the non-blank lines of the code cells (and of fenced code outside the "
            f"exercise blocks), at {_CODE_LINES_PER_MINUTE} lines per minute: a line of the "
            "notebooks' code holds 6 to 8 words, so this is 120 to 160 words a minute, below the "
            "prose rate, since code is read back and forth rather than once through (Busjahn et "
            'al. 2015, "Eye movements in code reading") and the instructor says what each part '
            "does.",
            f"- **Talk:** {_TALK_MINUTES_PER_SECTION} min per `##` section taught (say what it "
            "asks and what to look at, then sum it up); the exercise and Check-yourself "
            "sections have their own allowances.",
            "- **Run:** the notebook's measured run time from the record (learners wait for it); "
            "it includes the optional cells, which run with the rest.",
            f"- **Exercises:** {_EXERCISE_MINUTES} min each (change a parameter or paste a few "
            f"lines, re-run a section, read it), {_GRADED_MINUTES} min for a graded one (write a "
            "function until `make check-exercises` says ok).",
            f"- **Check yourself:** {_CHECK_MINUTES} min per question (think, answer, open the "
            "collapsed answer).",
            f"- **Assert cells:** {_ASSERT_MINUTES} min per code cell with an assert (what to say "
            "there is below).",
            f'- **Optional reading:** cells tagged `"{_OPTIONAL_TAG}"` in their metadata (from a '
            "section's heading, or a bold lead inside a section, to the next `##` heading) are a "
            "reading list, counted apart at the same reading rates and in no plan: their words, "
            "code lines, sections and asserts are not room time.",
            f"- **A day** starts with the glossary ({_GLOSSARY_MINUTES} min) and ends with "
            f"{_QUESTIONS_MINUTES} min of questions; a {_BREAK_MINUTES} min break comes before the "
            f"next notebook once {_BREAK_AFTER} min were taught since the last one, and in a full "
            f"day the first break after {_clock(_LUNCH_FROM)} is a {_LUNCH_MINUTES} min lunch.",
            f"- **The core path** ({', '.join(_core())}): {_CORE_REASON}. The core day is all of "
            f"it in {_CORE_DAY.limit // 60} h, breaks and lunch included, computed twice, "
            "exercises done in the room and set as homework, each saying whether it fits; the "
            "half day and the deep dives take notebooks in order while they fit, with the "
            "exercises as the core day that fits has them. Nothing is shrunk to make a plan fit.",
        ]
    )


def _core() -> tuple[str, ...]:
    """The core path, in teaching order: the numbers of the chapters whose level is core."""
    return tuple(c.number for c in chapters.discover() if c.level == "core")


def _notebook_table(notebooks: Sequence[_Notebook]) -> str:
    """The per-notebook table: counts, allowances and room time, with and without exercises."""
    lines = [
        "| # | notebook | path | words · reading | code lines · reading | sections · talk "
        "| run · peak memory | exercises (graded) | check yourself | assert cells "
        "| room time | exercises as homework |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for nb in notebooks:
        path = "core" if nb.number in _core() else "deep dive"
        lines.append(
            f"| {nb.number} | {nb.title} | {path} | {nb.words:,} · "
            f"{nb.reading_minutes:.0f} min | {nb.code_lines:,} · {nb.code_minutes:.0f} min | "
            f"{nb.sections} · {nb.talk_minutes} min | "
            f"{nb.seconds:,.0f} s · {nb.peak_gib:.1f} GiB | "
            f"{nb.exercises} ({nb.graded}): {nb.exercise_minutes} min | {nb.checks}: "
            f"{nb.checks * _CHECK_MINUTES} min | {nb.asserts}: "
            f"{nb.asserts * _ASSERT_MINUTES} min | {nb.room_minutes} min | "
            f"{nb.minutes(exercises=False)} min |"
        )
    total = sum(nb.room_minutes for nb in notebooks)
    home = sum(nb.minutes(exercises=False) for nb in notebooks)
    lines.append(
        f"| | all {len(notebooks)} | | | | | | | | | {total} min ({_duration(total)}) "
        f"| {home} min ({_duration(home)}) |"
    )
    return "\n".join(lines)


def _reading_list(notebooks: Sequence[_Notebook]) -> str:
    """The optional reading, notebook by notebook: what it is, its words and code lines, minutes."""
    rows = [nb for nb in notebooks if nb.optional_titles]
    if not rows:
        return f'**Optional reading.** No cell is tagged `"{_OPTIONAL_TAG}"`.'
    total = sum(nb.optional_minutes for nb in rows)
    lines = [
        f"**Optional reading ({total:.0f} min),** in no plan: learners read it after the day, or "
        "the instructor shows it when there is time.",
        "",
        "| # | sections | words · code lines | reading |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {nb.number} | {'; '.join(nb.optional_titles)} | {nb.optional_words:,} · "
        f"{nb.optional_code_lines:,} | {nb.optional_minutes:.0f} min |"
        for nb in rows
    ]
    return "\n".join(lines)


def _plan_text(
    day: _Day, rows: Sequence[_Row], left: Sequence[_Notebook], exercises: bool = True
) -> str:
    """One day plan: its title with its length, what it leaves out, and its rows."""
    end = rows[-1].start
    taught = [r.what.split()[0] for r in rows if r.what[:2].isdigit() and r.what[:2] != "00"]
    head = f"**{day.title} ({_duration(end)}).** Notebooks {', '.join(taught) or 'none'}"
    head += f"; left for later: {', '.join(nb.number for nb in left)}" if left else ""
    head += "." if exercises else "; exercises as homework."
    table = ["| start | minutes | what |", "|---|---|---|"]
    table += [f"| {_clock(r.start)} | {r.minutes or ''} | {r.what} |" for r in rows]
    return head + "\n\n" + "\n".join(table)


def _core_day_text(
    day: _Day, rows: Sequence[_Row], core: Sequence[_Notebook], exercises: bool
) -> str:
    """One variant of the core day: its length, whether it fits, the homework, and its rows."""
    end = rows[-1].start
    where = "in the room" if exercises else "as homework"
    head = f"**{day.title}, exercises {where} ({_duration(end)}): {_verdict(rows, day)}.**"
    if not exercises:
        home = sum(nb.exercise_minutes for nb in core)
        parts = [f"{nb.number}: {nb.exercises} ({nb.exercise_minutes} min)" for nb in core]
        head += f" Homework, exercises per notebook: {', '.join(parts)}; {_duration(home)} in all."
    table = ["| start | minutes | what |", "|---|---|---|"]
    table += [f"| {_clock(r.start)} | {r.minutes or ''} | {r.what} |" for r in rows]
    return head + "\n\n" + "\n".join(table)


def _agenda_markdown(notebooks: Sequence[_Notebook], record: Mapping[str, Any]) -> str:
    """The guide's agenda block: the constants, the tables, the core day both ways, the plans."""
    by_number = {nb.number: nb for nb in notebooks}
    core = [by_number[n] for n in _core() if n in by_number]
    in_room, homework = (_schedule(core, _CORE_DAY, exercises=e) for e in (True, False))
    exercises = _fits(in_room, _CORE_DAY)  # the plans below follow the core day that fits
    half, half_left = _plan_day(core, _HALF_DAY, exercises)
    deep = [nb for nb in notebooks if nb.number not in _core()]
    second, later = _plan_day(deep, _SECOND_HALF_DAY, exercises)
    parts = [
        _constants_text(record),
        _notebook_table(notebooks),
        _reading_list(notebooks),
        _core_verdict(in_room, homework, _CORE_DAY),
        _core_day_text(_CORE_DAY, in_room, core, exercises=True),
        _core_day_text(_CORE_DAY, homework, core, exercises=False),
        _plan_text(_HALF_DAY, half, half_left, exercises),
        _plan_text(_SECOND_HALF_DAY, second, later, exercises),
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
