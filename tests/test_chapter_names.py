"""No chapter is named outside its folder: the trunk, the kit, scripts, CI, the Makefile and the
repo-wide tests find chapters through kit.chapters (each chapter's chapter.json), so deleting a
chapter's folder and its notebook leaves nothing behind that names it.

A name is `chNN_` (a chapter's folder), `chapters.chNN` (its package) or a notebook's file name as
it is in notebooks/ (`NN_topic`, with or without `.ipynb`). Chapters 90-99 are the ones tests plant
in tmp_path (`ch98_planted`), never shipped, so they may be written anywhere; and a made-up notebook
name (`01_a.ipynb`) is not a notebook's. The chapter folders, the notebooks and docs/ may name
chapters. ALLOWED lists each file that still does, and why; an entry that no longer names one fails.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers.common.paths import NOTEBOOKS_DIR, REPO_ROOT

#: Where no chapter may be named: files under these folders, and these files.
WATCHED_DIRS = ("src/helpers", "src/kit", "scripts", ".ci", ".github", "tests")
WATCHED_FILES = ("Makefile",)
#: A chapter folder or package, outside the planted range 90-99.
CHAPTER_NAME = re.compile(r"\bch[0-8]\d_|\bchapters\.ch[0-8]\d")
#: Files that still name a chapter, each with the reason it may for now.
ALLOWED: dict[str, str] = {}


def notebook_names(folder: Path = NOTEBOOKS_DIR) -> re.Pattern[str]:
    """The notebooks' own names (`NN_topic`, the .ipynb optional), as they are in folder."""
    stems = sorted(p.stem for p in folder.glob("[0-9][0-9]_*.ipynb"))
    return re.compile(rf"\b({'|'.join(map(re.escape, stems))})\b" if stems else r"(?!)")


def named_chapters(text: str, notebooks: re.Pattern[str]) -> list[str]:
    """The chapter and notebook names in a text, one per line that has one."""
    return [
        f"{n}: {m[0]}"
        for n, line in enumerate(text.splitlines(), 1)
        for m in [CHAPTER_NAME.search(line) or notebooks.search(line)]
        if m
    ]


def watched(root: Path = REPO_ROOT) -> list[Path]:
    """The text files where no chapter may be named."""
    files = [root / f for f in WATCHED_FILES if (root / f).is_file()]
    for folder in WATCHED_DIRS:
        files += [p for p in sorted((root / folder).rglob("*")) if p.is_file()]
    return [
        p
        for p in files
        if "__pycache__" not in p.parts and p.suffix not in (".pyc", ".png", ".safetensors")
    ]


def offenders(root: Path = REPO_ROOT, notebooks: Path = NOTEBOOKS_DIR) -> dict[str, list[str]]:
    """Watched file (relative) -> the lines that name a chapter or a notebook."""
    pattern = notebook_names(notebooks)
    found = {}
    for path in watched(root):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        hits = named_chapters(text, pattern)
        if hits:
            found[path.relative_to(root).as_posix()] = hits
    return found


def test_no_chapter_is_named_outside_its_folder() -> None:
    found = {path: hits for path, hits in offenders().items() if path not in ALLOWED}
    lines = [f"{path}:{hit}" for path, hits in found.items() for hit in hits]
    assert not lines, "ask kit.chapters (chapter.json) instead of naming:\n" + "\n".join(lines)


def test_every_allowed_file_still_names_one() -> None:
    found = offenders()
    stale = [p for p in ALLOWED if p not in found]
    assert not stale, f"drop these from ALLOWED, they name no chapter now (or are gone): {stale}"


#: Lines that name a chapter, NN standing for a shipped chapter's number (written so, so that this
#: file names none).
PLANTED = [
    "from chapters.chNN_x import server",
    "NOTEBOOK = 'NN_planted_topic.ipynb'",
    "see NN_planted_topic for the lesson",
    "python -m chapters.chNN_y.tools.build",
    "rm -rf src/chapters/chNN_z/",
]


@pytest.mark.parametrize("planted", PLANTED)
def test_a_planted_name_is_caught(tmp_path: Path, planted: str) -> None:
    planted = planted.replace("NN", "03")
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / "NN_planted_topic.ipynb".replace("NN", "03")).write_text("{}")
    (tmp_path / "src" / "kit").mkdir(parents=True)
    (tmp_path / "src" / "kit" / "tool.py").write_text(f'"""A tool."""\n{planted}\n')
    own = tmp_path / "src" / "chapters" / "ch93_x" / "tests"
    own.mkdir(parents=True)
    (own / "test_own.py").write_text(planted)  # in a chapter's own folder: allowed
    (tmp_path / "Makefile").write_text("x:\n\ttrue  # 01_a.ipynb, ch98_planted: made up\n")
    found = offenders(tmp_path, notebooks)
    assert list(found) == ["src/kit/tool.py"] and found["src/kit/tool.py"][0].startswith("2: ")


@pytest.mark.whole_workbook
def test_the_whole_workbooks_chapter_count_is_recorded() -> None:
    from kit import chapters
    from tests.support import whole_chapters

    found, whole = len(chapters.discover()), whole_chapters()
    assert found == whole, (
        f"{found} chapters here: pyproject.toml's [tool.workbook] chapters says {whole}"
    )
