"""Notebooks import modules, d2l style (`from chapters.ch98_planted import bench` then
`bench.run(...)`),
so every call says where its code lives; and an import cell stays short: at most one statement per
trunk package, one for the notebook's chapter, and a handful of standard and third-party ones."""

from __future__ import annotations

import ast

import nbformat
import pytest

from helpers.common.paths import NOTEBOOKS_DIR

NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
#: Import statements a cell may hold: the five trunk packages (analytics, common, eagle3, engine,
#: tiny), the notebook's chapter, and seven standard-library or third-party ones. A statement that
#: the formatter wraps over several lines still counts once.
MAX_IMPORTS = 5 + 1 + 7


def import_statements(source: str) -> int:
    """Import statements at a cell's top level."""
    return sum(isinstance(node, (ast.Import, ast.ImportFrom)) for node in ast.parse(source).body)


def loose_helper_imports(source: str) -> list[str]:
    """`from helpers.pkg.module import name` (or `chapters.chNN_x.module`) statements: names
    instead of modules."""
    return [
        f"from {node.module} import ..."
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom)
        and node.module
        and node.module.startswith(("helpers.", "chapters."))
        and node.module.count(".") >= 2
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_imports_modules_in_short_cells(path) -> None:
    nb = nbformat.read(str(path), as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        assert not loose_helper_imports(cell.source), (path.name, i)
        count = import_statements(cell.source)
        assert count <= MAX_IMPORTS, f"{path.name} cell {i}: {count} import statements"


def test_the_checks_see_a_loose_import_and_a_long_cell() -> None:
    assert loose_helper_imports("from chapters.ch98_planted.bench import run_sweep")
    assert not loose_helper_imports("from chapters.ch98_planted import bench, server")
    long_cell = "\n".join(f"import m{i}" for i in range(MAX_IMPORTS + 1))
    assert import_statements(long_cell) > MAX_IMPORTS
    assert import_statements("from a import (\n    b,\n    c,\n)\n") == 1
