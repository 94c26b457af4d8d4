"""Notebook 01's exercises, each variant run at CI size by calling the same code its cells call
(what is not run here, and why, is listed in tests/test_exercises.py)."""

from __future__ import annotations

import pytest

from helpers.common.profiles import load_profile

# ------------------------------------------------------------------------------------ notebook 01

MULTI = [
    {"role": "system", "content": "You are a concise assistant."},
    {"role": "user", "content": "Make JSON records for: name Ada Moreno, age 41."},
    {"role": "assistant", "content": '[{"name": "Ada Moreno", "age": 41}]'},
    {"role": "user", "content": "Now add her city, Porto."},
]


def test_01_ex1_no_generation_prompt_ends_after_the_closed_turn(tok) -> None:
    from chapters.ch01_tokenizer.tokens import token_table
    from helpers.common.chat import render

    last = token_table(tok, render(tok, MULTI, add_generation_prompt=False)).tail(3)
    assert list(last.text)[-2:] == [repr("<|im_end|>"), repr("\n")], last


def test_01_ex2_json_takes_more_tokens_per_character(tok) -> None:
    from chapters.ch01_tokenizer.tokens import token_table

    json_text = '[{"name": "Ada Moreno", "age": 41, "city": "Porto"}]'
    english = "Ada Moreno is forty-one and lives in the city of Porto."
    per_char = [len(token_table(tok, t)) / len(t) for t in (json_text, english)]
    assert per_char[0] > per_char[1], per_char


def test_01_ex3_hub_profile_offline_falls_back_to_tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    from chapters.ch01_tokenizer import tokens

    monkeypatch.setattr(tokens, "hub_reachable", lambda *a, **k: False)
    loaded = tokens.load_tokenizer(load_profile("qwen3-30b-a3b"))
    assert "unreachable" in loaded.note and len(loaded.tokenizer) > 0


@pytest.mark.usefixtures("qwen3_built")
def test_01_ex4_qwens_template_writes_an_empty_think_block_before_a_final_answer(tok) -> None:
    from chapters.ch01_tokenizer.tokens import load_qwen3
    from helpers.common.chat import render

    closed = [*MULTI, {"role": "assistant", "content": "Done."}]
    qwen = render(load_qwen3().tokenizer, closed, add_generation_prompt=False)
    assert qwen.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\nDone.<|im_end|>\n"), qwen
    assert render(tok, closed, add_generation_prompt=False).endswith(
        "<|im_start|>assistant\nDone.<|im_end|>\n"
    )
