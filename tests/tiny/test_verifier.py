"""helpers.tiny.verifier: the tiny verifier's rows are chat exchanges, each ending in the pad token."""

from __future__ import annotations

from transformers import AutoTokenizer

from helpers.common.paths import DATA_DIR
from helpers.tiny.corpus import make_examples
from helpers.tiny.verifier import encode_examples


def test_encoded_exchanges_end_with_the_pad_token() -> None:
    tok = AutoTokenizer.from_pretrained(DATA_DIR / "tiny-tokenizer")
    encoded = encode_examples(tok, make_examples("code", 3, seed=0))
    assert len(encoded) == 3 and all(ids[-1] == tok.pad_token_id for ids in encoded)
    assert all(tok.decode(ids).startswith("<|im_start|>user\n") for ids in encoded)
