"""kit.tiny_tokenizer: the shipped tokenizer and the builder."""

from __future__ import annotations

from transformers import AutoTokenizer

from kit.tiny_tokenizer import (
    _CHAT_TEMPLATE,
    _SPECIAL_TOKENS,
    _TOKENIZER_DIR,
    _VOCAB_SIZE,
    _train_bpe,
    _wrap_for_transformers,
)


def test_shipped_tokenizer_loads_offline_with_qwen_markers() -> None:
    tok = AutoTokenizer.from_pretrained(_TOKENIZER_DIR)
    assert len(tok) == _VOCAB_SIZE
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    for special in _SPECIAL_TOKENS:
        assert len(tok(special, add_special_tokens=False)["input_ids"]) == 1


def test_chat_template_renders_qwen_format() -> None:
    tok = AutoTokenizer.from_pretrained(_TOKENIZER_DIR)
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
    tok = _wrap_for_transformers(_train_bpe(iter(texts), vocab_size=300))
    assert tok.chat_template == _CHAT_TEMPLATE
    sample = "naïve café → 日本 <|im_start|>user\n"
    assert tok.decode(tok(sample, add_special_tokens=False)["input_ids"]) == sample
