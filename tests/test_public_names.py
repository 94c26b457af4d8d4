"""A package's face is a choice, not a copy of its code.

A package's `__all__` names its modules. A module's top-level names come in three kinds:
- exported (in `__all__`): used outside its package, by a notebook's code, a script, another
  package, an entry point in pyproject.toml, `python -m`, or as a notebook cell's library twin;
- package-internal (public, not in `__all__`): used only by the package's other modules;
- private (`_name`): used only inside the module. Tests may reach private names; nothing else does.

"Used outside its package, so exported" holds in any fork. "Nothing public or exported that no one
uses" holds for the whole workbook only (`whole_workbook`): a chapter dropped from a fork leaves the
trunk names only it read, which kit.drop_check lists as the fork's trim list.
"""

from __future__ import annotations

import ast
import json
import re
from functools import cache
from pathlib import Path

import pytest

from helpers.common.paths import REPO_ROOT

SRC = REPO_ROOT / "src"
#: Every package of the three homes: the trunk's (helpers.<concept>), the chapters' and the kit.
PACKAGES = sorted(
    [
        p
        for root in ("helpers", "chapters")
        for p in (SRC / root).iterdir()
        if (p / "__init__.py").is_file()
    ]
    + [SRC / "kit"]
)
MODULES = sorted(p for pkg in PACKAGES for p in pkg.glob("*.py") if p.name != "__init__.py")


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
        elif isinstance(node, ast.Assign):  # `A = …` and `A, B = …, …`
            targets = [
                e for t in node.targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])
            ]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_") and n != "logger"}


@cache
def dotted(path: Path) -> str:
    """A module file's dotted name: helpers.common.paths, chapters.chNN_x.server, kit.runner."""
    return ".".join(path.relative_to(SRC).with_suffix("").parts)


@cache
def users() -> dict[str, str]:
    """Everything outside a module that may use it: src modules, scripts and chapters' tools,
    notebook code, the entry points of pyproject.toml, the chapters' records (a twin is exported
    by design; a make hook, a GPU step or a sweep is run)."""
    texts = {f"src:{dotted(p)}": p.read_text() for p in MODULES}
    texts |= {f"script:{p.name}": p.read_text() for p in (REPO_ROOT / "scripts").glob("*.py")}
    # a chapter's tools (its GPU lab, its builders) are its scripts
    texts |= {f"tool:{dotted(p)}": p.read_text() for p in SRC.glob("chapters/*/tools/*.py")}
    for p in (REPO_ROOT / "notebooks").glob("*.ipynb"):
        cells = json.loads(p.read_text())["cells"]
        code = [c["source"] for c in cells]  # markdown too: an exercise's answer calls helpers
        texts[f"notebook:{p.name}"] = "\n".join("".join(s) for s in code)
    # `python -m helpers.pkg.mod` (Makefile, scripts, src, CI) runs the module's main(), as
    # does a helper run by path (`Path(guard.__file__)`): main is its one public name
    runners = [REPO_ROOT / "Makefile", *(REPO_ROOT / ".ci").glob("*"), *SRC.rglob("*.py")]
    records = sorted(SRC.glob("chapters/ch*/chapter.json"))
    runners += [*(REPO_ROOT / "scripts").glob("*"), *records]
    ran = {
        m
        for p in runners
        if p.is_file()
        for m in re.findall(r"-m ((?:helpers|chapters)\.\w+\.\w+|kit\.\w+)", p.read_text())
    }
    ran |= {
        m
        for p in runners
        if p.is_file()
        for m in re.findall(r'"((?:helpers|chapters)\.\w+\.\w+|kit\.\w+)"', p.read_text())
    }
    cli = [m.rsplit(".", 1)[1] for m in sorted(ran)]
    # `pytest -p helpers.pkg.mod` loads a pytest plugin: its hooks are its public names
    plugins = {
        m
        for p in runners
        if p.is_file()
        for m in re.findall(r"-p ((?:helpers|chapters)\.\w+\.\w+|kit\.\w+)", p.read_text())
    }
    hooks = [
        f"{m.rsplit('.', 1)[1]}.{h}"
        for m in sorted(plugins)
        for h in re.findall(
            r"^def (pytest_\w+)", (SRC / f"{m.replace('.', '/')}.py").read_text(), re.M
        )
    ]
    cli += [
        m for p in SRC.rglob("*.py") for m in re.findall(r"Path\((\w+)\.__file__\)", p.read_text())
    ]
    texts["python -m"] = "\n".join(f"{m}.main" for m in cli)
    texts["pytest -p"] = "\n".join(hooks)
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    texts["pyproject"] = re.sub(r"helpers\.(\w+)\.(\w+):(\w+)", r"\2.\3", pyproject)
    texts["chapter records"] = "\n".join(p.read_text() for p in records)
    return texts


@cache
def _module_in(key: str, package: str, module: str) -> tuple[frozenset[str], bool, bool]:
    """How users()[key] can reach <package>.<module>: the names it calls the module by, whether it
    names the module (a helpers module reaching it through a variable), whether it imports from it."""
    text = users()[key]
    renamed = re.findall(rf"\b{module} as (\w+)", text) if f"{module} as " in text else []
    aliases = frozenset({module, *renamed})
    named = key.startswith("src:") and re.search(rf"\b{module}\b", text) is not None
    return aliases, named, re.search(rf"{re.escape(package)}\.{module} import", text) is not None


def used_outside(package: str, module: str, name: str) -> list[str]:
    """Where `name` of <package>.<module> (package dotted: helpers.common, kit) is used outside
    that module."""
    own, found = f"src:{package}.{module}", []
    word = re.compile(rf"\b{re.escape(name)}\b")
    for key, text in users().items():
        if key == own or name not in text:  # each way of using it spells the name
            continue
        aliases, named, imports = _module_in(key, package, module)
        dotted = any(
            f"{a}.{name}" in text and re.search(rf"\b{a}\.{re.escape(name)}\b", text)
            for a in aliases
        )
        # a module reached through a variable (doctor's `info = _envinfo()`): `.name` next to
        # the module's name in a helpers module
        via_variable = named and re.search(rf"\.{re.escape(name)}\b", text) is not None
        if dotted or (imports and word.search(text)) or via_variable:
            found.append(key)
    return found


@pytest.mark.parametrize("package", PACKAGES, ids=[p.name for p in PACKAGES])
def test_package_all_names_its_modules(package: Path) -> None:
    tree = ast.parse((package / "__init__.py").read_text())
    assert ast.get_docstring(tree), f"{package.relative_to(SRC)}/__init__.py needs a docstring"
    modules = {p.stem for p in package.glob("*.py") if p.name != "__init__.py"}
    assert set(declared_all(tree) or []) == modules


def used_outside_package(package: str, module: str, name: str) -> list[str]:
    """Where `name` is used outside its package: notebooks, scripts, other packages, CLIs, twins."""
    inside = f"src:{package}."
    return [k for k in used_outside(package, module, name) if not k.startswith(inside)]


def _face(path: Path) -> tuple[str, list[str], set[str], set[str]]:
    """A module's name for messages, its `__all__`, its public names and those used outside its
    package."""
    tree = ast.parse(path.read_text())
    declared = declared_all(tree)
    package, module = dotted(path).rsplit(".", 1)
    where = str(path.relative_to(SRC))
    assert declared is not None, f"{where} has no __all__"
    assert len(declared) == len(set(declared))
    public = defined_public(tree)
    face = {n for n in public if used_outside_package(package, module, n)}
    return where, declared, public, face


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(SRC)) for p in MODULES])
def test_module_exports_what_others_use(path: Path) -> None:
    where, declared, public, face = _face(path)
    assert set(declared) <= public, f"{where}: __all__ names what it does not define"
    package = dotted(path).rsplit(".", 1)[0]
    missing = sorted(face - set(declared))
    assert not missing, f"{where}: used outside {package}, so add to __all__: {missing}"


@pytest.mark.whole_workbook
@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(SRC)) for p in MODULES])
def test_module_exports_nothing_else(path: Path) -> None:
    where, declared, public, face = _face(path)
    package, module = dotted(path).rsplit(".", 1)
    unused = sorted(n for n in public if not used_outside(package, module, n))
    assert not unused, f"{where}: names nothing outside it uses (make them _private): {unused}"
    extra = sorted(set(declared) - face)
    assert not extra, f"{where}: __all__ lists what nothing outside {package} uses: {extra}"


def test_a_tuple_assignment_defines_each_of_its_names() -> None:
    assert defined_public(ast.parse("A, _B = 1, 2\nC = D = 3")) == {"A", "C", "D"}


def test_the_usage_check_sees_a_module_alias_and_misses_a_stranger() -> None:
    assert used_outside("helpers.engine", "plugin", "register") == ["pyproject"]
    assert not used_outside("helpers.common", "paths", "no_such_name_anywhere")
