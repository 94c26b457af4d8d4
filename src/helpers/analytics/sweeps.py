"""Acceptance tables from runs, shared by notebooks 02, 03, 05, 07 and 08: τ and per-position
acceptance per key (task, k, temperature), the pooled ranking sentence, and each table's
intervals. Notebook 03's sweeps, which start the engines, are in its chapter (experiments).

Every acceptance table carries 95 % intervals over whole requests (`tau_ci_low`,
`tau_ci_high`, `n_requests`; per position also the conditional rate), from vLLM's per-request
histograms (the jackknife t-interval of `helpers.analytics.intervals`); where the installed vLLM
keeps none (one without `helpers.engine.compat.FEATURES["per_request_spec_decode_metrics"]`), the
interval columns are NaN. Throughput is repeated and reported as median with min and max.

Functions return tables; the notebook saves them (`helpers.common.tables.save_table`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from helpers.analytics.intervals import (
    Interval,
    ranking,
    tau_interval,
)
from helpers.common import vllm_names
from helpers.common.counters import acceptance_stats
from helpers.common.tables import COLUMNS
from helpers.engine.runs import (
    CategoryRun,
)

__all__ = [
    "acceptance_table",
    "tau_ranking",
    "table_intervals",
]

#: Scalar statistics copied into the tables (the per-position list goes to its own long table).
_SCALAR_KEYS = (
    vllm_names.STATS.num_drafts,
    vllm_names.STATS.draft_tokens,
    vllm_names.STATS.accepted_tokens,
    vllm_names.STATS.tau,
    vllm_names.STATS.acceptance_rate,
)
#: The interval columns next to τ: 95 % interval over requests, and how many requests there were.
_CI_KEYS = (COLUMNS.tau_ci_low, COLUMNS.tau_ci_high, "n_requests")


def _acceptance_row(run: CategoryRun) -> dict[str, Any]:
    """The scalar acceptance statistics of one run (vLLM's key names) and τ's 95 % interval."""
    stats = acceptance_stats(run.counters)
    row = {key: stats[key] for key in _SCALAR_KEYS}
    if run.requests:
        tau = tau_interval(run.requests)
        return {
            **row,
            COLUMNS.tau_ci_low: tau.low,
            COLUMNS.tau_ci_high: tau.high,
            "n_requests": tau.n,
        }
    return {
        **row,
        COLUMNS.tau_ci_low: np.nan,
        COLUMNS.tau_ci_high: np.nan,
        "n_requests": len(run.token_ids),
    }


def acceptance_table(runs: Mapping[Any, CategoryRun], key: str) -> pd.DataFrame:
    """One row per experiment (key column first) with the scalar statistics and τ's interval."""
    return pd.DataFrame([{key: name, **_acceptance_row(r)} for name, r in runs.items()])


def tau_ranking(runs: Mapping[Any, CategoryRun]) -> str:
    """τ of each run ranked with 95 % intervals, or one line saying why there are no intervals."""
    if not all(r.requests for r in runs.values()):
        return "no per-request acceptance from this vLLM: τ cannot be ranked with intervals"
    return ranking({str(name): tau_interval(r.requests) for name, r in runs.items()})


def table_intervals(
    df: pd.DataFrame,
    key: str,
    value: str = vllm_names.STATS.tau,
    low: str = COLUMNS.tau_ci_low,
    high: str = COLUMNS.tau_ci_high,
) -> dict[str, Interval]:
    """The intervals of a saved table by its key column (NaN ends where vLLM kept no requests)."""
    return {
        str(row[key]): Interval(row[value], row[low], row[high], int(row.get("n_requests", 0)))
        for row in df.to_dict("records")
    }
