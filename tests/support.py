"""Shared by tests: import a script as a module, run a module as make does,
what a notebook's cells define."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from helpers.common.paths import DATA_DIR, NOTEBOOKS_DIR, REPO_ROOT


def wait_until(check, within: float, what: str) -> None:
    """Poll `check()` until true; fail naming `what` after `within` seconds."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"{what} after {within:.0f} s"
        time.sleep(0.05)


def notebook_defs(notebook: str, *names: str) -> dict[str, Any]:
    """What a notebook's code cells define, d2l style, for a test to call: every import, function
    and class of its cells, its literal constants (`DTYPE_BYTES = {...}`) and the assignments to
    `names`, run in cell order (nothing else runs: no engine, no server)."""
    import nbformat

    space: dict[str, Any] = {}
    for cell in nbformat.read(str(NOTEBOOKS_DIR / notebook), as_version=4).cells:
        if cell.cell_type != "code":
            continue
        for node in ast.parse(cell.source).body:
            targets = [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
            assigned = isinstance(node, ast.Assign) and (
                any(t in names for t in targets) or _literal_constant(targets, node.value)
            )
            kinds = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)
            if assigned or isinstance(node, kinds):
                exec(compile(ast.Module([node], []), notebook, "exec"), space)
    missing = [name for name in names if name not in space]
    assert not missing, f"{notebook} defines no {missing} in its cells"
    return space


def _literal_constant(targets: list[str], value: ast.expr) -> bool:
    """True for `NAME = <a Python literal>` (an upper-case name)."""
    try:
        ast.literal_eval(value)
    except ValueError:
        return False
    return bool(targets) and all(t.isupper() for t in targets)


def load_script(name: str) -> ModuleType:
    """scripts/<name>.py imported as a module (registered first: a dataclass in it needs that)."""
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run_module(
    module: str, args: list[str], env: dict[str, str], timeout: float = 120
) -> tuple[subprocess.CompletedProcess, float]:
    """`python -m MODULE ARGS` in the repo root with `env`: (result, seconds)."""
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done, time.perf_counter() - t0


#: One wrong value of each JSON type (and a negative int), as a hand-edited JSON file might hold.
WRONG_VALUES: dict[str, Any] = {
    "str": "7",
    "list": [1.5],
    "dict": {"a": 1},
    "float": 2.5,
    "None": None,
    "bool": True,
    "negative-int": -3,
}


def accepted(kind: str, value: Any) -> bool:
    """True when a field kind of helpers.common.configs takes `value` (null: only where the kind
    says `or null`)."""
    from helpers.common.configs import _kind

    if value is None:
        return kind.endswith(" or null")
    return _kind(kind.removesuffix(" or null"))[1](value)


def tiny_pair_present(data: Path = DATA_DIR) -> bool:
    """Whether the tiny pair's weights are in data/ (`make tiny-models` writes them)."""
    pair = ("tiny-qwen3-moe", "tiny-qwen3-moe-eagle3")
    return all((data / name / "model.safetensors").is_file() for name in pair)


#: The skip of a test that needs the tiny pair's weights, where they are not in data/.
needs_shipped = pytest.mark.skipif(
    not tiny_pair_present(), reason="the tiny pair is not in data/: run `make tiny-models`"
)


def whole_chapters(root: Path = REPO_ROOT) -> int:
    """How many chapters the whole workbook has (pyproject.toml's [tool.workbook] chapters)."""
    text = (root / "pyproject.toml").read_text(encoding="utf-8")
    found = re.search(r"^\[tool\.workbook\]\n(?:#.*\n)*chapters = (\d+)$", text, re.M)
    if found is None:
        raise ValueError(f"{root / 'pyproject.toml'} has no [tool.workbook] chapters = N")
    return int(found[1])
