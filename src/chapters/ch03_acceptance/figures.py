"""Notebook 03's figures: τ and per-position acceptance by k, τ by task and temperature, and the
token-coloured view as HTML (accepted drafts, corrections, bonus tokens).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from helpers.analytics.figures import interval_yerr, k_colors, tau_bars
from helpers.common import vllm_names
from helpers.common.plots import PALETTE, new_figure
from helpers.common.tables import COLUMNS

__all__ = [
    "plot_k_sweep",
    "plot_category_temperature",
    "token_pieces",
    "token_html",
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


def plot_k_sweep(by_k: pd.DataFrame, per_position: pd.DataFrame) -> Figure:
    """Left: τ vs k with 95 % intervals and the k + 1 ceiling. Right: conditional acceptance per
    position."""
    fig, (ax, bx) = new_figure(2, width=5.2)
    ax.plot(
        by_k[COLUMNS.k],
        by_k.acceptance_length_ceiling,
        "--",
        color=PALETTE["plain"],
        label="ceiling k + 1",
    )
    ax.errorbar(
        by_k[COLUMNS.k],
        by_k[vllm_names.STATS.tau],
        yerr=interval_yerr(by_k, vllm_names.STATS.tau, COLUMNS.tau_ci_low, COLUMNS.tau_ci_high),
        fmt="o-",
        capsize=3,
        color=PALETTE["spec"],
        label="measured τ, 95 % interval (T = 0)",
    )
    for k, tau in zip(by_k[COLUMNS.k], by_k[vllm_names.STATS.tau]):
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
        xticks=list(by_k[COLUMNS.k]),
    )
    ax.legend()
    colors = k_colors(sorted(per_position[COLUMNS.k].unique()))
    for i, (k, grp) in enumerate(per_position.groupby(COLUMNS.k)):
        bx.errorbar(
            grp.position + 1 + 0.04 * (i - len(colors) / 2),
            grp[COLUMNS.conditional_rate],
            yerr=interval_yerr(
                grp,
                COLUMNS.conditional_rate,
                COLUMNS.conditional_ci_low,
                COLUMNS.conditional_ci_high,
            ),
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


def plot_category_temperature(
    by_category: pd.DataFrame, by_temperature: pd.DataFrame, k: int
) -> Figure:
    """Left: τ per task category at k. Right: τ vs temperature at k."""
    fig, (ax, bx) = new_figure(2, width=5.2)
    tau_bars(ax, by_category[by_category[COLUMNS.k] == k], "category", k)
    bx.errorbar(
        by_temperature.temperature,
        by_temperature[vllm_names.STATS.tau],
        yerr=interval_yerr(
            by_temperature, vllm_names.STATS.tau, COLUMNS.tau_ci_low, COLUMNS.tau_ci_high
        ),
        fmt="o-",
        capsize=3,
        color=PALETTE["spec"],
    )
    for t, tau in zip(by_temperature.temperature, by_temperature[vllm_names.STATS.tau]):
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
