"""chapters.ch01_tokenizer.tokens: loading tokenizers (Qwen3's too) and its provenance, marker
checks, token tables and counts."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

from chapters.ch01_tokenizer.tokens import (
    IM_START_ID,
    count_turn_starts,
    describe,
    double_templated,
    load_qwen3,
    load_tokenizer,
    marker_ids,
    marker_problems,
    token_counts,
    token_table,
)
from helpers.common import qwen_tokenizer
from helpers.common.chat import render
from helpers.common.profiles import load_profile
from helpers.common.prompts import as_messages, load_prompts
from kit.qwen_tokenizer import _MODEL_VOCAB_SIZE

MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]


def test_tiny_profile_loads_the_shipped_tokenizer() -> None:
    loaded = load_tokenizer(load_profile("tiny"))
    assert "tiny" in loaded.note and len(loaded.tokenizer) == 2048


def test_hub_profile_offline_falls_back_in_one_line(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    loaded = load_tokenizer(load_profile("qwen3-30b-a3b"))
    assert loaded.note.startswith("model hub unreachable") and "\n" not in loaded.note
    assert len(loaded.tokenizer) == 2048


def test_marker_problems_accepts_good_and_names_bad() -> None:
    tok = load_tokenizer(load_profile("tiny")).tokenizer
    good = render(tok, MSGS)
    assert marker_problems(good, MSGS, add_generation_prompt=True) == []
    assert any(
        "generation prompt" in p for p in marker_problems(good, MSGS, add_generation_prompt=False)
    )
    broken = good.replace("<|im_start|>system", "system")
    assert any("missing" in p for p in marker_problems(broken, MSGS, add_generation_prompt=True))


def test_token_table_and_double_templating() -> None:
    tok = load_tokenizer(load_profile("tiny")).tokenizer
    text = render(tok, MSGS)
    table = token_table(tok, text)
    assert table.special.sum() == 5 and list(table.pos) == list(range(len(table)))
    twice = double_templated(tok, MSGS)
    assert text in twice and count_turn_starts(text) == 3 and count_turn_starts(twice) == 5


@pytest.mark.usefixtures("qwen3_built")
def test_shape_profile_encodes_prompts_with_qwens_tokenizer() -> None:
    loaded = load_tokenizer(load_profile("qwen3-30b-a3b-shape"))
    tok = loaded.tokenizer
    assert "Qwen3's own tokenizer, padded" in loaded.note and "\n" not in loaded.note
    assert len(tok) == _MODEL_VOCAB_SIZE
    ids = tok.apply_chat_template(as_messages("What is EAGLE-3?"), add_generation_prompt=True)
    ids = list(ids["input_ids"])
    assert ids[0] == IM_START_ID and 151_645 in ids  # <|im_start|> … <|im_end|>
    assert ids[-3:] == [IM_START_ID, *tok.encode("assistant\n")]
    assert max(ids) < 151_669, "a real prompt never encodes to a padding id"


def test_shape_profile_without_its_tokenizer_falls_back_in_one_line() -> None:
    shape = dataclasses.replace(load_profile("qwen3-30b-a3b-shape"), tokenizer="build/nowhere")
    loaded = load_tokenizer(shape)
    assert "build/nowhere is not built" in loaded.note and "using the tiny tokenizer" in loaded.note
    assert "\n" not in loaded.note and len(loaded.tokenizer) == 2048


@pytest.mark.usefixtures("qwen3_built")
def test_qwen3_loads_and_counts_beside_the_toy() -> None:
    qwen = load_qwen3()
    assert qwen is not None and "verified" in qwen.note
    markers = marker_ids(qwen.tokenizer).set_index("marker")
    assert markers.loc["<|im_start|>", "id"] == IM_START_ID
    assert markers.loc["</think>", "id"] == 151_668 and not markers.loc["</think>", "special"]
    toy = load_tokenizer(load_profile("tiny")).tokenizer
    counts = token_counts({"toy": toy, "Qwen3": qwen.tokenizer}, load_prompts(2))
    assert list(counts.index) == ["structured", "code", "prose", "creative", "all"]
    assert counts.loc["all", "prompts"] == 8
    assert (counts["Qwen3 tokens"] < counts["toy tokens"]).all(), counts


def test_load_qwen3_absent_says_so_in_one_line(tmp_path: Path, capsys) -> None:
    assert load_qwen3(tmp_path / "missing") is None
    out = capsys.readouterr().out.strip()
    assert "\n" not in out and "continuing on the tiny tokenizer" in out and "make venv" in out


def test_toy_marker_ids_and_differing_templates() -> None:
    toy = load_tokenizer(load_profile("tiny")).tokenizer
    markers = marker_ids(toy).set_index("marker")
    assert markers.loc["<|im_start|>", "id"] == 1 and markers.loc["<think>", "id"] is pd.NA
    other = toy.__class__.from_pretrained(load_profile("tiny").verifier_path())
    other.chat_template = "{{ messages[0]['content'] }}"
    with pytest.raises(ValueError, match="render different prompt texts"):
        token_counts({"toy": toy, "other": other}, load_prompts(1))


def test_describe_a_folder_not_built_is_its_status_line(tmp_path: Path) -> None:
    problem = qwen_tokenizer.status(tmp_path / "absent")
    assert problem is not None and describe(tmp_path / "absent") == [problem]


def test_im_start_id_is_the_pinned_added_token() -> None:
    assert (IM_START_ID, "<|im_start|>", True) in qwen_tokenizer.QWEN3.added_tokens
