"""The README's "When something goes wrong" table names tests that exist and hold its cases; a
chapter's rows are the ones its chapter.json declares (promises), naming tests in its folder."""

from __future__ import annotations

import re

from helpers.common.paths import REPO_ROOT
from kit import chapters

#: A test file a row names: repo-wide (tests/...) or a chapter's (src/chapters/<chapter>/tests/...).
TEST_FILE = re.compile(r"`((?:src/chapters/\w+/)?tests/[\w/]+\.py)`")


def promise_rows(text: str | None = None) -> list[list[str]]:
    """The table's rows under the README's "When something goes wrong" heading, as cells."""
    text = (REPO_ROOT / "README.md").read_text() if text is None else text
    section = text.split("## When something goes wrong", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[1:]]


def test_every_promise_names_test_files_that_exist() -> None:
    rows = promise_rows()
    assert len(rows) >= 8, rows
    for case, _, tests in rows:
        named = TEST_FILE.findall(tests)
        assert named, f"{case!r} names no test file"
        for path in named:
            assert (REPO_ROOT / path).is_file(), f"{case!r} names {path}, which does not exist"


def chapter_rows(rows: list[list[str]]) -> dict[str, list[str]]:
    """Case -> the chapter test files a row names, for rows that name one."""
    found = {case: TEST_FILE.findall(tests) for case, _, tests in rows}
    return {case: [p for p in paths if p.startswith("src/")] for case, paths in found.items()}


def test_a_chapters_rows_are_its_declared_promises() -> None:
    """The rows naming a chapter's tests are the promises its chapter.json declares, word for word
    (a dropped chapter's rows go with `python -m kit.chapters readme`)."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    declared = {
        p.case: chapter.test_paths(p) for chapter in chapters.discover() for p in chapter.promises
    }
    shown = {case: paths for case, paths in chapter_rows(promise_rows(text)).items() if paths}
    assert shown == declared, "README rows naming a chapter's tests differ from its chapter.json"
    assert chapters._readme_text(text, chapters.discover()) == text, (
        "README.md's chapter rows are not the records': run `python -m kit.chapters readme`"
    )


def test_a_row_naming_a_chapters_test_is_seen() -> None:
    text = (
        "## When something goes wrong\n\n| case | what you get | tests |\n|---|---|---|\n"
        "| a | b | `tests/kit/test_x.py`, `src/chapters/ch98_planted/tests/test_y.py` |\n"
    )
    (row,) = promise_rows(text)
    assert chapter_rows([row]) == {"a": ["src/chapters/ch98_planted/tests/test_y.py"]}
    assert TEST_FILE.findall(row[2]) == [
        "tests/kit/test_x.py",
        "src/chapters/ch98_planted/tests/test_y.py",
    ]
