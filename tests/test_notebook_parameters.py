"""Every notebook takes its profile from one `parameters` cell and hard-codes no model.

The convention: one code cell tagged `parameters` (papermill's tag) that sets `PROFILE = None`;
`load_profile(PROFILE)` then falls back to $WORKBOOK_PROFILE (which `make run/test PROFILE=…`
export), else "tiny". So one switch moves every notebook to a real pairing, and no code cell may
name a model itself: model ids and paths live in data/profiles/*.json only. Markdown cells may
mention models in prose.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

from helpers.common.paths import NOTEBOOKS_DIR

NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
IDS = [p.name for p in NOTEBOOKS]
PARAMETERS_TAG = "parameters"
#: What a hard-coded model looks like: hub orgs of the profiles' models, and the tiny pair's folders.
HARD_CODED_MODEL = re.compile(r"Qwen/|RedHatAI/|nm-testing/|data/tiny-")
#: Names that read the profile; none may run before the parameters cell sets PROFILE.
PROFILE_READERS = re.compile(r"\bPROFILE\b|load_profile|WORKBOOK_PROFILE")


def code_cells(path: Path) -> list[tuple[int, nbformat.NotebookNode]]:
    """(1-based cell number, cell) of every code cell."""
    nb = nbformat.read(str(path), as_version=4)
    return [(i, cell) for i, cell in enumerate(nb.cells, 1) if cell.cell_type == "code"]


def is_parameters(cell: nbformat.NotebookNode) -> bool:
    """True for a cell tagged `parameters`."""
    return PARAMETERS_TAG in cell.get("metadata", {}).get("tags", [])


def python_source(source: str) -> str:
    """Cell source with IPython magics and shell escapes blanked, so ast can parse it."""
    return "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()
    )


def parse_cell(source: str) -> ast.Module:
    """The cell's AST (magics blanked, top-level await allowed as in IPython)."""
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    return compile(python_source(source), "<cell>", "exec", flags=flags, dont_inherit=True)


def test_there_are_notebooks() -> None:
    assert NOTEBOOKS, f"no notebooks in {NOTEBOOKS_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_one_parameters_cell_sets_profile_none(path: Path) -> None:
    tagged = [(i, cell) for i, cell in code_cells(path) if is_parameters(cell)]
    assert len(tagged) == 1, (
        f"{path.name}: {len(tagged)} code cells tagged {PARAMETERS_TAG!r} "
        f"(cells {[i for i, _ in tagged]}); exactly one must set PROFILE"
    )
    number, cell = tagged[0]
    values = [
        node.value
        for node in ast.walk(parse_cell(cell.source))
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "PROFILE" for t in node.targets)
    ]
    assert values, f"{path.name} cell {number}: the parameters cell does not assign PROFILE"
    assert all(isinstance(v, ast.Constant) and v.value is None for v in values), (
        f"{path.name} cell {number}: PROFILE must default to None (then $WORKBOOK_PROFILE, then 'tiny'), "
        f"or `make run PROFILE=…` cannot switch this notebook"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_profile_is_read_after_the_parameters_cell(path: Path) -> None:
    cells = code_cells(path)
    position = next((k for k, (_, cell) in enumerate(cells) if is_parameters(cell)), None)
    if position is None:
        pytest.fail(
            f"{path.name}: no parameters cell (see test_one_parameters_cell_sets_profile_none)"
        )
    early = [i for i, cell in cells[:position] if PROFILE_READERS.search(cell.source)]
    assert not early, (
        f"{path.name}: cells {early} read the profile before the parameters cell sets PROFILE"
    )
    later_uses = [
        i
        for i, cell in cells[position + 1 :]
        if any(
            isinstance(node, ast.Name) and node.id == "PROFILE" and isinstance(node.ctx, ast.Load)
            for node in ast.walk(parse_cell(cell.source))
        )
    ]
    assert later_uses, (
        f"{path.name}: no code cell uses PROFILE (e.g. load_profile(PROFILE)), so it is ignored"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_hard_coded_model_in_code(path: Path) -> None:
    hits = [
        f"cell {i}: {line.strip()[:100]}"
        for i, cell in code_cells(path)
        for line in cell.source.splitlines()
        if HARD_CODED_MODEL.search(line)
    ]
    assert not hits, (
        f"{path.name} names a model in code (take it from the profile instead, e.g. "
        f"profile.verifier / profile.drafter):\n" + "\n".join(hits)
    )


def test_pattern_catches_what_it_should() -> None:
    for text in (
        'LLM("Qwen/Qwen3-30B-A3B-Instruct-2507")',
        "m = 'RedHatAI/x.eagle3'",
        'd = "nm-testing/Mockup-qwen235-eagle3-fp16"',
        'Path("data/tiny-qwen3-moe")',
    ):
        assert HARD_CODED_MODEL.search(text), text
    for text in ("profile = load_profile(PROFILE)", "LLM(**engine_kwargs(profile))", "# tiny pair"):
        assert not HARD_CODED_MODEL.search(text), text
