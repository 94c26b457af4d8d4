"""chapters.ch07_field.reduced_vocab: the most frequent tokens, and the share of tokens a draft
vocabulary cannot draft."""

from __future__ import annotations

from chapters.ch07_field.reduced_vocab import draft_vocab, outside_share


def test_outside_share_counts_tokens_not_kept() -> None:
    assert outside_share([[5, 9, 2, 7]], [1, 5, 9]) == 0.5
    assert outside_share([], [1]) == 0.0


def test_most_frequent_tokens_sorted_with_the_ones_that_must_stay() -> None:
    keep = draft_vocab([[5, 5, 5, 9, 9, 2], [9, 7]], size=3, always=[1])
    assert keep == [1, 5, 9]
