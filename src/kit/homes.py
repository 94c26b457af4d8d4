"""Where the code lives and how big each home is: `python -m kit.homes`.

One row per home (each trunk package, each chapter, the kit) with its modules, lines and exported
names (`__all__` of its modules), and the trunk's total beside issue #43's targets (at most 8,000
lines and 200 exported names); an instructor forking the workbook reads what each chapter costs.
"""

from __future__ import annotations

import argparse
import ast
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from helpers.common.paths import NOTEBOOKS_DIR, REPO_ROOT

__all__ = ["main"]

_SRC = REPO_ROOT / "src"
#: Issue #43's targets for the trunk.
_TRUNK_MAX_LINES = 8_000
_TRUNK_MAX_EXPORTS = 200
_COLUMNS = ("modules", "lines", "exports")


@dataclass(frozen=True)
class _Home:
    """One package's size: its dotted name, modules, lines and exported names."""

    name: str
    modules: int
    lines: int
    exports: int


def _exports(path: Path) -> int:
    """How many names a module's literal `__all__` lists (0 without one)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return len(ast.literal_eval(node.value))
    return 0


def _home(package: Path, src: Path = _SRC) -> _Home:
    """The size of one package (its own .py files, __init__ included in lines only)."""
    files = sorted(package.glob("*.py"))
    modules = [p for p in files if p.name != "__init__.py"]
    return _Home(
        name=".".join(package.relative_to(src).parts),
        modules=len(modules),
        lines=sum(len(p.read_text(encoding="utf-8").splitlines()) for p in files),
        exports=sum(_exports(p) for p in modules),
    )


def _packages(root: Path) -> list[Path]:
    """The packages directly under a folder."""
    return sorted(p for p in root.iterdir() if (p / "__init__.py").is_file())


def _homes(src: Path = _SRC) -> dict[str, list[_Home]]:
    """Trunk packages, chapters and the kit, each a list of homes."""
    return {
        "trunk": [_home(p, src) for p in _packages(src / "helpers")],
        "chapters": [_home(p, src) for p in _packages(src / "chapters")],
        "kit": [_home(src / "kit", src)],
    }


def _notebook_cells(folder: Path = NOTEBOOKS_DIR) -> dict[str, list[int]]:
    """Per notebook (file name): the lines of each of its code cells, in order."""
    return {
        path.name: [
            len("".join(cell["source"]).splitlines())
            for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]
            if cell["cell_type"] == "code"
        ]
        for path in sorted(folder.glob("*.ipynb"))
    }


def _notebook_line(cells: dict[str, list[int]]) -> str:
    """The notebooks' code on screen in one line: total lines and the longest cell."""
    sizes = [n for notebook in cells.values() for n in notebook]
    longest = max(sizes, default=0)
    return f"notebooks: {sum(sizes):,} code lines in {len(sizes)} cells, longest {longest}"


def _report(found: dict[str, list[_Home]]) -> list[str]:
    """The table as text lines, each group's total last."""
    lines = [f"{'home':34s} {'modules':>7s} {'lines':>7s} {'exports':>7s}"]
    for group, rows in found.items():
        for row in rows:
            lines.append(f"{row.name:34s} {row.modules:7d} {row.lines:7d} {row.exports:7d}")
        modules, size, faces = (sum(getattr(r, f) for r in rows) for f in _COLUMNS)
        lines.append(f"{'= ' + group:34s} {modules:7d} {size:7d} {faces:7d}")
    trunk = found["trunk"]
    size, faces = sum(r.lines for r in trunk), sum(r.exports for r in trunk)
    lines.append(
        f"trunk: {size:,} lines (target <= {_TRUNK_MAX_LINES:,}: "
        f"{'met' if size <= _TRUNK_MAX_LINES else 'missed'}), {faces} exported names (target <= "
        f"{_TRUNK_MAX_EXPORTS}: {'met' if faces <= _TRUNK_MAX_EXPORTS else 'missed'})"
    )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Print the homes table."""
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    print("\n".join([*_report(_homes()), _notebook_line(_notebook_cells())]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
