"""kit.homes: each home's size is counted from its files, and the trunk is read against its targets."""

from __future__ import annotations

import json
from pathlib import Path

from kit import homes


def package(root: Path, name: str, modules: dict[str, str]) -> None:
    """A package folder with an __init__ and the given modules."""
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text('"""Doc."""\n')
    for module, text in modules.items():
        (folder / f"{module}.py").write_text(text)


def test_sizes_come_from_the_files_and_the_verdict_from_the_targets(tmp_path: Path) -> None:
    package(tmp_path, "helpers/common", {"a": '__all__ = ["x", "y"]\nx = y = 1\n'})
    package(tmp_path, "chapters/ch98_intro", {"b": '__all__ = ["z"]\nz = 1\n'})
    package(tmp_path, "kit", {"c": "def main():\n    return 0\n"})
    found = homes._homes(tmp_path)
    (trunk,) = found["trunk"]
    assert (trunk.name, trunk.modules, trunk.lines, trunk.exports) == ("helpers.common", 1, 3, 2)
    assert [h.name for h in found["chapters"]] == ["chapters.ch98_intro"]
    assert found["kit"][0].exports == 0
    assert homes._report(found)[-1] == (
        "trunk: 3 lines (target <= 8,000: met), 2 exported names (target <= 200: met)"
    )
    big = {"trunk": [homes._Home("helpers.x", 1, 9_000, 201)], "chapters": [], "kit": []}
    assert "target <= 8,000: missed" in homes._report(big)[-1]
    assert "target <= 200: missed" in homes._report(big)[-1]


def write(root: Path, relative: str, text: str) -> None:
    """A file under root, its folders made."""
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def notebook(root: Path, name: str, code: str, markdown: str = "") -> None:
    """notebooks/<name> with one code cell (and a markdown cell)."""
    cells = [{"cell_type": "code", "source": code, "metadata": {}, "outputs": []}]
    cells.append({"cell_type": "markdown", "source": markdown, "metadata": {}})
    write(root, f"notebooks/{name}", json.dumps({"cells": cells}))


def test_exports_are_read_by_who_imports_them_and_counted_per_chapter(tmp_path: Path) -> None:
    names = ["shared", "only01", "alone02", "runs", "main", "unread", "via_var", "inner"]
    inner = "inner = 1\ndef main():\n    return inner\n"
    package(tmp_path, "src/helpers/common", {"m": f"__all__ = {names!r}\n{inner}"})
    package(tmp_path, "src/chapters/ch91_a", {"x": "from helpers.common.m import only01\n"})
    write(
        tmp_path, "src/chapters/ch92_b/tests/test_y.py", "import helpers.common.m as mm\nmm.shared"
    )
    notebook(tmp_path, "91_a.ipynb", "%time\nfrom helpers.common import m\nm.shared", "m.runs")
    notebook(
        tmp_path, "92_b.ipynb", "from helpers.common import m as h\nh.alone02(h.runs, h.inner)"
    )
    package(tmp_path, "src/kit", {"k": "from helpers.common import m\nm.only01\n"})
    write(tmp_path, "scripts/s.py", "import helpers.common.m\nhelpers.common.m.shared")
    write(tmp_path, "tests/common/test_m.py", "from helpers.common import m\nm.unread")
    write(tmp_path, "Makefile", "run:\n\tpython -m helpers.common.m\n")
    via = "from helpers.common import m\ndef f():\n    return m\ninfo = f()\ninfo.via_var\n"
    write(tmp_path, "exercises/e.py", via)
    found = {e.name: e for e in homes._trunk_exports(tmp_path)}
    assert found["shared"].readers == {"ch92", "nb91", "scripts"}
    assert found["only01"].readers == {"ch91", "kit"}
    assert found["alone02"].readers == {"nb92"}
    assert found["runs"].readers == {"nb91", "nb92"}
    assert found["main"].readers == {"make"}
    assert found["inner"].readers == {"nb92", "trunk"}
    assert found["unread"].readers == set()
    assert found["via_var"].readers == {"exercises"}
    one, alone = homes._one_chapter(list(found.values()))
    assert sorted(e.name for e in one) == ["alone02", "inner", "only01"]
    assert [e.name for e in alone] == ["alone02"]
    assert homes._exports_report(list(found.values()))[-2:] == [
        "trunk exports: 8; read by one chapter: 3, of them by nothing else: 1; "
        "read by no chapter: 3, by nothing: 1",
        "of the 3 read by one chapter, the trunk reads 1 itself and the kit or the scripts 1 more "
        "(neither may import a chapter, so those stay in the trunk)",
    ]
