"""Tables: the k column, and the one rule for saving a table (build/tables/).

The other columns are vLLM's result keys (`helpers.common.vllm_names`, τ's is `vllm_names.TAU`).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from helpers.common.paths import build_path

__all__ = [
    "K_COLUMN",
    "save_table",
]

#: The column that holds k in every table (vLLM's own key).
K_COLUMN = "num_speculative_tokens"


def save_table(df: pd.DataFrame, name: str) -> Path:
    """Write a table to build/tables/<name>.csv and return the path."""
    path = build_path("tables", f"{name}.csv")
    df.to_csv(path, index=False)
    return path
