"""Does generated text read as text? Distinct n-gram ratio and repeated-line runs (the tiny pair's
model card)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "quality_summary",
]


def _distinct_ngram_ratio(tokens: Sequence[object], n: int = 4) -> float:
    """Distinct n-grams / all n-grams of one sequence (1.0 for sequences shorter than n)."""
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 1.0


def _longest_repeated_line_run(text: str) -> int:
    """The most times one non-empty line appears in a row (1 when no line repeats)."""
    best = run = 0
    prev = None
    for line in (ln.strip() for ln in text.splitlines()):
        if not line:
            continue
        run = run + 1 if line == prev else 1
        best, prev = max(best, run), line
    return best


def quality_summary(texts: Sequence[str], token_ids: Sequence[Sequence[int]]) -> dict[str, float]:
    """Mean distinct-4-gram ratio (over token ids), worst repeated-line run, mean length in
    tokens."""
    ratios = [_distinct_ngram_ratio(ids, 4) for ids in token_ids]
    return {
        "distinct_4gram_ratio": sum(ratios) / len(ratios) if ratios else 0.0,
        "max_repeated_line_run": max((_longest_repeated_line_run(t) for t in texts), default=0),
        "mean_tokens": sum(map(len, token_ids)) / len(token_ids) if token_ids else 0.0,
    }
