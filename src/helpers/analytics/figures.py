"""Figures and the token-colored view of notebook 03 (acceptance analytics and speedup), all via plots.py."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import matplotlib as mpl
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from helpers.common.figures import PALETTE, new_figure
from helpers.common.tables import K_COLUMN

__all__ = [
    "TAU",
    "LABEL_COLORS",
    "LABEL_TEXT",
    "plot_k_sweep",
    "plot_category_temperature",
    "token_pieces",
    "label_counts",
    "token_html",
    "MONO_ADVANCE",
    "plot_token_colors",
    "plot_speedup_model",
]

TAU = "spec_decode_acceptance_length"
#: Colors of the token labels: accepted drafts, verifier corrections, bonus tokens, the prefill token.
LABEL_COLORS: dict[str, str] = {
    "accepted": PALETTE["accepted"],
    "correction": PALETTE["correction"],
    "bonus": PALETTE["bonus"],
    "prefill": PALETTE["plain"],
}
LABEL_TEXT: dict[str, str] = {
    "accepted": "accepted draft",
    "correction": "verifier correction",
    "bonus": "bonus token",
    "prefill": "first token (prefill, no draft)",
}


def _k_colors(ks: Sequence[int]) -> dict[int, Any]:
    """One color per k from a sequential colormap."""
    cmap = mpl.colormaps["viridis"]
    return {k: cmap(i / max(1, len(ks) - 1) * 0.85) for i, k in enumerate(ks)}


def plot_k_sweep(by_k: pd.DataFrame, per_position: pd.DataFrame) -> Figure:
    """Left: τ vs k with the k + 1 ceiling. Right: per-position acceptance rate for each k."""
    fig, (ax, bx) = new_figure(2, width=5.2)
    ax.plot(
        by_k[K_COLUMN],
        by_k.acceptance_length_ceiling,
        "--",
        color=PALETTE["plain"],
        label="ceiling k + 1",
    )
    ax.plot(by_k[K_COLUMN], by_k[TAU], "o-", color=PALETTE["spec"], label="measured τ (T = 0)")
    for k, tau in zip(by_k[K_COLUMN], by_k[TAU]):
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
    for k, grp in per_position.groupby(K_COLUMN):
        bx.plot(
            grp.position + 1,
            grp.spec_decode_per_position_acceptance_rate,
            "o-",
            color=colors[k],
            label=f"k={k}",
        )
    bx.set(
        xlabel="draft position",
        ylabel="accepted / drafts",
        title="per-position acceptance",
        ylim=(0, 1.02),
        xticks=sorted(per_position.position.unique() + 1),
    )
    bx.legend(fontsize=8)
    return fig


def plot_category_temperature(
    by_category: pd.DataFrame, by_temperature: pd.DataFrame, k: int
) -> Figure:
    """Left: τ per task category at k. Right: τ vs temperature at k."""
    fig, (ax, bx) = new_figure(2, width=5.2)
    cats = by_category[by_category[K_COLUMN] == k]
    bars = ax.bar(cats.category, cats[TAU], color=PALETTE["spec"])
    ax.bar_label(bars, fmt="%.2f", fontsize=8)
    ax.axhline(k + 1, ls="--", color=PALETTE["plain"], label=f"ceiling {k + 1}")
    ax.set(ylabel="acceptance length τ", title=f"τ per category (k={k}, T=0)")
    ax.legend()
    bx.plot(by_temperature.temperature, by_temperature[TAU], "o-", color=PALETTE["spec"])
    for t, tau in zip(by_temperature.temperature, by_temperature[TAU]):
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


def label_counts(labels: Sequence[str]) -> dict[str, int]:
    """How many tokens carry each label."""
    return {lab: labels.count(lab) for lab in LABEL_COLORS}


def token_html(pieces: Sequence[str], labels: Sequence[str]) -> str:
    """HTML of the text with each token's background colored by how it was produced, plus a legend."""
    spans = [
        f'<span title="{lab}" style="background:{LABEL_COLORS[lab]};border-radius:2px">'
        f"{html.escape(piece)}</span>"
        for piece, lab in zip(pieces, labels, strict=True)
    ]
    counts = label_counts(list(labels))
    legend = " ".join(
        f'<span style="background:{c};padding:0 4px">{LABEL_TEXT[lab]} ({counts[lab]})</span>'
        for lab, c in LABEL_COLORS.items()
    )
    return (
        f'<div style="font-family:monospace;white-space:pre-wrap;line-height:1.6">{"".join(spans)}</div>'
        f'<div style="font-family:sans-serif;font-size:85%;margin-top:6px">{legend}</div>'
    )


def _layout(pieces: Sequence[str], width: int) -> list[tuple[int, int, str, int]]:
    """Monospace layout: (line, column, text, token index) for every visible run, wrapped at width."""
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
MONO_ADVANCE = 0.602


def plot_token_colors(
    pieces: Sequence[str], labels: Sequence[str], title: str, width: int = 72
) -> Figure:
    """The generated text drawn token by token on a background colored by how each token was produced.

    Layout is a character grid (monospace); the font size is chosen after the layout is fixed so
    that one character is exactly one grid cell and adjacent tokens touch.
    """
    runs = _layout(pieces, width)
    lines = 1 + max((r[0] for r in runs), default=0)
    fig, (ax,) = new_figure(1, width=width * 0.1 + 0.4, height=0.22 * lines + 1.0)
    ax.grid(False)
    ax.set_axis_off()
    ax.set(xlim=(0, width), ylim=(-lines - 0.1, 0.1), title=title)
    counts = label_counts(list(labels))
    handles = [
        Patch(color=c, label=f"{LABEL_TEXT[lab]} ({counts[lab]})")
        for lab, c in LABEL_COLORS.items()
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
    fontsize = min(10.0, points_per_cell / MONO_ADVANCE)
    for line, col, text, i in runs:
        ax.add_patch(
            Rectangle((col, -line - 0.9), len(text), 0.8, color=LABEL_COLORS[labels[i]], lw=0)
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


# --------------------------------------------------------------------------- speedup


def plot_speedup_model(
    pvm: pd.DataFrame,
    best: int,
    h200_curve: pd.DataFrame,
    h200_costs: pd.DataFrame,
    record_date: str,
    alpha_here: float | None = None,
) -> Figure:
    """Left: this CPU, predicted (τ / c(k)) vs measured vLLM speedup. Right: the recorded H200 costs."""
    fig, (ax, bx) = new_figure(2, width=5.4, height=3.9)
    ax.axhline(1.0, color=PALETTE["plain"], lw=1, label="plain decoding")
    ax.plot(
        pvm[K_COLUMN],
        pvm.predicted_speedup,
        "s--",
        color=PALETTE["recorded"],
        label="predicted: τ / c(k), PyTorch step costs",
    )
    ks, measured = [0, *pvm[K_COLUMN]], [1.0, *pvm.measured_speedup]
    ax.plot(ks, measured, "o-", color=PALETTE["spec"], label="measured: vLLM tokens/s ratio")
    ax.plot(
        [best],
        [measured[ks.index(best)]],
        "*",
        ms=16,
        color=PALETTE["bonus"],
        mec="k",
        label=f"fastest measured: {'plain' if best == 0 else f'k = {best}'}",
    )
    ax.set(
        xlabel="k (0 = plain)",
        ylabel="speedup over plain (concurrency 1)",
        title="this CPU, tiny pair (this run)",
        xticks=ks,
        ylim=(0, None),
    )
    ax.legend(fontsize=7)
    cmap = mpl.colormaps["viridis"]
    alphas = sorted(h200_curve.alpha.unique())
    for i, a in enumerate(alphas):
        grp = h200_curve[h200_curve.alpha == a]
        here = alpha_here is not None and abs(a - alpha_here) < 0.005
        bx.plot(
            grp[K_COLUMN],
            grp.predicted_speedup,
            "o-",
            color=cmap(i / max(1, len(alphas) - 1) * 0.85),
            lw=2.5 if here else 1.5,
            label=f"α = {a:.2f}" + (" (tiny drafter, this run)" if here else ""),
        )
    bx.axhline(1.0, color=PALETTE["plain"], lw=1)
    ticks = list(h200_costs[K_COLUMN])
    bx.set_xticks(
        ticks, [f"k={k}\nc={c:.2f}" for k, c in zip(ticks, h200_costs.relative_step_cost)]
    )
    bx.set(
        ylabel="predicted speedup",
        ylim=(0, None),
        title=f"Qwen3-30B-A3B shape, H200 step costs\n(RECORDED {record_date}, another machine)",
    )
    bx.legend(fontsize=7, title="acceptance", title_fontsize=7, loc="lower left")
    return fig
