"""chapters.ch01_tokenizer.environment: the environment report as aligned text."""

from __future__ import annotations

from chapters.ch01_tokenizer.environment import format_report


def test_format_report_aligns() -> None:
    text = format_report({"python": "3.11.7", "transformers": "5.12.1"})
    lines = text.splitlines()
    assert lines == ["python        3.11.7", "transformers  5.12.1"]
