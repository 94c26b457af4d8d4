"""Imports run one way between the packages of the trunk, `helpers`: common <- eagle3 <- engine <-
analytics <- tiny. A module may import its own package and any package below it, never one above
or beside it; and no package may import itself in a cycle through another. (Chapters and the kit
sit above the whole trunk: tests/test_code_homes.py.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers.common.paths import REPO_ROOT

SRC = REPO_ROOT / "src" / "helpers"
#: Rank of each package: a module may import packages of the same or lower rank only; packages of
#: equal rank other than its own are off limits.
RANK: dict[str, int] = {
    "common": 0,
    "eagle3": 1,
    "engine": 2,
    "analytics": 3,
    "tiny": 4,
}
MODULES = sorted(p for p in SRC.rglob("*.py") if p.parent != SRC)


def package_of(path: Path) -> str:
    """The helpers package a module file belongs to."""
    return path.relative_to(SRC).parts[0]


def imported_packages(path: Path) -> set[str]:
    """Every helpers package a module imports (anywhere in the file, function bodies included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "helpers" and len(parts) > 1 and parts[1] in RANK:
                found.add(parts[1])
    return found


def test_every_package_is_ranked() -> None:
    packages = {p.name for p in SRC.iterdir() if (p / "__init__.py").is_file()}
    assert packages == set(RANK), f"rank the new package(s): {packages ^ set(RANK)}"


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(SRC)) for p in MODULES])
def test_imports_point_down(path: Path) -> None:
    own = package_of(path)
    bad = sorted(p for p in imported_packages(path) if p != own and RANK[p] >= RANK[own])
    assert not bad, f"helpers/{path.relative_to(SRC)} ({own}) imports {bad}: upward or sideways"


def test_no_cycles_between_packages() -> None:
    edges: dict[str, set[str]] = {p: set() for p in RANK}
    for path in MODULES:
        edges[package_of(path)] |= imported_packages(path) - {package_of(path)}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(
            n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in edges[start]
        )

    cycles = [p for p in RANK if reaches(p, p, set())]
    assert not cycles, f"packages in an import cycle: {cycles}"


def test_the_checker_catches_an_upward_import(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text("def f():\n    from helpers.tiny.lab import LAB_DIR\n")
    assert imported_packages(module) == {"tiny"}
