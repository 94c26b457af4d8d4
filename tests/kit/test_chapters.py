"""kit.chapters: chapters are found by their records, a bad record fails in one line, and the
commands make and gpu_check.sh call answer from the records (planted chapters, never a real one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers.common.paths import NOTEBOOKS_DIR
from kit import chapters

GOOD: dict[str, Any] = {
    "title": "A planted chapter",
    "level": "core",
    "notebook": "98_planted.ipynb",
    "readme": "plant a chapter",
    "promises": [{"case": "a planted fault", "what": "one line", "tests": ["tests/test_fault.py"]}],
    "twins": [{"cell": "f", "library": "helpers.x.f"}],
    "outcome_calls": ["mod.said"],
    "make": {"tiny-models": ["chapters.ch98_planted.tools.build"]},
    "gpu_steps": {"planted-lab": '"$PY" -c pass'},
    "sweeps": ["chapters.ch98_planted.tidy"],
    "max_lines": 1500,
}


def plant(root: Path, name: str = "ch98_planted", record: Any = GOOD) -> Path:
    """A chapter package under root with the given record (a dict as JSON, a str as written)."""
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text('"""Doc."""\n')
    text = record if isinstance(record, str) else json.dumps(record)
    (folder / chapters._RECORD).write_text(text, encoding="utf-8")
    return folder


def test_a_planted_chapter_is_found_and_read(tmp_path: Path) -> None:
    plant(tmp_path)
    plant(tmp_path, "ch97_other", {k: GOOD[k] for k in chapters._REQUIRED} | {
        "notebook": "97_other.ipynb", "level": "deep dive"})  # fmt: skip
    (first, second) = chapters.discover(tmp_path)
    assert (first.number, first.package, first.level) == ("97", "chapters.ch97_other", "deep dive")
    assert (second.max_lines, first.max_lines) == (1500, chapters._DEFAULT_MAX_LINES)
    assert second.twins == (chapters._Twin("f", "helpers.x.f"),)
    assert second.test_paths(second.promises[0]) == [
        "src/chapters/ch98_planted/tests/test_fault.py"
    ]
    assert chapters._hooks("tiny-models", [first, second]) == ["chapters.ch98_planted.tools.build"]
    assert chapters._step_commands([first, second]) == {"planted-lab": '"$PY" -c pass'}


BAD = [
    ({**GOOD, "level": "basic"}, "level"),
    ({**GOOD, "notebook": "97_planted.ipynb"}, "notebook"),
    ({**GOOD, "colour": "red"}, "colour"),
    ({k: v for k, v in GOOD.items() if k != "title"}, "title"),
    ({**GOOD, "readme": "two\nlines"}, "readme"),
    ({**GOOD, "twins": [{"cell": "f", "library": "f"}]}, "twins"),
    ({**GOOD, "twins": [{"cell": "f"}]}, "twins"),
    ({**GOOD, "promises": [{"case": "x", "what": "y", "tests": ["../elsewhere.py"]}]}, "promises"),
    ({**GOOD, "promises": [{"case": "x", "tests": ["tests/test_x.py"]}]}, "promises"),
    ({**GOOD, "make": {"tiny-models": ["kit.other_tool"]}}, "make"),
    ({**GOOD, "make": {"tiny-models": "chapters.ch98_planted.tools.build"}}, "make"),
    ({**GOOD, "sweeps": ["kit.runner.tidy"]}, "sweeps"),
    ({**GOOD, "gpu_steps": {"nb-03": "true"}}, "gpu_steps"),
    ({**GOOD, "outcome_calls": "mod.said"}, "outcome_calls"),
    ({**GOOD, "max_lines": "2000"}, "max_lines"),
    ({**GOOD, "max_lines": True}, "max_lines"),
    ('{"title": "cut short', "not readable JSON"),
    ("[]", "record"),
]


@pytest.mark.parametrize(("record", "named"), BAD, ids=[n for _, n in BAD])
def test_a_bad_record_fails_in_one_line_naming_its_key(
    tmp_path: Path, record: Any, named: str
) -> None:
    folder = plant(tmp_path, record=record)
    with pytest.raises(chapters._ChapterError) as caught:
        chapters.discover(tmp_path)
    line = str(caught.value)
    assert "\n" not in line and line.startswith(str(folder / chapters._RECORD)), line
    assert named in line, line


def test_a_chapter_without_a_record_or_with_a_taken_number_is_refused(tmp_path: Path) -> None:
    plant(tmp_path)
    bare = tmp_path / "ch96_bare"
    bare.mkdir()
    (bare / "__init__.py").write_text("")
    with pytest.raises(chapters._ChapterError, match="ch96_bare: a chapter package without"):
        chapters.discover(tmp_path)
    (bare / "__init__.py").unlink()
    plant(tmp_path, "ch98_twin", {**GOOD, "gpu_steps": {}, "make": {}, "sweeps": []})
    with pytest.raises(chapters._ChapterError, match="number 98 has two chapters"):
        chapters.discover(tmp_path)


def test_two_chapters_cannot_declare_one_gpu_step(tmp_path: Path) -> None:
    plant(tmp_path)
    plant(tmp_path, "ch97_other", {**GOOD, "notebook": "97_other.ipynb", "make": {}, "sweeps": []})
    with pytest.raises(chapters._ChapterError, match="'planted-lab' is another's too"):
        chapters.discover(tmp_path)


def test_the_commands_answer_from_the_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plant(tmp_path)
    root = ["--root", str(tmp_path)]
    assert chapters.main([*root, "hooks", "tiny-models"]) == 0
    assert capsys.readouterr().out == "chapters.ch98_planted.tools.build\n"
    assert chapters.main([*root, "hooks", "bench"]) == 0
    assert capsys.readouterr().out.strip() == ""
    assert chapters.main([*root, "gpu-step", "planted-lab"]) == 0
    assert capsys.readouterr().out == '"$PY" -c pass\n'
    assert chapters.main([*root, "gpu-step", "lab"]) == 2
    assert capsys.readouterr().out.count("\n") == 1
    assert chapters.main(root) == 0
    assert capsys.readouterr().out.startswith("98  core")
    (tmp_path / "ch98_planted" / chapters._RECORD).write_text("{}")
    assert chapters.main([*root, "check"]) == 1
    assert capsys.readouterr().err.count("\n") == 1


def test_the_shipped_records_read_and_pair_with_the_notebooks() -> None:
    found = chapters.discover()
    assert found, "no chapter found"
    notebooks = sorted(p.name for p in NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))
    assert sorted(c.notebook for c in found) == notebooks
    for chapter in found:
        assert chapter.folder.parent == chapters._CHAPTERS_DIR
        for step in chapter.sweeps:
            assert callable(chapters.load(step)), f"{chapter.name}: {step} is not callable"


README = """# Title

| # | notebook | you will | time |
|---|---|---|---|
| 97 | `97_gone` | gone | 5 s · 0.1 GiB |
| 98 | `98_planted` | an old line | 7 s · 0.2 GiB |

## When something goes wrong

| case | what you get | tests |
|---|---|---|
| a trunk fault | a line | `tests/test_x.py` |
| a gone fault | a line | `src/chapters/ch97_gone/tests/test_y.py` |
| another trunk fault | a line | `tests/test_z.py` |

## Next
"""


def test_the_readme_rows_are_rewritten_from_the_records(tmp_path: Path) -> None:
    plant(tmp_path)
    plant(tmp_path, "ch99_new", {**GOOD, "notebook": "99_new.ipynb", "promises": [],
                                 "make": {}, "sweeps": [], "gpu_steps": {}})  # fmt: skip
    found = chapters.discover(tmp_path)
    text = chapters._readme_text(README, found)
    assert "97_gone" not in text and "ch97_gone" not in text
    assert "| 98 | `98_planted` | plant a chapter | 7 s · 0.2 GiB |" in text
    assert "| 99 | `99_new` | plant a chapter | not measured yet |" in text
    rows = [line for line in text.split("## When")[1].splitlines() if line.startswith("| a")]
    assert rows == [
        "| a trunk fault | a line | `tests/test_x.py` |",
        "| a planted fault | one line | `src/chapters/ch98_planted/tests/test_fault.py` |",
        "| another trunk fault | a line | `tests/test_z.py` |",
    ]
    assert chapters._readme_text(text, found) == text
    readme = tmp_path / "README.md"
    readme.write_text(README, encoding="utf-8")
    assert chapters.main(["--root", str(tmp_path), "--readme", str(readme), "readme"]) == 0
    assert readme.read_text(encoding="utf-8") == text
