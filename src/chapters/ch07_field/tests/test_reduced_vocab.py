"""chapters.ch07_field.reduced_vocab: the share of tokens a draft vocabulary cannot draft."""

from __future__ import annotations

from chapters.ch07_field.reduced_vocab import outside_share


def test_outside_share_counts_tokens_not_kept() -> None:
    assert outside_share([[5, 9, 2, 7]], [1, 5, 9]) == 0.5
    assert outside_share([], [1]) == 0.0
