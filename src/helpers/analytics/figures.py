"""Figure pieces two or more notebooks draw with: one colour per k, 95 % interval error bars, and
τ bars under the ceiling k + 1 (each notebook's own figures live in its chapter)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib as mpl
import pandas as pd

from helpers.common import vllm_names
from helpers.common.plots import PALETTE
from helpers.common.tables import COLUMNS

__all__ = [
    "tau_bars",
    "interval_yerr",
    "k_colors",
]


def k_colors(ks: Sequence[int]) -> dict[int, Any]:
    """One color per k from a sequential colormap."""
    cmap = mpl.colormaps["viridis"]
    return {k: cmap(i / max(1, len(ks) - 1) * 0.85) for i, k in enumerate(ks)}


def interval_yerr(df: pd.DataFrame, value: str, low: str, high: str) -> Any:
    """Matplotlib error-bar lengths from interval columns (None when the table has none)."""
    if low not in df or df[low].isna().all():
        return None
    return [(df[value] - df[low]).clip(lower=0), (df[high] - df[value]).clip(lower=0)]


def tau_bars(ax: Any, table: pd.DataFrame, key: str, k: int) -> None:
    """τ per row of an acceptance table as bars with 95 % intervals, under the ceiling k + 1."""
    bars = ax.bar(
        table[key].astype(str),
        table[vllm_names.STATS.tau],
        yerr=interval_yerr(table, vllm_names.STATS.tau, COLUMNS.tau_ci_low, COLUMNS.tau_ci_high),
        capsize=4,
        color=PALETTE["spec"],
    )
    ax.bar_label(bars, fmt="%.2f", fontsize=8, label_type="center", color="white")
    ax.axhline(k + 1, ls="--", color=PALETTE["plain"], label=f"ceiling {k + 1}")
    ax.set(ylabel="acceptance length τ (95 % interval)", title=f"τ per {key} (k={k}, T=0)")
    ax.legend()


# --------------------------------------------------------------------------- token-colored view


# --------------------------------------------------------------------------- MoE economics (06)
