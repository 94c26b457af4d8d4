"""docs/instructors.md: its agenda is the one kit.agenda computes from the notebooks and the record of
their runs, its day plans add up and fit, and its assert rows name assert cells that exist, every
one of them."""

from __future__ import annotations

import json
import re

import pytest

from helpers.common.paths import NOTEBOOKS_DIR, REPO_ROOT
from kit import agenda

GUIDE = (REPO_ROOT / "docs" / "instructors.md").read_text()
NOTEBOOKS = sorted(p.name[:2] for p in NOTEBOOKS_DIR.glob("0[1-9]_*.ipynb"))
REGENERATE = "the guide's agenda is stale: run `python -m kit.agenda guide`"


def cells_of(line: str) -> list[str]:
    """A markdown table row's cells, splitting on '|' outside backticks."""
    cells, current, in_code = [], "", False
    for ch in line.strip().strip("|"):
        in_code ^= ch == "`"
        if ch == "|" and not in_code:
            cells.append(current.strip())
            current = ""
        else:
            current += ch
    return [*cells, current.strip()]


def agenda_section() -> str:
    """The guide's Agenda section."""
    return GUIDE.split("\n## Agenda\n", 1)[1].split("\n## ", 1)[0]


# --------------------------------------------------------------------------- the agenda


def test_the_agenda_block_is_the_computed_one() -> None:
    computed = agenda._agenda_markdown(agenda._load_notebooks(), agenda._load_record())
    assert agenda._guide_block(agenda._GUIDE) == computed, REGENERATE


def test_every_notebook_time_in_the_guide_is_computed() -> None:
    lines = agenda_section().splitlines()
    header = cells_of(next(line for line in lines if line.startswith("| # | notebook |")))
    rows = {
        cells[0]: dict(zip(header, cells))
        for cells in map(cells_of, lines)
        if re.fullmatch(r"\d\d", cells[0]) and len(cells) == len(header)
    }
    notebooks = agenda._load_notebooks()
    assert sorted(rows) == [nb.number for nb in notebooks] == NOTEBOOKS, REGENERATE
    for nb in notebooks:
        row = rows[nb.number]
        assert row["room time"] == f"{nb.room_minutes} min", (nb.number, row, REGENERATE)
        homework = f"{nb.minutes(exercises=False)} min"
        assert row["exercises as homework"] == homework, (nb.number, row, REGENERATE)
        assert row["code lines · reading"].startswith(f"{nb.code_lines:,} · "), (nb.number, row)
        assert row["run · peak memory"] == f"{nb.seconds:,.0f} s · {nb.peak_gib:.1f} GiB", row


def plans() -> dict[str, list[tuple[int, int | None, str]]]:
    """Each day plan of the guide under its bold title: (start minute, minutes, what) per row."""
    found = {}
    plan = re.compile(r"^\*\*([^*\n]+)\*\*[^\n]*\n\n(\| start \|.*?)(?:\n\n|\n<!--)", re.S | re.M)
    for title, table in plan.findall(agenda_section()):
        rows = []
        for line in table.splitlines()[2:]:
            start, minutes, what = cells_of(line)
            h, m = start.split(":")
            rows.append((60 * int(h) + int(m), int(minutes) if minutes else None, what))
        found[title] = rows
    return found


CORE_DAY = ("The core day, exercises in the room", "The core day, exercises as homework")
LIMITS = {"A half day": 240, CORE_DAY[0]: 480, CORE_DAY[1]: 480}
LIMITS["The deep dives, a second half day"] = 240


def test_each_plan_adds_up_and_says_if_it_fits_its_day() -> None:
    found = plans()
    assert {t.split(" (")[0] for t in found} == set(LIMITS), list(found)
    for title, rows in found.items():
        for (start, minutes, what), (nxt, _, _) in zip(rows, rows[1:]):
            assert start + minutes == nxt, f"{title}: '{what}' does not end when the next starts"
        end, _, last = rows[-1]
        assert last == f"end: {end} minutes", (title, last)
        stated = re.search(r"\((\d+) h (\d+) min\)", title)
        assert stated and 60 * int(stated[1]) + int(stated[2]) == end, title
        name = title.split(" (")[0]
        if name in CORE_DAY:  # both variants printed, each saying whether it fits
            assert ("does not fit" not in title) == (end <= LIMITS[name]), title
        else:
            assert end <= LIMITS[name], title


def test_the_core_day_fits_eight_hours_in_one_variant() -> None:
    ends = {title.split(" (")[0]: rows[-1][0] for title, rows in plans().items()}
    assert min(ends[name] for name in CORE_DAY) <= 480, ends
    assert "**The core day fits 8 h" in agenda_section()


def test_the_core_day_and_the_deep_dives_teach_every_notebook_once() -> None:
    taught = {
        title.split(" (")[0]: [w.split()[0] for _, _, w in rows if re.match(r"0[1-9] ", w)]
        for title, rows in plans().items()
    }
    deep, core = taught["The deep dives, a second half day"], taught[CORE_DAY[0]]
    assert taught[CORE_DAY[1]] == core, taught  # both variants teach the whole core
    assert sorted(core + deep) == NOTEBOOKS, taught
    assert set(taught["A half day"]) <= set(core), taught


def test_the_agenda_names_no_commit() -> None:
    hashes = re.findall(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b", agenda_section())
    assert hashes == [], hashes


# --------------------------------------------------------------------------- the assert rows


def assert_cells(nb: str) -> dict[int, str]:
    """Index -> source of each code cell of notebook `nb` with an assert statement."""
    path = next(NOTEBOOKS_DIR.glob(f"{nb}_*.ipynb"))
    cells = json.loads(path.read_text())["cells"]
    sources = {i: "".join(c["source"]) for i, c in enumerate(cells) if c["cell_type"] == "code"}
    return {i: s for i, s in sources.items() if re.search(r"^\s*assert\b", s, re.M)}


def quoted(snippet: str, source: str) -> bool:
    """True when the snippet's parts between '…' occur in `source` in that order."""
    at = 0
    for part in (p.strip() for p in snippet.split("…")):
        found = source.find(part, at)
        if part and found < 0:
            return False
        at = found + len(part) if part else at
    return True


def guide_snippets(nb: str) -> list[list[str]]:
    """The code snippets of each row's first column in the guide's assert section for `nb`."""
    section = re.search(rf"\n### {nb} · .*?\n(.*?)(?=\n### |\n## )", GUIDE, re.S)
    assert section, f"docs/instructors.md has no assert section for notebook {nb}"
    rows = [cells_of(line)[0] for line in section[1].splitlines() if line.startswith("| ")]
    return [re.findall(r"`([^`]+)`", first) for first in rows[1:]]  # after the header


@pytest.mark.parametrize("nb", NOTEBOOKS)
def test_every_assert_row_quotes_one_assert_cell(nb: str) -> None:
    cells = assert_cells(nb)
    rows = guide_snippets(nb)
    assert rows, f"notebook {nb}: no assert rows"
    for snippets in rows:
        assert snippets, f"notebook {nb}: an assert row quotes no code"
        for snippet in snippets:
            hits = [i for i, source in cells.items() if quoted(snippet, source)]
            assert len(hits) == 1, f"notebook {nb}: `{snippet}` is in assert cells {hits}"


@pytest.mark.parametrize("nb", NOTEBOOKS)
def test_every_assert_cell_has_a_row(nb: str) -> None:
    cells = assert_cells(nb)
    covered = {
        i
        for snippets in guide_snippets(nb)
        for snippet in snippets
        for i, source in cells.items()
        if quoted(snippet, source)
    }
    missing = {i: cells[i].strip().splitlines()[-1] for i in sorted(set(cells) - covered)}
    assert not missing, f"notebook {nb}: assert cells without a row in the guide: {missing}"
