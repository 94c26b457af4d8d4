"""kit.homes: each home's size is counted from its files, and the trunk is read against its targets."""

from __future__ import annotations

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
