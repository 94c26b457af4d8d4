"""kit.agenda: counting a notebook's cells (code on screen and optional cells included), room times,
day plans that fit or drop notebooks, the core day's verdict, and the record of run times written
from `make run`'s summary after checking it."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest

from kit import agenda


def md(text: str) -> dict:
    """A markdown cell."""
    return {"cell_type": "markdown", "source": text.splitlines(keepends=True)}


def code(text: str) -> dict:
    """A code cell."""
    return {"cell_type": "code", "source": text.splitlines(keepends=True)}


def optional(cell: dict) -> dict:
    """The cell, tagged as optional reading."""
    return cell | {"metadata": {"tags": ["parameters", agenda._OPTIONAL_TAG]}}


CELLS = [
    md("# 09 · A test notebook\n\nSix words of prose to read.\n"),
    code("x = 1\nassert x == 1\n"),
    code("y = 2  # no assert here: 'assert' in a comment does not count\n"),
    code("    assert y\n"),
    md(
        "## 1. Section\n\nA [link text](https://example.com/very/long/url) and <b>bold</b> words.\n"
    ),
    md(
        "## Summary\n\n- one point\n\n**Exercises**\n1. Change `K` and re-run.\n"
        "2. Another one, with code:\n   ```python\n   print('these words are code')\n   ```\n"
        "3. **Write it yourself (graded).** `exercises/x.py`\n\n"
        "**Check yourself**\n\n<details><summary>Why?</summary>Because.</details>\n\n"
        "<details><summary>Why not?</summary>Because not.</details>\n"
    ),
    md("## Write it yourself (graded)\n\n4. `exercises/y.py`: the rule.\n"),
]


def test_count_notebook_counts_each_kind() -> None:
    counts = agenda._count_notebook(CELLS)
    assert counts["asserts"] == 2
    assert counts["code_lines"] == 4  # the code cells'; the exercise's fenced code is its own
    assert counts["sections"] == 2  # "1. Section" and "Summary"; the graded block has its own
    assert (counts["optional_words"], counts["optional_code_lines"]) == (0, 0)
    assert (counts["exercises"], counts["graded"]) == (4, 2)
    assert counts["checks"] == 2
    # Headings and prose outside the exercise and check blocks; link targets and tags left out.
    expected = sum(
        agenda._markdown_words(t)
        for t in (
            "09 · A test notebook",
            "Six words of prose to read.",
            "1. Section",
            "A [link text] and bold words.",
            "Summary",
            "- one point",
        )
    )
    assert counts["words"] == expected


SECTION = [
    md("## Appendix. A detour\n\nTen words here are optional reading for the curious learner.\n"),
    code("x = 1\n\nassert x == 1\n"),
    md("**More.** Prose and code:\n\n```python\nprint(1)\n```\n"),
]
TEAR_DOWN = [md("## Tear down\n\nStop it.\n"), code("assert True\n")]


def test_optional_cells_are_counted_apart_until_untagged_cells() -> None:
    base = agenda._count_notebook(CELLS)
    plain = agenda._count_notebook(CELLS + SECTION + TEAR_DOWN)
    tagged = agenda._count_notebook(CELLS + [optional(c) for c in SECTION] + TEAR_DOWN)
    section_words = sum(
        map(agenda._markdown_words, ("Appendix. A detour", "More. Prose and code:"))
    )
    section_words += agenda._markdown_words("Ten words here are optional reading for the curious")
    section_words += agenda._markdown_words("learner.")
    assert plain["words"] == tagged["words"] + section_words
    assert (plain["code_lines"], tagged["code_lines"]) == (
        base["code_lines"] + 4,
        base["code_lines"] + 1,
    )
    assert (tagged["optional_words"], tagged["optional_code_lines"]) == (section_words, 3)
    assert (plain["asserts"], tagged["asserts"]) == (base["asserts"] + 2, base["asserts"] + 1)
    assert (plain["sections"], tagged["sections"]) == (base["sections"] + 2, base["sections"] + 1)
    assert agenda._optional_titles(CELLS + [optional(c) for c in SECTION] + TEAR_DOWN) == (
        "Appendix. A detour",
    )
    assert agenda._optional_titles([optional(SECTION[2])]) == ("More",)


def test_optional_cells_are_left_out_of_the_day() -> None:
    cells = CELLS + [code("\n".join(f"y{i} = {i}" for i in range(200)) + "\nassert y0 == 0\n")]
    plain = agenda._Notebook("09", "t", **agenda._count_notebook(cells), seconds=60.0, peak_gib=1.0)
    cells[-1] = optional(cells[-1])
    tagged = agenda._Notebook(
        "09", "t", **agenda._count_notebook(cells), seconds=60.0, peak_gib=1.0
    )
    assert plain.room_minutes - tagged.room_minutes >= 201 // agenda._CODE_LINES_PER_MINUTE
    assert tagged.optional_minutes == 201 / agenda._CODE_LINES_PER_MINUTE
    assert (
        notebook(optional_words=9_000, optional_code_lines=900).room_minutes
        == notebook().room_minutes
    )


def test_every_appendix_of_the_workbook_is_optional_to_its_end() -> None:
    appendices = 0
    for path in agenda._notebook_paths():
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        inside = False
        for cell in cells:
            heads = [
                line for line in "".join(cell["source"]).splitlines() if line.startswith("## ")
            ]
            if cell["cell_type"] == "markdown" and heads:
                inside = heads[0][3:].lower().startswith("appendix")
                appendices += inside
            assert agenda._is_optional(cell) or not inside, (path.name, cell.get("id"))
    assert appendices >= 1


def test_markdown_words_leaves_out_link_targets_and_tags() -> None:
    assert agenda._markdown_words("see [the glossary](00_glossary.md#tau-and-more) <br> now") == 4
    assert agenda._markdown_words("vLLM's draft-and-verify step") == 3


def notebook(number: str = "01", **changes: float) -> agenda._Notebook:
    """A notebook of known counts."""
    base = agenda._Notebook(
        number,
        f"title {number}",
        words=900,
        code_lines=60,
        sections=5,
        exercises=3,
        graded=1,
        checks=2,
        asserts=4,
        optional_words=0,
        optional_code_lines=0,
        seconds=150.0,
        peak_gib=1.5,
    )
    return replace(base, **changes)


def test_room_minutes_adds_every_part_and_rounds_up() -> None:
    nb = notebook()
    total = (
        900 / agenda._READING_WPM
        + 60 / agenda._CODE_LINES_PER_MINUTE
        + 5 * agenda._TALK_MINUTES_PER_SECTION
        + 150 / 60
        + 2 * agenda._EXERCISE_MINUTES
        + agenda._GRADED_MINUTES
        + 2 * agenda._CHECK_MINUTES
        + 4 * agenda._ASSERT_MINUTES
    )
    assert nb.room_minutes == agenda._ROUND_TO * math.ceil(total / agenda._ROUND_TO)
    assert nb.room_minutes >= total and nb.room_minutes % agenda._ROUND_TO == 0
    assert notebook(seconds=150.0 + 60 * agenda._ROUND_TO).room_minutes > nb.room_minutes
    homework = total - 2 * agenda._EXERCISE_MINUTES - agenda._GRADED_MINUTES
    assert nb.minutes(exercises=False) == agenda._ROUND_TO * math.ceil(homework / agenda._ROUND_TO)


def test_code_lines_on_screen_add_to_the_time() -> None:
    more = 10 * agenda._CODE_LINES_PER_MINUTE  # ten minutes of code to read
    assert notebook(code_lines=60 + more).room_minutes == notebook().room_minutes + 10
    assert notebook(code_lines=60 + more).minutes(False) == notebook().minutes(False) + 10
    cells = CELLS + [code("\n".join(f"z{i} = {i}" for i in range(more)))]
    counted = (
        agenda._count_notebook(cells)["code_lines"] - agenda._count_notebook(CELLS)["code_lines"]
    )
    assert counted == more


def adds_up(rows: list[agenda._Row]) -> bool:
    """Each row starts when the one before it ends."""
    return all(a.start + a.minutes == b.start for a, b in zip(rows, rows[1:]))


def test_a_plan_fits_its_day_and_adds_up() -> None:
    nbs = [notebook(f"0{i}") for i in range(1, 7)]
    rows, left = agenda._plan_day(nbs, agenda._CORE_DAY)
    assert adds_up(rows) and rows[-1].start <= agenda._CORE_DAY.limit
    assert rows[-1].what == f"end: {rows[-1].start} minutes"
    taught = [
        r.what.split()[0] for r in rows if r.what.startswith("0") and "glossary" not in r.what
    ]
    assert taught + [nb.number for nb in left] == [nb.number for nb in nbs]
    assert sum(r.what == "lunch" for r in rows) <= 1


def test_a_plan_drops_what_does_not_fit_and_never_shrinks_it() -> None:
    long = notebook("03", seconds=60 * 200.0)  # over three hours in the room
    nbs = [notebook("01"), notebook("02"), long, notebook("05")]
    rows, left = agenda._plan_day(nbs, agenda._HALF_DAY)
    assert [nb.number for nb in left] == ["03", "05"]  # the prefix that fits, not a skip
    assert not any(r.what.startswith(("03 ", "05 ")) for r in rows)
    full, _ = agenda._plan_day(nbs, agenda._CORE_DAY)
    assert any(r.what.startswith("03 ") and r.minutes == long.room_minutes for r in full)


def test_breaks_come_after_the_stated_stretch_and_lunch_once() -> None:
    nbs = [notebook(f"0{i}") for i in range(1, 7)]
    rows = agenda._schedule(nbs, agenda._CORE_DAY)
    taught = 0
    for row in rows:
        if row.what in ("break", "lunch"):
            assert taught >= agenda._BREAK_AFTER
            taught = 0
        else:
            taught += row.minutes
    lunch = [r for r in rows if r.what == "lunch"]
    assert len(lunch) == 1 and lunch[0].start >= agenda._LUNCH_FROM
    assert not any(r.what == "lunch" for r in agenda._schedule(nbs, agenda._HALF_DAY))


def summary_of(names: list[str], **row_changes: object) -> dict:
    """A run-summary.json as kit.runner writes it, every notebook ok."""
    rows = [
        {
            "notebook": name,
            "ok": True,
            "status": "ok",
            "seconds": 12.34 + i,
            "peak_rss_gib": 1.234,
            "finished_at": f"2026-12-0{1 + i % 2}T10:00:00+0000",
        }
        | row_changes
        for i, name in enumerate(names)
    ]
    return {"notebooks": rows, "ok": True}


NAMES = ["01_a.ipynb", "02_b.ipynb"]


def test_record_from_a_good_summary() -> None:
    record = agenda._record_from_summary(summary_of(NAMES), NAMES, "2 CPU cores")
    assert record["date"] == "2026-12-02" and record["conditions"] == "2 CPU cores"
    assert [r["notebook"] for r in record["notebooks"]] == NAMES
    assert record["notebooks"][0] == {"notebook": "01_a.ipynb", "seconds": 12.3, "peak_gib": 1.23}


@pytest.mark.parametrize(
    "summary, says",
    [
        (summary_of(NAMES[:1]), "02_b.ipynb: not in the summary"),
        (summary_of(NAMES, status="FAILED", ok=False), "status 'FAILED'"),
        (summary_of(NAMES, seconds=0.0), "seconds 0.0"),
        (summary_of(NAMES, peak_rss_gib=0.0), "peak 0.0"),
    ],
)
def test_record_refuses_a_summary_it_cannot_trust(summary: dict, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        agenda._record_from_summary(summary, NAMES, "2 CPU cores")


def test_record_command_writes_every_notebook(tmp_path: Path) -> None:
    names = [p.name for p in agenda._notebook_paths()]
    summary = tmp_path / "run-summary.json"
    summary.write_text(json.dumps(summary_of(names)))
    out = agenda._write_record(summary, "2 CPU cores", out=tmp_path / "record.json")
    record = agenda._load_record(out)
    assert [r["notebook"] for r in record["notebooks"]] == names
    nbs = agenda._load_notebooks(record=record)
    assert [nb.seconds for nb in nbs] == [r["seconds"] for r in record["notebooks"]]


def test_a_notebook_without_a_measured_run_is_named() -> None:
    record = agenda._load_record()
    last = agenda._notebook_paths()[-1].name
    short = {**record, "notebooks": [r for r in record["notebooks"] if r["notebook"] != last]}
    with pytest.raises(ValueError, match=re.escape(f"{last} has no measured run")):
        agenda._load_notebooks(record=short)


def test_the_shipped_record_covers_every_notebook_without_commit_hashes() -> None:
    record = agenda._load_record()
    names = [r["notebook"] for r in record["notebooks"]]
    present = [p.name for p in agenda._notebook_paths()]
    assert [n for n in names if n in present] == present, "every notebook has a run, in order"
    text = agenda._RECORD.read_text()
    assert not re.search(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b", text)


def core_day(**changes: float) -> tuple[list[agenda._Row], list[agenda._Row]]:
    """Six notebooks of known counts in the core day, exercises in the room and as homework."""
    nbs = [notebook(f"0{i}", **changes) for i in range(1, 7)]
    return tuple(agenda._schedule(nbs, agenda._CORE_DAY, exercises=e) for e in (True, False))


def test_the_core_day_says_which_variant_fits() -> None:
    in_room, homework = core_day()
    assert agenda._fits(in_room, agenda._CORE_DAY)
    says = agenda._core_verdict(in_room, homework, agenda._CORE_DAY)
    assert says.startswith("**The core day fits 8 h with the exercises done in the room"), says

    in_room, homework = core_day(exercises=9, graded=4)  # 85 min of exercises a notebook
    assert not agenda._fits(in_room, agenda._CORE_DAY) and agenda._fits(homework, agenda._CORE_DAY)
    over = agenda._duration(in_room[-1].start - agenda._CORE_DAY.limit)
    says = agenda._core_verdict(in_room, homework, agenda._CORE_DAY)
    assert "fits 8 h only with the exercises set as homework" in says and f"{over} over" in says


def test_the_core_day_can_say_it_does_not_fit() -> None:
    in_room, homework = core_day(code_lines=1_200)  # an hour of code on screen a notebook
    assert not agenda._fits(homework, agenda._CORE_DAY)
    over = agenda._duration(homework[-1].start - agenda._CORE_DAY.limit)
    assert agenda._verdict(homework, agenda._CORE_DAY) == f"does not fit 8 h, {over} over"
    says = agenda._core_verdict(in_room, homework, agenda._CORE_DAY)
    assert says.startswith(f"**The core day does not fit 8 h, {over} over, even with"), says
    assert "fits 8 h" not in says.replace("does not fit", "")


def test_the_agenda_prints_and_its_plans_fit() -> None:
    text = agenda._agenda_markdown(agenda._load_notebooks(), agenda._load_record())
    ends = {
        title: int(end)
        for title, end in re.findall(
            r"^\*\*([^*(\n]+?) \([^\n]*\n\n\| start \|.*?\| end: (\d+) minutes", text, re.S | re.M
        )
    }
    assert ends["A half day"] <= agenda._HALF_DAY.limit, ends
    assert ends["The deep dives, a second half day"] <= agenda._SECOND_HALF_DAY.limit, ends
    in_room = ends["The core day, exercises in the room"]
    homework = ends["The core day, exercises as homework"]
    assert min(in_room, homework) <= agenda._CORE_DAY.limit, ends  # issue #59: the core day fits
    assert "**The core day fits 8 h" in text


def test_main_prints_the_agenda(capsys: pytest.CaptureFixture[str]) -> None:
    assert agenda.main([]) == 0
    out = capsys.readouterr().out
    assert "| start | minutes | what |" in out and "room time" in out


def test_rewrite_guide_replaces_only_its_block(tmp_path: Path) -> None:
    guide = tmp_path / "guide.md"
    guide.write_text(f"before\n{agenda._BLOCK_START}\nold\n{agenda._BLOCK_END}\nafter\n")
    assert agenda._rewrite_guide(guide, block="new") is True
    assert guide.read_text() == f"before\n{agenda._BLOCK_START}\nnew\n{agenda._BLOCK_END}\nafter\n"
    assert agenda._rewrite_guide(guide, block="new") is False
    assert agenda._guide_block(guide) == "new"
    guide.write_text("no block here\n")
    with pytest.raises(ValueError, match="no agenda block"):
        agenda._rewrite_guide(guide, block="new")
