"""Notebook 01's first table: the environment report as aligned text."""

from __future__ import annotations

__all__ = ["format_report"]


def format_report(report: dict[str, str]) -> str:
    """The report as a two-column text table with aligned keys."""
    width = max((len(key) for key in report), default=0)
    return "\n".join(f"{key:<{width}}  {value}" for key, value in report.items())
