"""Notebook 07's reduced draft vocabulary: which tokens the drafter may propose, and what share of
the verifier's tokens it cannot draft."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

__all__ = [
    "draft_vocab",
    "outside_share",
]


def outside_share(token_lists: Iterable[Sequence[int]], keep: Sequence[int]) -> float:
    """Share of the tokens that lie outside the draft vocabulary (drafts there are always wrong)."""
    allowed = set(keep)
    tokens = [t for tl in token_lists for t in tl]
    return sum(t not in allowed for t in tokens) / max(1, len(tokens))


def draft_vocab(
    token_lists: Iterable[Sequence[int]], size: int, always: Iterable[int] = ()
) -> list[int]:
    """The `size` most frequent token ids of the given answers (plus `always`), sorted by id."""
    counts = Counter(t for tokens in token_lists for t in tokens)
    keep = list(dict.fromkeys(always))
    for token, _ in counts.most_common():
        if len(keep) >= size:
            break
        if token not in keep:
            keep.append(token)
    return sorted(keep[:size])
