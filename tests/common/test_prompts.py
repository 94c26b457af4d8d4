"""helpers.common.prompts: held-out prompts by category, and the one-message chat."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.common.prompts import CATEGORIES, as_messages, interleaved, load_prompts, save_prompts


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
