"""kit.drop_check on a planted repo: dropping a chapter the trunk still names is red (each failing
test named, with why it failed), dropping one nobody else names is green, the scratch copy is gone afterwards, and an unknown chapter is refused."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from helpers.common.paths import REPO_ROOT
from kit import drop_check

NOTEBOOK = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
PYPROJECT = (
    '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'
    'markers = ["vllm: an engine", "whole_workbook: the whole workbook"]\n'
)
#: A trunk test that opens notebook 91 by name: dropping 91 breaks it.
TRUNK_TEST = (
    "from pathlib import Path\n\n\n"
    "def test_the_first_notebook_is_there() -> None:\n"
    '    assert Path("notebooks/91_first.ipynb").is_file()\n'
)
#: A trunk test that imports chapter 91: dropping 91 breaks its collection.
IMPORT_TEST = "import chapters.ch91_first\n\n\ndef test_it() -> None:\n    assert chapters\n"
#: A whole-workbook test that names chapter 92: dropping 92 leaves it red, noted and not failed.
WHOLE_TEST = (
    "from pathlib import Path\n\nimport pytest\n\n\n"
    "@pytest.mark.whole_workbook\n"
    "def test_the_second_chapter_uses_the_name() -> None:\n"
    '    assert Path("src/chapters/ch92_second").is_dir()\n'
)
#: The test of one script: not a repo-wide test, so its failure does not count.
SCRIPT_TEST = "def test_the_script() -> None:\n    assert False\n"


def write(root: Path, name: str, text: str) -> None:
    """Write a file of the planted repo, its folders made."""
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(text, encoding="utf-8")


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repo with two chapters (91, 92), two trunk tests naming 91 and a script with its
    test."""
    root = tmp_path / "repo"
    files = {
        "pyproject.toml": PYPROJECT,
        "src/trunk/__init__.py": '"""The trunk."""\n',
        "src/chapters/__init__.py": '"""Chapters."""\n',
        "scripts/tool.py": '"""A script."""\n',
        "tests/__init__.py": "",
        "tests/test_trunk.py": TRUNK_TEST,
        "tests/test_imports_91.py": IMPORT_TEST,
        "tests/test_tool.py": SCRIPT_TEST,
        "tests/test_whole.py": WHOLE_TEST,
    }
    for nn, topic in (("91", "first"), ("92", "second")):
        files[f"notebooks/{nn}_{topic}.ipynb"] = json.dumps(NOTEBOOK)
        files[f"src/chapters/ch{nn}_{topic}/__init__.py"] = f'"""Notebook {nn}."""\n'
    for name, text in files.items():
        write(root, name, text)
    # the planted repo's pytest needs no plugin (loading the venv's costs seconds a start)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    write(root, "untracked.py", "import nowhere_to_be_found\n")  # not tracked: not copied
    return root


def test_chapters_are_found_and_a_drop_deletes_the_notebook_and_the_folder(planted: Path) -> None:
    assert drop_check._chapters(planted) == ["91", "92"]
    dropped = [p.relative_to(planted).as_posix() for p in drop_check._chapter_paths(planted, "91")]
    assert dropped == [
        "notebooks/91_first.ipynb",
        "src/chapters/ch91_first",
    ]


def test_the_chapter_the_trunk_names_is_red_the_other_green_and_nothing_is_left(
    planted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    checks = drop_check._check_steps(planted)
    assert [s.name for s in checks] == ["ruff", "checks"]
    # the script's test is not repo-wide
    assert checks[-1].argv[-4:] == (
        "trim",
        "tests/test_imports_91.py",
        "tests/test_trunk.py",
        "tests/test_whole.py",
    )
    red = drop_check._check_drop(planted, ["91"], [], checks, "91")
    green = drop_check._check_drop(planted, ["92"], [], checks, "92")
    assert not red.green
    gone = "ModuleNotFoundError: No module named 'chapters.ch91_first'"
    assert red.failures[0] == f"collect: ERROR tests/test_imports_91.py - {gone}"
    failed, error = red.failures[1:]  # the file it could not collect did not stop the others
    assert failed == (
        "repo-wide: FAILED tests/test_trunk.py::test_the_first_notebook_is_there - "
        "AssertionError: assert False"
    )
    assert error == f"repo-wide: ERROR tests/test_imports_91.py - {gone}"
    assert green.green, green.failures
    # the whole-workbook test is red without 92: the fork's trim list, a note
    (trim,) = green.notes
    assert trim.splitlines()[0] == "1 advisory lines (the fork's trim list):"
    assert "trim: FAILED tests/test_whole.py::test_the_second_chapter_uses_the_name" in trim
    assert red.notes == ()
    assert list(scratch.iterdir()) == []
    table = drop_check._table([red, green])
    assert "91               red" in table and "92               green" in table


def test_a_chapter_left_imported_is_red_at_the_import_step(planted: Path) -> None:
    write(planted, "src/trunk/uses.py", "from chapters import ch92_second\n")
    subprocess.run(["git", "-C", str(planted), "add", "-A"], check=True)
    checks = drop_check._check_steps(planted)[1:2]
    row = drop_check._check_drop(planted, ["92"], [], checks, "92")
    (failure,) = row.failures
    assert failure.startswith("imports: ERROR import trunk.uses: ImportError: cannot import name")


def test_a_fork_of_the_preloaded_server_finds_what_a_new_process_finds(planted: Path) -> None:
    write(planted, "src/trunk/uses.py", "from chapters import ch92_second\n")
    subprocess.run(["git", "-C", str(planted), "add", "src/trunk/uses.py"], check=True)
    checks, forks = drop_check._check_steps(planted), drop_check._Forks(planted)

    def seen(row: drop_check._Row) -> list[str]:
        """The row's lines, each scratch copy's path made one."""
        return [re.sub(r"/\S*drop-check-\w+/tree", "TREE", x) for x in row.failures + row.notes]

    for nn in ("91", "92"):
        alone = drop_check._check_drop(planted, [nn], [], checks, nn)
        forked = drop_check._check_drop(planted, [nn], [], checks, nn, forks=forks)
        assert seen(forked) == seen(alone)
        assert forked.failures  # 91: the trunk test names it; 92: trunk.uses imports it
    quiet = drop_check._check_steps(planted, trim=False)
    assert drop_check._check_drop(planted, ["92"], [], quiet, "92", forks=forks).notes == ()


def test_a_process_that_dies_in_a_phase_fails_that_phase() -> None:
    start, end = drop_check._PHASE, drop_check._PHASE_END
    output = f"{start} imports\n{end} imports 0\n{start} collect\nSegmentation fault\n"
    assert drop_check._phases(output) == [
        ("imports", 0, ""),
        ("collect", 1, "Segmentation fault"),
    ]


def test_an_unknown_chapter_is_refused_in_one_line(
    planted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert drop_check.main(["91", "99"], root=planted) == 2
    assert drop_check.main(["--keep", "91,98"], root=planted) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "[drop_check] no chapter 99 here (chapters: 91 92)",
        "[drop_check] no chapter 98 here (chapters: 91 92)",
    ]


def test_the_layout_doc_names_what_a_drop_rewrites() -> None:
    doc = (REPO_ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    section = doc.split("## Dropping a chapter", 1)[1]
    for step in drop_check._derived_steps("python"):
        assert f"`python {' '.join(step.argv[1:])}`" in section, step.name
    assert drop_check._TABLE_START in section and drop_check._TABLE_END in section


def test_the_markdown_table_replaces_only_the_block_between_its_markers(tmp_path: Path) -> None:
    doc = tmp_path / "layout.md"
    start, end = drop_check._TABLE_START, drop_check._TABLE_END
    doc.write_text(f"# Head\n\n{start}\nold table\n{end}\n\ntail\n", encoding="utf-8")
    rows = [
        drop_check._Row("91", True, 12.4),
        drop_check._Row("92", False, 30.0, tuple(f"repo-wide: FAILED t{i} | x" for i in range(5))),
    ]
    drop_check._rewrite_doc(doc, drop_check._markdown(rows, 42.0, 2))
    text = doc.read_text(encoding="utf-8")
    assert text.startswith(f"# Head\n\n{start}\n`python -m kit.drop_check`, ")
    assert text.endswith(f"\n{end}\n\ntail\n") and "old table" not in text
    assert ": 1 of 2 green, 42 s in all (2 at a time on " in text
    assert "| 91 | green | 12 |  |" in text
    assert "| 92 | red | 30 | repo-wide: FAILED t0 \\| x<br>" in text and "(+2 more) |" in text
    doc.write_text("no markers\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no drop-check table"):
        drop_check._rewrite_doc(doc, "table")
