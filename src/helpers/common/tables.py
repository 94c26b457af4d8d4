"""Tables: the workbook's own column names, and the one rule for saving a table (build/tables/).

The workbook's own columns are the k column and the ends of its 95 % intervals over requests
(helpers.analytics.intervals); the other columns are vLLM's result keys
(`helpers.common.vllm_names`, τ's is `vllm_names.TAU`).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from helpers.common.paths import build_path

__all__ = [
    "K_COLUMN",
    "TAU_CI_LOW",
    "TAU_CI_HIGH",
    "RATE_CI_LOW",
    "RATE_CI_HIGH",
    "CONDITIONAL_RATE",
    "CONDITIONAL_CI_LOW",
    "CONDITIONAL_CI_HIGH",
    "save_table",
]

#: The column that holds k in every table (vLLM's own key).
K_COLUMN = "num_speculative_tokens"
#: The ends of τ's interval (its estimate is vLLM's `vllm_names.TAU`).
TAU_CI_LOW = "tau_ci_low"
TAU_CI_HIGH = "tau_ci_high"
#: The ends of a draft position's acceptance-rate interval (vLLM's rate, per position).
RATE_CI_LOW = "rate_ci_low"
RATE_CI_HIGH = "rate_ci_high"
#: Acceptance at a position given every position before it was accepted, and its interval.
CONDITIONAL_RATE = "conditional_acceptance_rate"
CONDITIONAL_CI_LOW = "conditional_ci_low"
CONDITIONAL_CI_HIGH = "conditional_ci_high"


def save_table(df: pd.DataFrame, name: str) -> Path:
    """Write a table to build/tables/<name>.csv and return the path."""
    path = build_path("tables", f"{name}.csv")
    df.to_csv(path, index=False)
    return path
