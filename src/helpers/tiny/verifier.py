"""The tiny verifier's training rows: chat exchanges rendered with its template and tokenized
(the recipe in kit.tiny_recipe trains it on them; notebook 05 and the DFlash recipe reuse them)."""

from __future__ import annotations

from collections.abc import Sequence

from transformers import PreTrainedTokenizerBase

from helpers.tiny.corpus import Example

__all__ = [
    "encode_examples",
]


def encode_examples(tok: PreTrainedTokenizerBase, examples: Sequence[Example]) -> list[list[int]]:
    """Each exchange rendered with the chat template and tokenized, followed by <|endoftext|>."""
    texts = [tok.apply_chat_template(ex.messages(), tokenize=False) for ex in examples]
    return [ids + [tok.pad_token_id] for ids in tok(texts)["input_ids"]]
