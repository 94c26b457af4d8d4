"""03's outcome sentence flips with its table: the fastest k is read from the run, and a table the
run cannot decide says so (the repo-wide rule: tests/test_outcomes_computed.py)."""

from __future__ import annotations

import pandas as pd

from chapters.ch03_acceptance import experiments
from helpers.common.tables import COLUMNS


def _throughput(tok_s: dict[int, float], spread: float) -> pd.DataFrame:
    """A sweep's throughput table: median tok/s per k with a min-max range of ± spread."""
    return pd.DataFrame(
        {
            COLUMNS.k: list(tok_s),
            "output_tokens_per_s": list(tok_s.values()),
            "tokens_per_s_min": [v - spread for v in tok_s.values()],
            "tokens_per_s_max": [v + spread for v in tok_s.values()],
        }
    )


def test_the_fastest_k_follows_the_table() -> None:
    said = experiments.best_k_sentence(_throughput({0: 100.0, 3: 150.0}, spread=5))
    flipped = experiments.best_k_sentence(_throughput({0: 150.0, 3: 100.0}, spread=5))
    assert said.startswith("fastest k=3") and flipped.startswith("fastest plain")
    assert "do not overlap" in said
    close = experiments.best_k_sentence(_throughput({0: 100.0, 3: 104.0}, spread=5))
    assert "cannot tell them apart" in close
