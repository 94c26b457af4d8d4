"""Where the code lives and how big each home is: `python -m kit.homes`.

One row per home (each trunk package, each chapter, the kit) with its modules, lines and exported
names (`__all__` of its modules), and the trunk's total beside issue #43's targets (at most 8,000
lines and 200 exported names); an instructor forking the workbook reads what each chapter costs.
`--exports` prints who reads each trunk export (chapters, notebooks, the trunk, the kit, scripts,
exercises, tests) and how many are read by one chapter only, issue #59's counts.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
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


# --- who reads each trunk export: `python -m kit.homes --exports` ---------------------------

#: Where readers live, beside src/: notebooks, scripts, exercises and the tests.
_READER_GLOBS = ("src/**/*.py", "tests/**/*.py", "scripts/*.py", "exercises/*.py")
_CHAPTER_DIR = re.compile(r"^ch(\d\d)_")
_NOTEBOOK = re.compile(r"^(\d\d)_.*\.ipynb$")


@dataclass(frozen=True)
class _Export:
    """One trunk export (helpers.<package>.<module>.<name>) and the labels of who reads it."""

    module: str
    name: str
    readers: frozenset[str]

    def chapters(self) -> set[str]:
        """The chapter numbers among its readers (a chapter's package, tests, or notebook)."""
        return {r[2:] for r in self.readers if r[:2] in ("ch", "nb")}


def _label(path: Path, repo: Path) -> str | None:
    """Who a file speaks for: chNN (a chapter's code or tests), nbNN (a notebook), trunk,
    trunk-tests, kit (its code and tests), scripts, exercises, tests (repo-wide), or None."""
    parts = path.relative_to(repo).parts
    for i, part in enumerate(parts[:-1]):
        if i and parts[i - 1] == "chapters" and (match := _CHAPTER_DIR.match(part)):
            return f"ch{match[1]}"
    if match := _NOTEBOOK.match(parts[-1]):
        return f"nb{match[1]}"
    if parts[:2] == ("src", "helpers"):
        return "trunk"
    if parts[:2] in (("src", "kit"), ("tests", "kit")):
        return "kit"
    if parts[0] in ("scripts", "exercises"):
        return parts[0]
    if parts[0] == "tests":
        trunk = (parts[1] in _trunk_packages(repo)) and len(parts) > 2
        return "trunk-tests" if trunk else "tests"
    return None


def _trunk_packages(repo: Path) -> set[str]:
    """The trunk's package names (analytics, common, ...)."""
    return {p.name for p in _packages(repo / "src" / "helpers")}


def _source(path: Path) -> tuple[str, str]:
    """A file's Python (a notebook's code cells, magics left out) and its other text (a notebook's
    markdown, where an exercise's answer may call the trunk)."""
    if path.suffix != ".ipynb":
        return path.read_text(encoding="utf-8"), ""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    code = [
        line
        for cell in cells
        if cell["cell_type"] == "code"
        for line in "".join(cell["source"]).splitlines()
        if not line.lstrip().startswith(("%", "!"))
    ]
    prose = ["".join(c["source"]) for c in cells if c["cell_type"] != "code"]
    return "\n".join(code), "\n".join(prose)


def _reads(code: str, prose: str, trunk: set[str]) -> set[tuple[str, str]]:
    """(module, name) pairs of trunk modules a piece of Python reads: `from helpers.p.m import n`,
    `m.n` after `from helpers.p import m` (aliases too), `helpers.p.m.n`; `m.n` in the prose."""
    tree = ast.parse(code)
    aliases: dict[str, str] = {}
    found: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                if node.module in trunk:
                    found.add((node.module, alias.name))
                elif dotted in trunk:
                    aliases[alias.asname or alias.name] = dotted
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in trunk:
                    aliases[alias.asname] = alias.name
    aliases |= _through_calls(tree, aliases)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            owner = ast.unparse(node.value)
            head, _, rest = owner.partition(".")
            module = aliases.get(head, head) + (f".{rest}" if rest else "")
            if module in trunk:
                found.add((module, node.attr))
    for alias, module in aliases.items():
        found |= {(module, n) for n in re.findall(rf"\b{re.escape(alias)}\.(\w+)", prose)}
    return found


def _through_calls(tree: ast.Module, aliases: dict[str, str]) -> dict[str, str]:
    """Variables that hold a trunk module a function returned (doctor's `info = _envinfo()`)."""
    returns = {
        node.name: aliases[ret.value.id]
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        for ret in ast.walk(node)
        if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Name)
        if ret.value.id in aliases
    }
    return {
        target.id: returns[node.value.func.id]
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
        if isinstance(node.value.func, ast.Name) and node.value.func.id in returns
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def _ran(repo: Path, trunk: set[str]) -> set[tuple[str, str]]:
    """Trunk names run from outside Python: `python -m helpers.p.m` (its main) anywhere in the
    repo's make and CI files or code, and pyproject's entry points (`helpers.p.m:name`)."""
    texts = [repo / "Makefile", repo / "pyproject.toml", *sorted((repo / ".ci").glob("*"))]
    text = "\n".join(p.read_text(encoding="utf-8") for p in texts if p.is_file())
    found = {(m, "main") for m in re.findall(r"-m (helpers\.\w+\.\w+)", text) if m in trunk}
    return found | {(m, n) for m, n in re.findall(r"(helpers\.\w+\.\w+):(\w+)", text) if m in trunk}


def _own_files(module: str) -> tuple[str, str]:
    """The defining module's file and its mirrored test's prefix, relative to the repo."""
    _, package, name = module.split(".")
    return f"src/helpers/{package}/{name}.py", f"tests/{package}/test_{name}"


def _trunk_exports(repo: Path = REPO_ROOT) -> list[_Export]:
    """Every trunk export with the labels of the files that read it (the tests that mirror its
    module left out; its module reads as trunk where its other code uses it); `python -m` and entry
    points read as `make`."""
    src = repo / "src"
    modules = {
        ".".join(p.relative_to(src).with_suffix("").parts): p
        for package in _packages(src / "helpers")
        for p in sorted(package.glob("*.py"))
        if p.name != "__init__.py"
    }
    readers: dict[tuple[str, str], set[str]] = {}
    files = [p for pattern in _READER_GLOBS for p in sorted(repo.glob(pattern))]
    for path in files + sorted((repo / "notebooks").glob("*.ipynb")):
        label, relative = _label(path, repo), str(path.relative_to(repo))
        if label is None:
            continue
        for key in _reads(*_source(path), set(modules)):
            own, test = _own_files(key[0])
            if relative != own and not relative.startswith(test):
                readers.setdefault(key, set()).add(label)
    for key in _ran(repo, set(modules)):
        readers.setdefault(key, set()).add("make")
    for module, path in modules.items():
        for name in _used_inside(path):
            readers.setdefault((module, name), set()).add("trunk")
    return [
        _Export(module, name, frozenset(readers.get((module, name), ())))
        for module, path in modules.items()
        for name in _all(path)
    ]


def _all(path: Path) -> list[str]:
    """A module's literal `__all__` (empty without one)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return list(ast.literal_eval(node.value))
    return []


def _used_inside(path: Path) -> set[str]:
    """The exports a module's own code reads beside their definition: the trunk still needs them."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    exported, used = set(_all(path)), set()
    for node in tree.body:
        defined = {node.name} if hasattr(node, "name") else set()
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        used |= (names - defined) & exported
    return used


def _one_chapter(exports: Sequence[_Export]) -> tuple[list[_Export], list[_Export]]:
    """Exports read by exactly one chapter (its code, tests or notebook), and those of them read by
    nothing else at all."""
    one = [e for e in exports if len(e.chapters()) == 1]
    alone = [e for e in one if all(r[:2] in ("ch", "nb") for r in e.readers)]
    return one, alone


def _exports_report(exports: Sequence[_Export]) -> list[str]:
    """One line per trunk export with its readers, then the counts issue #59 quotes."""
    lines = [f"{'export':56s} readers"]
    for e in exports:
        lines.append(f"{e.module + '.' + e.name:56s} {' '.join(sorted(e.readers)) or '-'}")
    one, alone = _one_chapter(exports)
    no_chapter = [e for e in exports if not e.chapters()]
    trunk = sum("trunk" in e.readers for e in one)
    tools = sum("trunk" not in e.readers and bool(e.readers & {"kit", "scripts"}) for e in one)
    lines.append(
        f"trunk exports: {len(exports)}; read by one chapter: {len(one)}, of them by nothing else: "
        f"{len(alone)}; read by no chapter: {len(no_chapter)}, by nothing: "
        f"{sum(not e.readers for e in exports)}"
    )
    lines.append(
        f"of the {len(one)} read by one chapter, the trunk reads {trunk} itself and the kit or the "
        f"scripts {tools} more (neither may import a chapter, so those stay in the trunk)"
    )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Print the homes table, or with --exports who reads each trunk export."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--exports", action="store_true", help="who reads each trunk export, and the counts"
    )
    args = parser.parse_args(argv)
    if args.exports:
        print("\n".join(_exports_report(_trunk_exports())))
    else:
        print("\n".join([*_report(_homes()), _notebook_line(_notebook_cells())]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
