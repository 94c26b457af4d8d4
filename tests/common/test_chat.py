"""helpers.chat: rendering, marker checks, token table, double templating."""

from __future__ import annotations

from helpers.common.chat import (
    count_turn_starts,
    double_templated,
    load_tokenizer,
    marker_problems,
    render,
    token_table,
)
from helpers.common.profiles import load_profile

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
    assert count_turn_starts(text) == 3 and count_turn_starts(twice) == 5
