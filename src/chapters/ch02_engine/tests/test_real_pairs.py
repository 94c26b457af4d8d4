"""chapters.ch02_engine.real_pairs: the published records as a table, one row each."""

from __future__ import annotations

import dataclasses

from chapters.ch02_engine.real_pairs import published_table
from helpers.analytics.calibration import published_taus


def test_one_row_per_record_with_its_tau_and_temperature() -> None:
    records = published_taus()
    table = published_table()
    assert list(table.tau) == [r.tau for r in records] and "T" in table
    assert list(table.columns[:3]) == ["source", "date", "verifier"]
    unstated = dataclasses.replace(records[0], temperature=None)
    assert published_table([unstated])["T"].iloc[0] == "not stated"
