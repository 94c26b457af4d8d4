"""helpers.common.tables: the k column and the one table-saving rule."""

from __future__ import annotations

import pandas as pd

from helpers.common import vllm_names
from helpers.common.paths import BUILD_DIR
from helpers.common.tables import K_COLUMN, save_table


def test_save_table_writes_build_tables_csv() -> None:
    df = pd.DataFrame({K_COLUMN: [1, 3], vllm_names.TAU: [1.9, 3.6]})
    path = save_table(df, "test_tables_roundtrip")
    try:
        assert path == BUILD_DIR / "tables" / "test_tables_roundtrip.csv"
        assert pd.read_csv(path).equals(df)
    finally:
        path.unlink()
