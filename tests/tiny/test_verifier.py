"""helpers.tiny.verifier: the tiny verifier is a real Qwen3-MoE shape, trained on chat exchanges."""

from __future__ import annotations

from transformers import AutoTokenizer

from helpers.common.paths import DATA_DIR
from helpers.tiny.corpus import make_examples
from helpers.tiny.verifier import _verifier_config, _VerifierShape, encode_examples


def test_config_is_qwen3_moe_with_im_end_as_eos() -> None:
    tok = AutoTokenizer.from_pretrained(DATA_DIR / "tiny-tokenizer")
    config = _verifier_config(tok, _VerifierShape())
    assert config.model_type == "qwen3_moe" and config.num_experts == 8
    assert config.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")
    assert config.vocab_size == len(tok)


def test_encoded_exchanges_end_with_the_pad_token() -> None:
    tok = AutoTokenizer.from_pretrained(DATA_DIR / "tiny-tokenizer")
    encoded = encode_examples(tok, make_examples("code", 3, seed=0))
    assert len(encoded) == 3 and all(ids[-1] == tok.pad_token_id for ids in encoded)
    assert all(tok.decode(ids).startswith("<|im_start|>user\n") for ids in encoded)
