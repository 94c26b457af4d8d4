"""Tables: the workbook's own column names, and the one rule for saving a table (build/tables/).

The workbook's own columns are the k column and the ends of its 95 % intervals over requests
(helpers.analytics.intervals); the other columns are vLLM's result keys
(`helpers.common.vllm_names.STATS`, τ's is `STATS.tau`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from helpers.common.paths import build_path

__all__ = [
    "COLUMNS",
    "save_table",
]


@dataclass(frozen=True)
class _Columns:
    """The workbook's own column names (vLLM's result keys are `vllm_names.STATS`)."""

    #: The column that holds k in every table (vLLM's own key).
    k: str = "num_speculative_tokens"
    #: The ends of τ's interval (its estimate is vLLM's `vllm_names.STATS.tau`).
    tau_ci_low: str = "tau_ci_low"
    tau_ci_high: str = "tau_ci_high"
    #: The ends of a draft position's acceptance-rate interval (vLLM's rate, per position).
    rate_ci_low: str = "rate_ci_low"
    rate_ci_high: str = "rate_ci_high"
    #: Acceptance at a position given every position before it was accepted, and its interval.
    conditional_rate: str = "conditional_acceptance_rate"
    conditional_ci_low: str = "conditional_ci_low"
    conditional_ci_high: str = "conditional_ci_high"


COLUMNS = _Columns()


def save_table(df: pd.DataFrame, name: str) -> Path:
    """Write a table to build/tables/<name>.csv and return the path."""
    path = build_path("tables", f"{name}.csv")
    df.to_csv(path, index=False)
    return path
