"""Notebook 07's reduced draft vocabulary: what share of the verifier's tokens it cannot draft."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["outside_share"]


def outside_share(token_lists: Iterable[Sequence[int]], keep: Sequence[int]) -> float:
    """Share of the tokens that lie outside the draft vocabulary (drafts there are always wrong)."""
    allowed = set(keep)
    tokens = [t for tl in token_lists for t in tl]
    return sum(t not in allowed for t in tokens) / max(1, len(tokens))
