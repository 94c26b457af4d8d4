"""Code lives with whoever reads it: three homes, and who may import each.

- the trunk, `helpers`: what two or more notebooks use; it imports neither chapters nor the kit;
- the chapters, `chapters.chNN_*`: one notebook's own code, imported by notebook NN alone (and by
  its own tests/ and tools/), never by the trunk, the kit, scripts/ or another chapter; its
  docstring names the notebook;
- the kit, `kit`: tools no notebook imports (doctor, preflight, prefetch, runner, grader, the tiny
  pair's recipes...), run as `python -m kit.<tool>`; it finds chapters, never names one.

So an instructor can drop a chapter by deleting its notebook and its chapter folder (its modules,
tests/, tools/) and the data only it reads.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from helpers.common.paths import NOTEBOOKS_DIR, REPO_ROOT

SRC = REPO_ROOT / "src"
CHAPTERS = sorted(p for p in (SRC / "chapters").iterdir() if (p / "__init__.py").is_file())
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
_CHAPTER = re.compile(r"^ch(\d\d)_\w+$")


def imported_modules(source: str) -> set[str]:
    """Every dotted module a piece of Python imports (function bodies included); `from a import b`
    counts as both `a` and `a.b`."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def notebook_code(path: Path) -> str:
    """A notebook's code cells as one Python text (IPython magics and shell lines left out)."""
    cells = json.loads(path.read_text())["cells"]
    lines = [
        line
        for cell in cells
        if cell["cell_type"] == "code"
        for line in "".join(cell["source"]).splitlines()
        if not line.lstrip().startswith(("%", "!"))
    ]
    return "\n".join(lines)


def roots(modules: set[str], root: str) -> set[str]:
    """The names under `root` (chapters, kit) among imported modules, to their second part."""
    return {".".join(m.split(".")[:2]) for m in modules if m.split(".")[0] == root}


def test_every_chapter_is_named_for_a_notebook_and_says_so() -> None:
    assert CHAPTERS, "no chapter packages found"
    numbers = {p.name[:2] for p in NOTEBOOKS}
    for chapter in CHAPTERS:
        match = _CHAPTER.match(chapter.name)
        assert match, f"{chapter.name}: a chapter is named chNN_<topic> after its notebook NN"
        assert match[1] in numbers, f"{chapter.name}: no notebook {match[1]}_*.ipynb"
        doc = ast.get_docstring(ast.parse((chapter / "__init__.py").read_text())) or ""
        assert doc.startswith(f"Notebook {match[1]} "), f"{chapter.name}: {doc[:60]!r}"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_a_notebook_imports_its_own_chapter_and_no_kit(notebook: Path) -> None:
    imported = imported_modules(notebook_code(notebook))
    chapters = roots(imported, "chapters")
    others = {c for c in chapters if not c.split(".")[1].startswith(f"ch{notebook.name[:2]}_")}
    assert not others, f"{notebook.name} imports another notebook's chapter: {sorted(others)}"
    assert not roots(imported, "kit") and "kit" not in imported, f"{notebook.name} imports the kit"


def test_each_chapter_is_imported_by_its_notebook() -> None:
    for chapter in CHAPTERS:
        number = chapter.name[2:4]
        (notebook,) = [p for p in NOTEBOOKS if p.name.startswith(f"{number}_")]
        assert f"chapters.{chapter.name}" in roots(
            imported_modules(notebook_code(notebook)), "chapters"
        ), f"{notebook.name} does not import chapters.{chapter.name}: is it still its home?"


@pytest.mark.parametrize(
    "path",
    sorted((SRC / "helpers").rglob("*.py")),
    ids=lambda p: str(p.relative_to(SRC)),
)
def test_the_trunk_imports_no_chapter_and_no_kit(path: Path) -> None:
    imported = imported_modules(path.read_text())
    assert not roots(imported, "chapters") | roots(imported, "kit"), str(path.relative_to(SRC))


def tools_or_tests(path: Path, chapter: Path) -> bool:
    """Whether a file of a chapter sits in its tools/ or tests/ (which may use the kit)."""
    return path.relative_to(chapter).parts[0] in ("tools", "tests")


#: The kit's modules and the scripts: tools that must outlive any chapter dropped from a fork.
TOOLS = sorted([*(SRC / "kit").rglob("*.py"), *(REPO_ROOT / "scripts").rglob("*.py")])


def chapter_imports(modules: set[str]) -> set[str]:
    """The chapters (chapters.<name>) among imported modules; the bare `chapters` package, which a
    tool walks to find what chapters there are, is none."""
    return {m for m in roots(modules, "chapters") if m != "chapters"}


@pytest.mark.parametrize("path", TOOLS, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_the_kit_and_the_scripts_import_no_chapter(path: Path) -> None:
    """A chapter's own tools live in its tools/; the kit and scripts/ find chapters, never name
    one, so deleting a chapter's folder leaves them importable."""
    found = chapter_imports(imported_modules(path.read_text(encoding="utf-8")))
    assert not found, f"{path.relative_to(REPO_ROOT)} imports {sorted(found)}"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_a_chapter_imports_no_other_chapter_and_no_kit(chapter: Path) -> None:
    """Its modules import neither; its tools/ and tests/ may import the kit, no other chapter."""
    for path in chapter.rglob("*.py"):
        imported = imported_modules(path.read_text())
        others = roots(imported, "chapters") - {f"chapters.{chapter.name}"}
        assert not others, f"{path.relative_to(SRC)} imports {sorted(others)}"
        if not tools_or_tests(path, chapter):
            assert not roots(imported, "kit"), f"{path.relative_to(SRC)} imports the kit"


def test_the_checks_see_a_stray_import() -> None:
    stray = "def f():\n    from chapters.ch98_planted import server\n    import kit.doctor\n"
    imported = imported_modules(stray)
    assert roots(imported, "chapters") == {"chapters.ch98_planted"}
    assert roots(imported, "kit") == {"kit.doctor"}
    assert chapter_imports(imported) == {"chapters.ch98_planted"}
    assert chapter_imports(imported_modules("import chapters\nfrom chapters import ch99_x")) == {
        "chapters.ch99_x"
    }


@pytest.mark.parametrize(
    "path",
    sorted(p for p in SRC.rglob("*.py") if re.search(r"^def main\(", p.read_text(), re.M)),
    ids=lambda p: str(p.relative_to(SRC)),
)
def test_a_module_with_main_runs_it_under_python_m(path: Path) -> None:
    """`python -m <module>` does nothing without the guard, and exits 0 (a tool that silently
    skipped its work once: the tokenizer builder after it moved to the kit)."""
    tree = ast.parse(path.read_text())
    guards = [
        node
        for node in tree.body
        if isinstance(node, ast.If)
        and "__main__" in ast.unparse(node.test)
        and "main(" in ast.unparse(node)
    ]
    assert guards, f"{path.relative_to(SRC)} defines main() but never calls it under __main__"
