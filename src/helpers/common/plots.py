"""Uniform figures: one style for every notebook, every figure saved under build/figures/."""

from __future__ import annotations

from pathlib import Path

import matplotlib

if matplotlib.get_backend().lower() in {"", "agg"}:
    matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from helpers.common.paths import FIGURES_DIR

__all__ = [
    "PALETTE",
    "new_figure",
    "save_figure",
]

#: One colour per role, shared by all figures (accepted draft, verifier correction, bonus, plain).
PALETTE: dict[str, str] = {
    "accepted": "#2a9d8f",
    "correction": "#e76f51",
    "bonus": "#e9c46a",
    "plain": "#6c757d",
    "spec": "#264653",
    "recorded": "#8d99ae",
}


def new_figure(ncols: int = 1, width: float = 6.0, height: float = 3.6) -> tuple[Figure, list]:
    """A figure with `ncols` axes side by side, in the workbook's style."""
    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, height), squeeze=False)
    for ax in axes[0]:
        ax.grid(True, alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
    return fig, list(axes[0])


def save_figure(fig: Figure, name: str) -> Path:
    """Save `fig` as build/figures/<name>.png (tight, 120 dpi) and return the path."""
    FIGURES_DIR.mkdir(parents=True, exist_ok=True)
    path = FIGURES_DIR / f"{name}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path
