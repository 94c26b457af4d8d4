"""Tables: vLLM's key names for table columns, and the one rule for saving a table (build/tables/)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from helpers.common.paths import build_path

__all__ = [
    "K_COLUMN",
    "TAU_COLUMN",
    "save_table",
]

#: The column that holds k in every table (vLLM's own key).
K_COLUMN = "num_speculative_tokens"
#: The column that holds τ in every table (vLLM's own key, as `vllm bench serve` reports it).
TAU_COLUMN = "spec_decode_acceptance_length"


def save_table(df: pd.DataFrame, name: str) -> Path:
    """Write a table to build/tables/<name>.csv and return the path."""
    path = build_path("tables", f"{name}.csv")
    df.to_csv(path, index=False)
    return path
