"""helpers.common.plots: one style, one saving rule (build/figures/<name>.png)."""

from __future__ import annotations

from helpers.common.paths import FIGURES_DIR
from helpers.common.plots import PALETTE, new_figure, save_figure


def test_new_figure_and_save() -> None:
    fig, axes = new_figure(2)
    assert len(axes) == 2 and not axes[0].spines["top"].get_visible()
    axes[0].plot([0, 1], [0, 1], color=PALETTE["spec"])
    path = save_figure(fig, "test_figures_save")
    try:
        assert path == FIGURES_DIR / "test_figures_save.png" and path.stat().st_size > 0
    finally:
        path.unlink()
