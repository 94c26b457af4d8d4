"""helpers.common.tables: the k column and the one table-saving rule."""

from __future__ import annotations

import pandas as pd

from helpers.common import vllm_names
from helpers.common.paths import BUILD_DIR
from helpers.common.tables import COLUMNS, save_table


def test_save_table_writes_build_tables_csv() -> None:
    df = pd.DataFrame({COLUMNS.k: [1, 3], vllm_names.STATS.tau: [1.9, 3.6]})
    path = save_table(df, "test_tables_roundtrip")
    try:
        assert path == BUILD_DIR / "tables" / "test_tables_roundtrip.csv"
        assert pd.read_csv(path).equals(df)
    finally:
        path.unlink()


def test_the_interval_columns_are_named_here_once() -> None:
    """The position table the intervals write has exactly the columns named here, so a reader
    (figures, sweeps, notebooks) that imports them reads what was written."""
    from helpers.analytics.intervals import position_intervals
    from helpers.common import tables
    from helpers.common.counters import RequestAcceptance

    written = position_intervals([RequestAcceptance((1, 2, 1), 6), RequestAcceptance((2, 1, 1), 6)])
    named = {
        tables.COLUMNS.rate_ci_low,
        tables.COLUMNS.rate_ci_high,
        tables.COLUMNS.conditional_rate,
        tables.COLUMNS.conditional_ci_low,
        tables.COLUMNS.conditional_ci_high,
    }
    assert named <= set(written.columns)
    assert (
        len(named | {tables.COLUMNS.tau_ci_low, tables.COLUMNS.tau_ci_high, COLUMNS.k}) == 8
    )  # all distinct
