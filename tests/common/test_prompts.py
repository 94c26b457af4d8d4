"""helpers.common.prompts: held-out prompts by category, and the one-message chat."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.common.prompts import CATEGORIES, as_messages, interleaved, load_prompts


def save_prompts(prompts: dict[str, list[str]], out_dir: Path) -> None:
    """Write one JSON list per category, as kit.tiny_recipe does."""
    for cat, items in prompts.items():
        (out_dir / f"{cat}.json").write_text(json.dumps(items))


def test_round_trip_and_first_n(tmp_path: Path) -> None:
    prompts = {c: [f"{c}-{i}" for i in range(3)] for c in CATEGORIES}
    save_prompts(prompts, tmp_path)
    assert load_prompts(None, tmp_path) == prompts
    assert load_prompts(2, tmp_path) == {c: v[:2] for c, v in prompts.items()}


def test_interleaved_round_robin_and_repeats() -> None:
    prompts = {"a": ["a1", "a2"], "b": ["b1", "b2"]}
    assert interleaved(prompts, 3) == ["a1", "b1", "a2"]
    assert interleaved(prompts, 6) == ["a1", "b1", "a2", "b2", "a1", "b1"]
    with pytest.raises(ValueError, match="no prompts"):
        interleaved({"a": []}, 2)


def test_as_messages() -> None:
    assert as_messages("hi") == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ('["a complete prompt", "one cut in', "is not valid JSON (JSONDecodeError at line 1"),
        ('{"prompts": ["x"]}', "is not a non-empty JSON list of prompt strings"),
        ("[]", "is not a non-empty JSON list of prompt strings"),
        ("[1, 2]", "is not a non-empty JSON list of prompt strings"),
    ],
)
def test_a_damaged_prompt_file_is_named(tmp_path: Path, content: str, says: str) -> None:
    save_prompts({c: [f"{c}-0"] for c in CATEGORIES}, tmp_path)
    (tmp_path / "prose.json").write_text(content)
    with pytest.raises(ValueError) as err:
        load_prompts(None, tmp_path)
    assert str(err.value).startswith(f"{tmp_path / 'prose.json'} {says}"), err.value
    assert "\n" not in str(err.value)


def test_a_missing_prompt_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="structured.json is missing"):
        load_prompts(None, tmp_path)
