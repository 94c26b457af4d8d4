"""helpers.analytics.figures: the pieces two or more notebooks draw with."""

from __future__ import annotations

import pandas as pd

from helpers.analytics import figures
from helpers.common.plots import new_figure
from helpers.common.tables import COLUMNS
from helpers.common.vllm_names import STATS


def test_one_distinct_colour_per_k() -> None:
    colors = figures.k_colors([1, 3, 5])
    assert list(colors) == [1, 3, 5] and len(set(colors.values())) == 3


def test_error_bars_from_interval_columns_and_none_without_them() -> None:
    table = pd.DataFrame(
        {STATS.tau: [2.0, 3.0], COLUMNS.tau_ci_low: [1.5, 3.2], COLUMNS.tau_ci_high: [2.5, 3.5]}
    )
    low, high = figures.interval_yerr(table, STATS.tau, COLUMNS.tau_ci_low, COLUMNS.tau_ci_high)
    assert list(low) == [0.5, 0.0] and list(high) == [0.5, 0.5], "a bound past τ clips to 0"
    assert (
        figures.interval_yerr(
            table[[STATS.tau]], STATS.tau, COLUMNS.tau_ci_low, COLUMNS.tau_ci_high
        )
        is None
    )


def test_tau_bars_draw_one_bar_per_row_under_the_ceiling() -> None:
    table = pd.DataFrame(
        {
            "category": ["a", "b"],
            STATS.tau: [2.0, 3.0],
            COLUMNS.tau_ci_low: [1.8, 2.9],
            COLUMNS.tau_ci_high: [2.2, 3.1],
        }
    )
    _, (ax,) = new_figure(1)
    figures.tau_bars(ax, table, "category", 3)
    assert len(ax.patches) == 2 and ax.lines[-1].get_ydata()[0] == 4
