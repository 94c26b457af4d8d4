"""The algorithm the workbook teaches is written in notebook cells, and each cell stays identical to
its library twin (d2l's `#@save`, checked the other way): the same code, docstring and signature,
compared as syntax trees so formatting and comments may differ.
"""

from __future__ import annotations

import ast
import inspect

import nbformat
import pytest

from helpers.common.paths import NOTEBOOKS_DIR
from helpers.eagle3 import decode
from kit import chapters

#: (notebook, function name, library twin as module.function), as each chapter's chapter.json
#: declares them.
TWINS = [(c.notebook, t.cell, t.library) for c in chapters.discover() for t in c.twins]
MAX_CELL_LINES = 40
#: The EAGLE-3 draft step (fc over the taps, the shifted input, [embed ‖ hidden], the layer, the
#: pre-norm feedback, d2t) fits one short cell.
MAX_LINES = {"draft_step": 25, "draft": 25}
#: Module names both sides may qualify or not: `drafter.KVCache` in a cell or in decode.
SHARED_MODULES = ("drafter",)


def notebook_functions(name: str) -> dict[str, tuple[ast.FunctionDef, int]]:
    """Top-level functions defined in a notebook's code cells: name -> (node, cell line count)."""
    nb = nbformat.read(str(NOTEBOOKS_DIR / name), as_version=4)
    found = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for node in ast.parse(cell.source).body:
            if isinstance(node, ast.FunctionDef):
                found[node.name] = (node, len(cell.source.splitlines()))
    return found


class _Unqualify(ast.NodeTransformer):
    """`decode.Round` -> `Round`: a notebook cell calls its twin module's names through the module."""

    def __init__(self, *modules: str) -> None:
        self.modules = set(modules)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id in self.modules:
            return ast.copy_location(ast.Name(node.attr, node.ctx), node)
        return self.generic_visit(node)


def shape(node: ast.AST, *modules: str) -> str:
    """A syntax tree as text, without positions; names of `modules` unqualified."""
    return ast.dump(_Unqualify(*modules).visit(node) if modules else node, include_attributes=False)


@pytest.mark.parametrize(
    ("notebook", "name", "library"), TWINS, ids=[f"{n}:{f}" for n, f, _ in TWINS]
)
def test_notebook_cell_equals_its_library_twin(notebook: str, name: str, library: str) -> None:
    functions = notebook_functions(notebook)
    assert name in functions, f"{notebook} no longer defines {name}() in a code cell"
    node, lines = functions[name]
    twin = chapters.load(library)
    tree = ast.parse(inspect.getsource(twin)).body[0]
    modules = (twin.__module__.rsplit(".", 1)[-1], *SHARED_MODULES)
    assert shape(node, *modules) == shape(tree, *modules), (
        f"{notebook}: {name}() differs from {library}; change both, or neither"
    )
    most = MAX_LINES.get(name, MAX_CELL_LINES)
    assert lines <= most, f"{notebook}: the cell defining {name}() has {lines} lines (> {most})"


def test_the_comparison_sees_a_one_token_change() -> None:
    library = ast.parse(inspect.getsource(decode.accept_greedy)).body[0]
    edited = ast.parse(inspect.getsource(decode.accept_greedy).replace("a += 1", "a += 2")).body[0]
    assert shape(library) != shape(edited)
