"""helpers.tiny.tokenizer: the shipped tokenizer, the builder, and the padded shape tokenizers."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoTokenizer

from helpers.common.profiles import available_profiles, load_profile
from helpers.tiny.tokenizer import (
    CHAT_TEMPLATE,
    SPECIAL_TOKENS,
    TOKENIZER_DIR,
    VOCAB_SIZE,
    build_padded_tokenizer,
    build_shape_tokenizers,
    placeholder,
    train_bpe,
    wrap_for_transformers,
)


def test_shipped_tokenizer_loads_offline_with_qwen_markers() -> None:
    tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    assert len(tok) == VOCAB_SIZE
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    for special in SPECIAL_TOKENS:
        assert len(tok(special, add_special_tokens=False)["input_ids"]) == 1


def test_chat_template_renders_qwen_format() -> None:
    tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    assert tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True) == (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    )
    assert tok.apply_chat_template(msgs, tokenize=False).endswith("U<|im_end|>\n")


def test_builder_makes_byte_level_bpe_that_round_trips() -> None:
    texts = [
        "def add(a, b):\n    return a + b\n",
        "The quick brown fox jumps over the lazy dog. " * 20,
    ]
    tok = wrap_for_transformers(train_bpe(iter(texts), vocab_size=300))
    assert tok.chat_template == CHAT_TEMPLATE
    sample = "naïve café → 日本 <|im_start|>user\n"
    assert tok.decode(tok(sample, add_special_tokens=False)["input_ids"]) == sample


def test_padded_tokenizer_encodes_like_the_tiny_and_decodes_every_id(tmp_path: Path) -> None:
    tiny = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    padded = build_padded_tokenizer(tmp_path, 3000)
    assert len(AutoTokenizer.from_pretrained(tmp_path)) == 3000
    text = tiny.apply_chat_template(
        [{"role": "user", "content": "x = 1  # <x2500>"}], tokenize=False
    )
    ids = tiny(text, add_special_tokens=False)["input_ids"]
    assert padded(text, add_special_tokens=False)["input_ids"] == ids, "encoding never pads"
    assert padded.decode([VOCAB_SIZE, 2999]) == placeholder(VOCAB_SIZE) + placeholder(2999)
    assert padded.chat_template == tiny.chat_template
    with pytest.raises(ValueError, match="below the tiny tokenizer's 2048 ids"):
        build_padded_tokenizer(tmp_path / "small", 100)


def test_shape_profiles_ship_their_padded_tokenizer(tmp_path: Path) -> None:
    """What `make tiny-models` writes into each shape folder is what is committed."""
    shapes = [name for name in available_profiles() if not load_profile(name).has_weights]
    build_shape_tokenizers(tmp_path)
    for name in shapes:
        shipped = Path(load_profile(name).verifier_path())
        for file in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
            assert (tmp_path / name / file).read_bytes() == (shipped / file).read_bytes(), file
