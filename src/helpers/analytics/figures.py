"""Figures: acceptance (notebook 03), the token-coloured view, and MoE economics (notebook 06)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from helpers.common import vllm_names
from helpers.common.plots import PALETTE, new_figure
from helpers.common.tables import (
    CONDITIONAL_CI_HIGH,
    CONDITIONAL_CI_LOW,
    CONDITIONAL_RATE,
    K_COLUMN,
    TAU_CI_HIGH,
    TAU_CI_LOW,
)

__all__ = [
    "plot_expert_union",
    "plot_answer",
    "tau_bars",
    "interval_yerr",
    "plot_k_sweep",
    "plot_category_temperature",
    "token_pieces",
    "token_html",
    "plot_token_colors",
]

#: Colors of the token labels: accepted drafts, verifier corrections, bonus tokens, the prefill
#: token.
_LABEL_COLORS: dict[str, str] = {
    "accepted": PALETTE["accepted"],
    "correction": PALETTE["correction"],
    "bonus": PALETTE["bonus"],
    "prefill": PALETTE["plain"],
}
_LABEL_TEXT: dict[str, str] = {
    "accepted": "accepted draft",
    "correction": "verifier correction",
    "bonus": "bonus token",
    "prefill": "first token (prefill, no draft)",
}


def _k_colors(ks: Sequence[int]) -> dict[int, Any]:
    """One color per k from a sequential colormap."""
    cmap = mpl.colormaps["viridis"]
    return {k: cmap(i / max(1, len(ks) - 1) * 0.85) for i, k in enumerate(ks)}


def interval_yerr(df: pd.DataFrame, value: str, low: str, high: str) -> Any:
    """Matplotlib error-bar lengths from interval columns (None when the table has none)."""
    if low not in df or df[low].isna().all():
        return None
    return [(df[value] - df[low]).clip(lower=0), (df[high] - df[value]).clip(lower=0)]


def plot_k_sweep(by_k: pd.DataFrame, per_position: pd.DataFrame) -> Figure:
    """Left: τ vs k with 95 % intervals and the k + 1 ceiling. Right: conditional acceptance per
    position."""
    fig, (ax, bx) = new_figure(2, width=5.2)
    ax.plot(
        by_k[K_COLUMN],
        by_k.acceptance_length_ceiling,
        "--",
        color=PALETTE["plain"],
        label="ceiling k + 1",
    )
    ax.errorbar(
        by_k[K_COLUMN],
        by_k[vllm_names.TAU],
        yerr=interval_yerr(by_k, vllm_names.TAU, TAU_CI_LOW, TAU_CI_HIGH),
        fmt="o-",
        capsize=3,
        color=PALETTE["spec"],
        label="measured τ, 95 % interval (T = 0)",
    )
    for k, tau in zip(by_k[K_COLUMN], by_k[vllm_names.TAU]):
        ax.annotate(
            f"{tau:.2f}",
            (k, tau),
            textcoords="offset points",
            xytext=(6, -10),
            ha="left",
            fontsize=8,
        )
    ax.set(
        xlabel="k (num_speculative_tokens)",
        ylabel="acceptance length τ",
        title="τ vs k",
        xticks=list(by_k[K_COLUMN]),
    )
    ax.legend()
    colors = _k_colors(sorted(per_position[K_COLUMN].unique()))
    for i, (k, grp) in enumerate(per_position.groupby(K_COLUMN)):
        bx.errorbar(
            grp.position + 1 + 0.04 * (i - len(colors) / 2),
            grp[CONDITIONAL_RATE],
            yerr=interval_yerr(grp, CONDITIONAL_RATE, CONDITIONAL_CI_LOW, CONDITIONAL_CI_HIGH),
            fmt="o-",
            capsize=2,
            color=colors[k],
            label=f"k={k}",
        )
    bx.set(
        xlabel="draft position",
        ylabel="accepted / reached",
        title="conditional acceptance per position",
        ylim=(0, 1.02),
        xticks=sorted(per_position.position.unique() + 1),
    )
    bx.legend(fontsize=8)
    return fig


def tau_bars(ax: Any, table: pd.DataFrame, key: str, k: int) -> None:
    """τ per row of an acceptance table as bars with 95 % intervals, under the ceiling k + 1."""
    bars = ax.bar(
        table[key].astype(str),
        table[vllm_names.TAU],
        yerr=interval_yerr(table, vllm_names.TAU, TAU_CI_LOW, TAU_CI_HIGH),
        capsize=4,
        color=PALETTE["spec"],
    )
    ax.bar_label(bars, fmt="%.2f", fontsize=8, label_type="center", color="white")
    ax.axhline(k + 1, ls="--", color=PALETTE["plain"], label=f"ceiling {k + 1}")
    ax.set(ylabel="acceptance length τ (95 % interval)", title=f"τ per {key} (k={k}, T=0)")
    ax.legend()


def plot_category_temperature(
    by_category: pd.DataFrame, by_temperature: pd.DataFrame, k: int
) -> Figure:
    """Left: τ per task category at k. Right: τ vs temperature at k."""
    fig, (ax, bx) = new_figure(2, width=5.2)
    tau_bars(ax, by_category[by_category[K_COLUMN] == k], "category", k)
    bx.errorbar(
        by_temperature.temperature,
        by_temperature[vllm_names.TAU],
        yerr=interval_yerr(by_temperature, vllm_names.TAU, TAU_CI_LOW, TAU_CI_HIGH),
        fmt="o-",
        capsize=3,
        color=PALETTE["spec"],
    )
    for t, tau in zip(by_temperature.temperature, by_temperature[vllm_names.TAU]):
        bx.annotate(
            f"{tau:.2f}",
            (t, tau),
            textcoords="offset points",
            xytext=(0, 6),
            ha="center",
            fontsize=8,
        )
    bx.axhline(k + 1, ls="--", color=PALETTE["plain"])
    bx.set(
        xlabel="temperature T",
        ylabel="acceptance length τ",
        title=f"τ vs temperature (k={k})",
        ylim=(1, k + 1.2),
    )
    return fig


# --------------------------------------------------------------------------- token-colored view


def token_pieces(tokenizer: Any, token_ids: Sequence[int]) -> list[str]:
    """Each token decoded on its own (the tiny tokenizer is byte-level BPE over ASCII text)."""
    return [tokenizer.decode([t]) for t in token_ids]


def _label_counts(labels: Sequence[str]) -> dict[str, int]:
    """How many tokens carry each label."""
    return {lab: labels.count(lab) for lab in _LABEL_COLORS}


def token_html(pieces: Sequence[str], labels: Sequence[str]) -> str:
    """HTML of the text with each token's background colored by how it was produced, plus a
    legend."""
    spans = [
        f'<span title="{lab}" style="background:{_LABEL_COLORS[lab]};border-radius:2px">'
        f"{html.escape(piece)}</span>"
        for piece, lab in zip(pieces, labels, strict=True)
    ]
    counts = _label_counts(list(labels))
    legend = " ".join(
        f'<span style="background:{c};padding:0 4px">{_LABEL_TEXT[lab]} ({counts[lab]})</span>'
        for lab, c in _LABEL_COLORS.items()
    )
    return (
        '<div style="font-family:monospace;white-space:pre-wrap;line-height:1.6">'
        f"{''.join(spans)}</div>"
        f'<div style="font-family:sans-serif;font-size:85%;margin-top:6px">{legend}</div>'
    )


def _layout(pieces: Sequence[str], width: int) -> list[tuple[int, int, str, int]]:
    """Monospace layout: (line, column, text, token index) for every visible run, wrapped at
    width."""
    out, line, col = [], 0, 0
    for i, piece in enumerate(pieces):
        parts = piece.split("\n")
        for j, part in enumerate(parts):
            if j > 0:
                out.append((line, col, "↵", i))
                line, col = line + 1, 0
            if col + len(part) > width and col > 0:
                line, col = line + 1, 0
            if part:
                out.append((line, col, part, i))
                col += len(part)
    return out


#: Advance of one character of DejaVu Sans Mono, in em.
_MONO_ADVANCE = 0.602


def plot_token_colors(
    pieces: Sequence[str], labels: Sequence[str], title: str, width: int = 72
) -> Figure:
    """The generated text drawn token by token on a background colored by how each token was
    produced.

    Layout is a character grid (monospace); the font size is chosen after the layout is fixed so
    that one character is exactly one grid cell and adjacent tokens touch.
    """
    runs = _layout(pieces, width)
    lines = 1 + max((r[0] for r in runs), default=0)
    fig, (ax,) = new_figure(1, width=width * 0.1 + 0.4, height=0.22 * lines + 1.0)
    ax.grid(False)
    ax.set_axis_off()
    ax.set(xlim=(0, width), ylim=(-lines - 0.1, 0.1), title=title)
    counts = _label_counts(list(labels))
    handles = [
        Patch(color=c, label=f"{_LABEL_TEXT[lab]} ({counts[lab]})")
        for lab, c in _LABEL_COLORS.items()
    ]
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=2,
        fontsize=8,
        frameon=False,
    )
    fig.tight_layout()
    box = ax.get_window_extent()
    points_per_cell = min(box.width / width, box.height / (lines + 0.2)) * 72 / fig.dpi
    fontsize = min(10.0, points_per_cell / _MONO_ADVANCE)
    for line, col, text, i in runs:
        ax.add_patch(
            Rectangle((col, -line - 0.9), len(text), 0.8, color=_LABEL_COLORS[labels[i]], lw=0)
        )
        ax.text(
            col,
            -line - 0.5,
            text,
            family="DejaVu Sans Mono",
            fontsize=fontsize,
            va="center",
            parse_math=False,
        )
    return fig


# --------------------------------------------------------------------------- MoE economics (06)


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


def _plot_lab_speedups(lab: pd.DataFrame) -> Figure:
    """Measured vs bytes-model speed-up per (k, τ) engine and concurrency, as two heat maps."""
    fig, axes = new_figure(2, width=4.6, height=3.8)
    for ax, column, title in zip(
        axes,
        ("speedup", "model_speedup"),
        ("measured on the H200 (recorded)", "bytes model, independent routing"),
    ):
        pivot = lab.pivot_table(
            index=[K_COLUMN, "tau_target"], columns="concurrency", values=column
        )
        mesh = ax.imshow(pivot.values, cmap="RdYlGn", vmin=0.4, vmax=2.6, aspect="auto")
        for (i, j), v in np.ndenumerate(pivot.values):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8)
        ax.set_xticks(range(len(pivot.columns)), [str(c) for c in pivot.columns])
        ax.set_yticks(range(len(pivot.index)), [f"k={k}, τ={t:g}" for k, t in pivot.index])
        ax.set(xlabel="concurrency", title=title)
        ax.grid(False)
    fig.colorbar(mesh, ax=axes[1], label="speed-up over plain (1 = break-even)")
    return fig


def plot_answer(answer: pd.DataFrame, k: int, title: str) -> Figure:
    """The one answer: left, c(k, C) per k against concurrency with its band (shaded); right, the
    speed-up τ / c(k, C) at one k over τ and C, break-even where the black line is, and where it
    moves across the band (dashed)."""
    fig, (ax, bx) = new_figure(2, width=5.4, height=4.0)
    ks = sorted(answer[K_COLUMN].unique())
    colors = _k_colors(ks)
    for kk in ks:
        at = answer[answer[K_COLUMN] == kk].sort_values("concurrency")
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
    at = answer[answer[K_COLUMN] == k].sort_values("concurrency")
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
