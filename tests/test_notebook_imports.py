"""Notebooks import modules, d2l style (`from helpers.serving import bench` then `bench.run(...)`),
so every call says where its code lives; and an import cell stays short."""

from __future__ import annotations

import ast

import nbformat
import pytest

from helpers.common.paths import NOTEBOOKS_DIR

NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
MAX_IMPORT_LINES = 12


def import_lines(source: str) -> int:
    """Lines a cell spends on import statements."""
    tree = ast.parse(source)
    return sum(
        node.end_lineno - node.lineno + 1
        for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom))
    )


def loose_helper_imports(source: str) -> list[str]:
    """`from helpers.pkg.module import name` statements (names instead of modules)."""
    return [
        f"from {node.module} import ..."
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom)
        and node.module
        and node.module.startswith("helpers.")
        and node.module.count(".") >= 2
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_imports_modules_in_short_cells(path) -> None:
    nb = nbformat.read(str(path), as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        assert not loose_helper_imports(cell.source), (path.name, i)
        lines = import_lines(cell.source)
        assert lines <= MAX_IMPORT_LINES, f"{path.name} cell {i}: {lines} lines of imports"


def test_the_checks_see_a_loose_import_and_a_long_cell() -> None:
    assert loose_helper_imports("from helpers.serving.bench import run_sweep")
    assert not loose_helper_imports("from helpers.serving import bench, server")
    long_cell = "\n".join(f"import m{i}" for i in range(MAX_IMPORT_LINES + 1))
    assert import_lines(long_cell) > MAX_IMPORT_LINES
