"""The README's "When something goes wrong" table names tests that exist and hold its cases."""

from __future__ import annotations

import re

from helpers.common.paths import REPO_ROOT


def promise_rows() -> list[list[str]]:
    """The table's rows under the README's "When something goes wrong" heading, as cells."""
    text = (REPO_ROOT / "README.md").read_text()
    section = text.split("## When something goes wrong", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[1:]]


def test_every_promise_names_test_files_that_exist() -> None:
    rows = promise_rows()
    assert len(rows) >= 8, rows
    for case, _, tests in rows:
        named = re.findall(r"`((?:src/chapters/\w+/)?tests/[\w/]+\.py)`", tests)
        assert named, f"{case!r} names no test file"
        for path in named:
            assert (REPO_ROOT / path).is_file(), f"{case!r} names {path}, which does not exist"
