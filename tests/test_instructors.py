"""docs/instructors.md: the agendas add up, the run times are the README's, and every notebook has
its assert rows."""

from __future__ import annotations

import re

import pytest

from helpers.common.paths import NOTEBOOKS_DIR, REPO_ROOT

GUIDE = (REPO_ROOT / "docs" / "instructors.md").read_text()
README = (REPO_ROOT / "README.md").read_text()
#: A half day is at most four hours, breaks included.
HALF_DAY_MINUTES = 240


def agendas() -> dict[str, list[tuple[int, int | None, str]]]:
    """Each agenda table under its bold title: (start minute, minutes or None, what) per row."""
    found = {}
    for title, table in re.findall(r"\*\*(A [^*]+)\*\*.*?\n\n(\| start \|.*?)\n\n", GUIDE, re.S):
        rows = []
        for line in table.splitlines()[2:]:
            start, minutes, what = (c.strip() for c in line.strip("|").split("|"))
            h, m = start.split(":")
            rows.append((60 * int(h) + int(m), int(minutes) if minutes else None, what))
        found[title] = rows
    return found


def test_each_agenda_adds_up() -> None:
    tables = agendas()
    assert {t.split(" (")[0] for t in tables} == {"A half day", "A full day"}, list(tables)
    for title, rows in tables.items():
        for (start, minutes, what), (nxt, _, _) in zip(rows, rows[1:]):
            assert start + minutes == nxt, (
                f"{title}: '{what}' does not end when the next row starts"
            )
        end, _, last = rows[-1]
        assert f"{end} minutes" in last, (title, last)
        stated = re.search(r"\((\d+) h (\d+) min\)", title)
        assert stated and 60 * int(stated[1]) + int(stated[2]) == end, title
    half = next(rows for t, rows in tables.items() if t.startswith("A half day"))
    assert half[-1][0] <= HALF_DAY_MINUTES


def test_the_full_day_covers_every_notebook_and_the_half_day_the_core() -> None:
    tables = agendas()
    full = " ".join(w for t, rows in tables.items() if "full" in t for _, _, w in rows)
    half = " ".join(w for t, rows in tables.items() if "half" in t for _, _, w in rows)
    for nb in ("01", "02", "03", "04", "05", "06", "07", "08"):
        assert f"{nb} " in full, nb
    for nb in ("01", "02", "03", "05", "06"):
        assert f"{nb} " in half, nb


def _run_times(text: str, column: int) -> dict[str, str]:
    """Notebook number -> the 'N s · M GiB' cell of a markdown table's column."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > column and re.fullmatch(r"0[1-8]", cells[0]):
            out[cells[0]] = cells[column]
    return out


def test_the_run_times_are_the_readmes() -> None:
    readme = {n: t for n, t in _run_times(README, 3).items() if "GiB" in t}
    guide = {n: t for n, t in _run_times(GUIDE, 2).items() if "GiB" in t}
    assert len(readme) == 8 and guide == readme, (guide, readme)


@pytest.mark.parametrize("nb", sorted(p.name[:2] for p in NOTEBOOKS_DIR.glob("0[1-8]_*.ipynb")))
def test_every_notebook_has_assert_rows(nb: str) -> None:
    section = re.search(rf"\n### {nb} · .*?\n(.*?)(?=\n### |\n## )", GUIDE, re.S)
    assert section, f"docs/instructors.md has no assert section for notebook {nb}"
    rows = [line for line in section[1].splitlines() if line.startswith("| `")]
    assert rows, f"notebook {nb}: no assert rows"
