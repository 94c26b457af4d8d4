"""helpers.text_quality."""

from __future__ import annotations

from kit.text_quality import (
    _distinct_ngram_ratio,
    _longest_repeated_line_run,
    quality_summary,
)


def test_distinct_ngrams() -> None:
    assert _distinct_ngram_ratio(list(range(10))) == 1.0
    assert _distinct_ngram_ratio([1, 2] * 10) == 2 / 17
    assert _distinct_ngram_ratio([1, 2]) == 1.0


def test_repeated_line_runs() -> None:
    assert _longest_repeated_line_run("a\nb\nc") == 1
    assert _longest_repeated_line_run("#\n#\n\n#\nx\n#") == 3
    assert _longest_repeated_line_run("") == 0


def test_summary() -> None:
    s = quality_summary(["a\na", "b"], [[1, 2, 3, 4, 5], [1, 1, 1, 1, 1]])
    assert s["max_repeated_line_run"] == 2 and s["mean_tokens"] == 5
    assert s["distinct_4gram_ratio"] == (1.0 + 0.5) / 2
