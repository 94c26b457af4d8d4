"""Notebook 06's figures: the expert union of a verify pass, and c(k, C) with the speed-up map."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from helpers.analytics.figures import k_colors
from helpers.common.plots import PALETTE, new_figure
from helpers.common.tables import COLUMNS

__all__ = ["plot_expert_union", "plot_answer"]


def _union_panel(ax: Any, df: pd.DataFrame, x: str, shared: str, labels: str, **kw: Any) -> None:
    """Independent bound (dashed), measured (dots), shared bound (dotted) against x."""
    styles = (("--", PALETTE["correction"]), ("o-", PALETTE["spec"]), (":", PALETTE["plain"]))
    columns = ("independent_union", "measured_union", shared)
    for (style, color), column, label in zip(styles, columns, labels.split("; ")):
        ax.plot(df[x], df[column], style, color=color, label=label)
    ax.legend(fontsize=8)
    ax.set(ylabel="distinct experts per layer", **kw)


def plot_expert_union(windows: pd.DataFrame, batches: pd.DataFrame, experts: int) -> Figure:
    """Distinct experts per layer, measured and bounds: one sequence's n positions; B sequences."""
    fig, (ax, bx) = new_figure(2, width=5.2)
    labels = "independent routing; measured (trained router); all positions agree"
    xlabel, ylim = "positions verified together (k + 1)", (0, experts + 0.5)
    _union_panel(ax, windows, "positions", "shared_bound", labels, xlabel=xlabel, ylim=ylim)
    ax.set_title("one sequence")
    labels = "independent; measured; each sequence agrees with itself"
    _union_panel(
        bx, batches, "batch", "shared_union", labels, xlabel="batch B (sequences)", ylim=ylim
    )
    bx.set_title(f"B sequences x {int(batches.positions.iloc[0])} positions")
    bx.set_xscale("log", base=2)
    return fig


def plot_answer(answer: pd.DataFrame, k: int, title: str) -> Figure:
    """Left: c(k, C) per k with its band; right: τ / c(k, C) at k over τ and C, break-even lines."""
    fig, (ax, bx) = new_figure(2, width=5.4, height=4.0)
    ks = sorted(answer[COLUMNS.k].unique())
    colors = k_colors(ks)
    for kk in ks:
        at = answer[answer[COLUMNS.k] == kk].sort_values("concurrency")
        ax.fill_between(at.concurrency, at.c_low, at.c_high, color=colors[kk], alpha=0.2)
        ax.plot(at.concurrency, at.c, "o-", color=colors[kk], label=f"k = {kk}")
    ax.set_xscale("log", base=2)
    ax.set(xlabel="concurrency C", ylabel="c(k, C): plain steps per speculative step")
    ax.set_title(f"measured c, band: {answer.band_source.iloc[0]}")
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
