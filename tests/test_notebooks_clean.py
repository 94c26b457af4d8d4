"""Notebooks are committed clean: no outputs, no execution counts (the runner and nbval fill them in build/)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from helpers.common.paths import NOTEBOOKS_DIR
from kit.runner import _find_notebooks

NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))


def test_notebooks_folder_exists() -> None:
    assert NOTEBOOKS_DIR.is_dir(), f"{NOTEBOOKS_DIR} is missing"


def test_runner_runs_exactly_these_notebooks() -> None:
    assert _find_notebooks() == NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_stored_clean(path: Path) -> None:
    nb = nbformat.read(str(path), as_version=4)
    nbformat.validate(nb)
    dirty = [
        f"cell {i}: "
        + ("outputs" if cell.get("outputs") else f"execution_count={cell.get('execution_count')}")
        for i, cell in enumerate(nb.cells, 1)
        if cell.cell_type == "code"
        and (cell.get("outputs") or cell.get("execution_count") is not None)
    ]
    assert not dirty, (
        f"{path.name} has outputs or execution counts ({', '.join(dirty)}); clear them before committing"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_first_code_cell_calls_setup_notebook(path: Path) -> None:
    nb = nbformat.read(str(path), as_version=4)
    first = next(cell for cell in nb.cells if cell.cell_type == "code")
    assert "setup_notebook()" in first.source, (
        f"{path.name}: the first code cell must call setup_notebook() (explicit, printed setup)"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_cell_has_its_own_id(path: Path) -> None:
    import json

    ids = [cell.get("id") for cell in json.loads(path.read_text())["cells"]]
    assert all(isinstance(i, str) and i for i in ids), f"{path.name}: a cell has no id"
    assert len(set(ids)) == len(ids), f"{path.name}: duplicate cell ids"
