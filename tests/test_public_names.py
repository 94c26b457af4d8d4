"""Every package and module says what it offers: `__all__` lists exactly its public names.

A package's `__all__` names its modules; a module's names every top-level function, class and
constant it defines without a leading underscore (so a new helper is exported on purpose, or
kept private with `_`), and nothing it merely imports.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers.common.paths import REPO_ROOT

SRC = REPO_ROOT / "src" / "helpers"
PACKAGES = sorted(p for p in SRC.iterdir() if (p / "__init__.py").is_file())
MODULES = sorted(p for p in SRC.glob("*/*.py") if p.name != "__init__.py")


def declared_all(tree: ast.Module) -> list[str] | None:
    """The literal `__all__` of a module, or None."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return list(ast.literal_eval(node.value))
    return None


def defined_public(tree: ast.Module) -> set[str]:
    """Top-level names a module defines (def, class, assignment) without a leading underscore."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_") and n != "logger"}


@pytest.mark.parametrize("package", PACKAGES, ids=[p.name for p in PACKAGES])
def test_package_all_names_its_modules(package: Path) -> None:
    tree = ast.parse((package / "__init__.py").read_text())
    assert ast.get_docstring(tree), f"helpers/{package.name}/__init__.py needs a docstring"
    modules = {p.stem for p in package.glob("*.py") if p.name != "__init__.py"}
    assert set(declared_all(tree) or []) == modules


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(SRC)) for p in MODULES])
def test_module_all_is_its_public_names(path: Path) -> None:
    tree = ast.parse(path.read_text())
    declared = declared_all(tree)
    assert declared is not None, f"helpers/{path.relative_to(SRC)} has no __all__"
    assert len(declared) == len(set(declared))
    assert set(declared) == defined_public(tree), (
        f"helpers/{path.relative_to(SRC)}: __all__ and the public definitions differ by "
        f"{sorted(set(declared) ^ defined_public(tree))}"
    )
