"""kit.tiny_verifier: the tiny verifier is a real Qwen3-MoE shape."""

from __future__ import annotations

from transformers import AutoTokenizer

from helpers.common.paths import DATA_DIR
from kit.tiny_verifier import _verifier_config, _VerifierShape


def test_config_is_qwen3_moe_with_im_end_as_eos() -> None:
    tok = AutoTokenizer.from_pretrained(DATA_DIR / "tiny-tokenizer")
    config = _verifier_config(tok, _VerifierShape())
    assert config.model_type == "qwen3_moe" and config.num_experts == 8
    assert config.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")
    assert config.vocab_size == len(tok)
