"""Notebook 06's figures: the expert union of a verify pass, and c(k, C) with the speed-up map and
its band.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from helpers.analytics.figures import k_colors
from helpers.common.plots import PALETTE, new_figure
from helpers.common.tables import COLUMNS

__all__ = [
    "plot_expert_union",
    "plot_answer",
]


def _union_panel(ax: Any, x: pd.Series, curves: Sequence[pd.Series], labels: Sequence[str]) -> None:
    """Independent bound (dashed), measured (dots), shared bound (dotted) against x."""
    styles = (("--", PALETTE["correction"]), ("o-", PALETTE["spec"]), (":", PALETTE["plain"]))
    for (style, color), values, label in zip(styles, curves, labels):
        ax.plot(x, values, style, color=color, label=label)
    ax.legend(fontsize=8)


def plot_expert_union(windows: pd.DataFrame, batches: pd.DataFrame, experts: int) -> Figure:
    """Left: distinct experts per layer for n consecutive positions, measured vs the two bounds.
    Right: the union over B sequences x (k + 1) positions, measured vs the bounds."""
    fig, (ax, bx) = new_figure(2, width=5.2)
    columns = ("independent_union", "measured_union")
    _union_panel(
        ax,
        windows.positions,
        [windows[c] for c in (*columns, "shared_bound")],
        ("independent routing", "measured (trained router)", "all positions agree"),
    )
    ax.set(
        xlabel="positions verified together (k + 1)",
        ylabel="distinct experts per layer",
        title="one sequence",
        ylim=(0, experts + 0.5),
    )
    _union_panel(
        bx,
        batches.batch,
        [batches[c] for c in (*columns, "shared_union")],
        ("independent", "measured", "each sequence agrees with itself"),
    )
    bx.set_xscale("log", base=2)
    n = int(batches.positions.iloc[0])
    bx.set(
        xlabel="batch B (sequences)",
        ylabel="distinct experts per layer",
        title=f"B sequences x {n} positions",
        ylim=(0, experts + 0.5),
    )
    return fig


def plot_answer(answer: pd.DataFrame, k: int, title: str) -> Figure:
    """The one answer: left, c(k, C) per k against concurrency with its band (shaded); right, the
    speed-up τ / c(k, C) at one k over τ and C, break-even where the black line is, and where it
    moves across the band (dashed)."""
    fig, (ax, bx) = new_figure(2, width=5.4, height=4.0)
    ks = sorted(answer[COLUMNS.k].unique())
    colors = k_colors(ks)
    for kk in ks:
        at = answer[answer[COLUMNS.k] == kk].sort_values("concurrency")
        ax.fill_between(at.concurrency, at.c_low, at.c_high, color=colors[kk], alpha=0.2)
        ax.plot(at.concurrency, at.c, "o-", color=colors[kk], label=f"k = {kk}")
    ax.set_xscale("log", base=2)
    source = answer.band_source.iloc[0]
    ax.set(
        xlabel="concurrency C",
        ylabel="c(k, C): plain steps per speculative step",
        title=f"measured c, band: {source}",
    )
    ax.legend(fontsize=8)
    at = answer[answer[COLUMNS.k] == k].sort_values("concurrency")
    taus = np.linspace(1.0, k + 1.0, 41)
    conc = at.concurrency.to_numpy(float)
    grid = taus[:, None] / at.c.to_numpy()[None, :]
    mesh = bx.pcolormesh(conc, taus, grid, cmap="RdYlGn", vmin=0.4, vmax=1.6, shading="nearest")
    bx.contour(conc, taus, grid, levels=[1.0], colors="k", linewidths=1.5)
    for column in ("c_low", "c_high"):
        edge = taus[:, None] / at[column].to_numpy()[None, :]
        bx.contour(conc, taus, edge, levels=[1.0], colors="k", linewidths=1, linestyles="--")
    fig.colorbar(mesh, ax=bx, label="speed-up τ / c (1 = break-even)")
    bx.set_xscale("log", base=2)
    bx.set(xlabel="concurrency C", ylabel="acceptance length τ", title=f"k = {k}: τ / c(k, C)")
    fig.suptitle(title, fontsize=10)
    return fig
