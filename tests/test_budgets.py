"""Budgets as tests (issue #59): the trunk, each chapter and the notebooks' code on screen stay within
their sizes, counted by `kit.homes`, so moving code from one home to another cannot meet them.

- trunk (`helpers`): at most 8,000 lines and 200 exported names (`kit.homes`' own targets);
- each chapter: at most 1,000 lines of its own top-level modules, unless its record
  (chapter.json's `max_lines`, read through `kit.chapters`) declares another;
- notebooks: at most 3,057 code lines in all, and no code cell over 40 lines.
"""

from __future__ import annotations

import json
from pathlib import Path

from kit import chapters, homes

CHAPTER_MAX_LINES = 1_000
NOTEBOOK_MAX_CODE_LINES = 3_057
CELL_MAX_LINES = 40


def trunk_misses(found: dict[str, list[homes._Home]]) -> list[str]:
    """The trunk's budgets it misses, one line each."""
    lines = sum(h.lines for h in found["trunk"])
    exports = sum(h.exports for h in found["trunk"])
    misses = []
    if lines > homes._TRUNK_MAX_LINES:
        misses.append(f"trunk: {lines:,} lines > {homes._TRUNK_MAX_LINES:,}")
    if exports > homes._TRUNK_MAX_EXPORTS:
        misses.append(f"trunk: {exports} exported names > {homes._TRUNK_MAX_EXPORTS}")
    return misses


def declared_budgets() -> dict[str, int]:
    """The chapters whose record declares a budget other than CHAPTER_MAX_LINES, by package."""
    found = {c.package: c.max_lines for c in chapters.discover()}
    return {name: lines for name, lines in found.items() if lines != CHAPTER_MAX_LINES}


def chapter_misses(found: dict[str, list[homes._Home]], declared: dict[str, int]) -> list[str]:
    """Each chapter over its budget (declared, else CHAPTER_MAX_LINES), one line each."""
    return [
        f"{h.name}: {h.lines:,} lines > {declared.get(h.name, CHAPTER_MAX_LINES):,}"
        for h in found["chapters"]
        if h.lines > declared.get(h.name, CHAPTER_MAX_LINES)
    ]


def notebook_misses(cells: dict[str, list[int]]) -> list[str]:
    """The notebooks' budgets they miss: code lines in all, and each cell over CELL_MAX_LINES."""
    total = sum(sum(sizes) for sizes in cells.values())
    misses = [f"notebooks: {total:,} code lines > {NOTEBOOK_MAX_CODE_LINES:,}"]
    misses = misses if total > NOTEBOOK_MAX_CODE_LINES else []
    return misses + [
        f"{name} code cell {i}: {n} lines > {CELL_MAX_LINES}"
        for name, sizes in cells.items()
        for i, n in enumerate(sizes)
        if n > CELL_MAX_LINES
    ]


def test_the_trunk_is_within_its_budget() -> None:
    assert not trunk_misses(homes._homes())


def test_each_chapter_is_within_its_budget() -> None:
    found, declared = homes._homes(), declared_budgets()
    assert set(declared) <= {h.name for h in found["chapters"]}
    assert all(lines <= 2 * CHAPTER_MAX_LINES for lines in declared.values()), declared
    assert not chapter_misses(found, declared)


def test_the_notebooks_code_is_within_its_budget() -> None:
    misses = notebook_misses(homes._notebook_cells())
    assert not [m for m in misses if m.startswith("notebooks:")]


def test_no_code_cell_is_over_its_budget() -> None:
    misses = notebook_misses(homes._notebook_cells())
    assert not [m for m in misses if not m.startswith("notebooks:")]


# ------------------------------------------------------------ each budget fails on planted data


def planted(root: Path, folder: str, lines: int, exports: int = 0) -> None:
    """A package under root/src of `lines` lines (its __init__'s one and a module's) and `exports` exported names (in a
    tree with the three homes)."""
    for home in ("helpers", "chapters", "kit"):
        (root / "src" / home).mkdir(parents=True, exist_ok=True)
    package = root / "src" / folder
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text('"""Doc."""\n')
    names = [f"n{i}" for i in range(exports)]
    body = [f"__all__ = {names!r}", *(f"n{i} = {i}" for i in range(exports))]
    (package / "m.py").write_text("\n".join(body + ["x = 0"] * (lines - 1 - len(body))) + "\n")


def notebook(folder: Path, name: str, cells: list[int]) -> None:
    """A notebook whose code cells have these many lines (and one markdown cell, not counted)."""
    folder.mkdir(parents=True, exist_ok=True)
    code = [{"cell_type": "code", "source": "x = 1\n" * n} for n in cells]
    markdown = {"cell_type": "markdown", "source": "# title\n" * 99}
    (folder / name).write_text(json.dumps({"cells": [markdown, *code]}))


def test_a_trunk_over_its_lines_or_exports_fails(tmp_path: Path) -> None:
    planted(tmp_path / "fits", "helpers/common", 8_000, exports=200)
    assert trunk_misses(homes._homes(tmp_path / "fits" / "src")) == []
    planted(tmp_path / "big", "helpers/common", 7_000, exports=150)
    planted(tmp_path / "big", "helpers/engine", 1_001, exports=51)
    assert trunk_misses(homes._homes(tmp_path / "big" / "src")) == [
        "trunk: 8,001 lines > 8,000",
        "trunk: 201 exported names > 200",
    ]


def test_a_chapter_over_its_budget_fails_and_a_declared_one_gets_its_own(tmp_path: Path) -> None:
    planted(tmp_path, "chapters/ch91_a", 1_000)
    planted(tmp_path, "chapters/ch92_b", 1_001)
    planted(tmp_path, "chapters/ch93_c", 1_500)
    planted(tmp_path, "chapters/ch94_d", 2_001)
    found = homes._homes(tmp_path / "src")
    declared = {"chapters.ch93_c": 2_000, "chapters.ch94_d": 2_000}
    assert chapter_misses(found, declared) == [
        "chapters.ch92_b: 1,001 lines > 1,000",
        "chapters.ch94_d: 2,001 lines > 2,000",
    ]
    assert len(chapter_misses(found, {})) == 3  # undeclared, 93 is held to 1,000 too


def test_notebook_code_over_its_total_or_a_long_cell_fails(tmp_path: Path) -> None:
    notebook(tmp_path / "fits", "01_a.ipynb", [40] * 50)
    notebook(tmp_path / "fits", "02_b.ipynb", [40] * 26 + [17])
    assert notebook_misses(homes._notebook_cells(tmp_path / "fits")) == []
    notebook(tmp_path / "big", "01_a.ipynb", [41] + [40] * 49)
    notebook(tmp_path / "big", "02_b.ipynb", [40] * 26 + [17])
    assert notebook_misses(homes._notebook_cells(tmp_path / "big")) == [
        "notebooks: 3,058 code lines > 3,057",
        "01_a.ipynb code cell 0: 41 lines > 40",
    ]
