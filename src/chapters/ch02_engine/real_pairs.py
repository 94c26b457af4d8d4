"""Notebook 02's table of published τ for real Qwen3-MoE pairs with EAGLE-3 drafters (the records
of data/published/real-pair-tau.json, which the trunk's `calibration` reads)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from helpers.analytics import calibration

__all__ = ["published_table"]


def published_table(records: Sequence[Any] | None = None) -> pd.DataFrame:
    """The records as a table: source, date, pair, engine, drafting, k, T, dataset, τ."""
    rows = [
        {
            "source": r.source,
            "date": r.date,
            "verifier": r.verifier,
            "release": r.release,
            "engine, hardware": f"{r.engine}; {r.hardware}",
            "drafting": r.drafting,
            "k": r.k,
            "T": "not stated" if r.temperature is None else r.temperature,
            "dataset": r.dataset,
            "tau": r.tau,
        }
        for r in (calibration.published_taus() if records is None else records)
    ]
    return pd.DataFrame(rows)
