"""Every text read and write in src/ names its encoding: without one, Python uses the locale's,
and a machine whose locale is not UTF-8 (LANG=C on some containers) misreads the workbook's
UTF-8 files (τ, ρ, ≤ in its records). The scan: `read_text`, `write_text` and `open` in text mode
without `encoding=`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers.common.paths import REPO_ROOT

#: src/'s modules; a chapter's own tests (src/chapters/chNN_*/tests/) are tests, as tests/ is.
SOURCES = sorted(
    p
    for p in (REPO_ROOT / "src").rglob("*.py")
    if "tests" not in p.relative_to(REPO_ROOT / "src").parts
)
#: Modules whose `open` is not a file's text open.
_NOT_TEXT_OPEN = {"os", "webbrowser", "Image", "tarfile", "gzip", "zipfile", "io", "safetensors"}


def _mode(node: ast.Call, position: int) -> object:
    """The mode an open() call passes (positional at `position`, or mode=), None when unset."""
    if len(node.args) > position and isinstance(node.args[position], ast.Constant):
        return node.args[position].value
    for keyword in node.keywords:
        if keyword.arg == "mode":
            return keyword.value.value if isinstance(keyword.value, ast.Constant) else "unknown"
    return None


def unnamed_encodings(source: str) -> list[int]:
    """Lines of text reads and writes without `encoding=`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or any(k.arg == "encoding" for k in node.keywords):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name in ("read_text", "write_text"):
            found.append(node.lineno)
        elif name == "open":
            owner = getattr(getattr(func, "value", None), "id", None)
            mode = _mode(node, 1 if isinstance(func, ast.Name) else 0)
            binary = isinstance(mode, str) and ("b" in mode or mode == "unknown")
            if owner not in _NOT_TEXT_OPEN and not binary:
                found.append(node.lineno)
    return found


def test_the_scan_sees_each_kind_and_spares_binary() -> None:
    code = (
        "a = p.read_text()\np.write_text(s)\nf = open(x)\ng = p.open('w')\n"
        "h = open(x, 'rb')\ni = p.read_text(encoding='utf-8')\nj = os.open(x, 0)\n"
    )
    assert unnamed_encodings(code) == [1, 2, 3, 4]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO_ROOT / "src")))
def test_every_text_read_and_write_names_its_encoding(path: Path) -> None:
    lines = unnamed_encodings(path.read_text(encoding="utf-8"))
    assert not lines, f"{path.name}: text read/write without encoding= at lines {lines}"
