"""Schematic figures that explain mechanisms (no measured numbers in them): notebook 02."""
from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from helpers.plots import COLORS, new_figure, save_figure


def _box(ax, x: float, y: float, text: str, color: str, width: float = 0.8) -> None:
    """A rounded box with centred text."""
    ax.add_patch(FancyBboxPatch((x, y), width, 0.6, boxstyle="round,pad=0.02", facecolor=color,
                                edgecolor="black", lw=0.6))
    ax.text(x + width / 2, y + 0.3, text, ha="center", va="center", fontsize=9)


def draft_verify_round(k: int = 3, accepted: int = 2, name: str = "draft_verify_round") -> Figure:
    """One speculative step: k sequential drafts, one verifier pass over k+1 positions, the outcome.

    With `accepted` < k the verifier's token at the first mismatch replaces the draft (a
    correction); with accepted == k every draft stands and the verifier adds a bonus token.
    Either way the step emits accepted + 1 tokens.
    """
    if not 0 <= accepted <= k:
        raise ValueError(f"accepted must be between 0 and k={k}, got {accepted}")
    fig, (ax,) = new_figure(1, width=1.25 * (k + 4), height=3.4)
    ax.grid(False)
    ax.axis("off")
    _box(ax, 0, 2, "context\n…", "#dee2e6", 1.2)
    for i in range(k):
        _box(ax, 1.5 + i, 2, f"d{i + 1}", "#cfe2ff")
    ax.text(1.5 + k + 0.2, 2.3, "drafter: k cheap steps,\none token each", fontsize=8, va="center")
    _box(ax, 0, 1, "verifier", "#dee2e6", 1.2)
    for i in range(k + 1):
        _box(ax, 1.5 + i, 1, f"v{i + 1}", "#e9ecef")
    ax.text(1.5 + k + 1.2, 1.3, "one forward pass\nover k+1 positions", fontsize=8, va="center")
    for i in range(k + 1):
        if i < accepted:
            label, color = f"d{i + 1}=v{i + 1}", COLORS["accepted"]
        elif i == accepted:
            label, color = (f"v{i + 1}", COLORS["bonus"] if accepted == k else COLORS["correction"])
        else:
            continue
        _box(ax, 1.5 + i, 0, label, color)
    outcome = "bonus token" if accepted == k else "correction"
    ax.text(1.5 + k + 1.2, 0.3, f"emit {accepted} accepted + 1 {outcome}\n= {accepted + 1} tokens this step",
            fontsize=8, va="center")
    ax.set_xlim(-0.2, k + 5.8)
    ax.set_ylim(-0.3, 2.9)
    ax.set_title(f"One EAGLE-3 step, k={k} (schematic)", fontsize=10)
    save_figure(fig, name)
    return fig
