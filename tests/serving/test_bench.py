"""helpers.serving.bench: the spec/plain comparison, the crossing sentence computed from the table,
and the bounded request counts (the live benchmark runs in notebook 04 under nbval)."""

from __future__ import annotations

import pandas as pd
import pytest

from helpers.common.prompts import CATEGORIES, load_prompts
from helpers.serving.bench import (
    bench_prompts,
    crossing_concurrency,
    crossing_statement,
    requests_for,
    speedup_table,
)


def bench_frame(
    plain: list[float], spec: list[float], levels: tuple[int, ...] = (1, 2, 4, 8)
) -> pd.DataFrame:
    """A results frame with given output tok/s per level."""
    rows = [
        {"mode": m, "concurrency": c, "output_tok_s": v, "mean_ttft_ms": 10.0, "mean_tpot_ms": 5.0}
        for m, vals in (("plain", plain), ("spec", spec))
        for c, v in zip(levels, vals)
    ]
    return pd.DataFrame(rows)


def test_crossing_found_and_stated() -> None:
    table = speedup_table(bench_frame([100, 180, 300, 400], [200, 300, 290, 300]))
    assert list(table.speedup.round(2)) == [2.0, 1.67, 0.97, 0.75]
    assert crossing_concurrency(table) == 4
    assert crossing_statement(table).startswith(
        "The ratio first falls below 1 at concurrency 4 (0.97×; 1.67× at 2)"
    )


def test_no_crossing_stated() -> None:
    table = speedup_table(bench_frame([100, 180, 300, 400], [200, 300, 310, 401]))
    assert crossing_concurrency(table) is None
    assert crossing_statement(table).startswith("The ratio did not cross 1 up to concurrency 8")


def test_always_below_one_stated() -> None:
    table = speedup_table(bench_frame([100, 180], [90, 150], levels=(1, 2)))
    assert crossing_concurrency(table) == 1
    assert crossing_statement(table).startswith(
        "The ratio is below 1 at every concurrency measured"
    )


def test_requests_per_level_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "false")
    assert [requests_for(c) for c in (1, 2, 4, 8, 16)] == [8, 8, 8, 16, 32]
    monkeypatch.setenv("CI", "true")
    assert [requests_for(c) for c in (1, 2, 4, 8, 16)] == [4, 4, 4, 8, 16]


def test_bench_prompts_interleave_the_categories() -> None:
    prompts = bench_prompts(8)
    assert len(prompts) == 8 and len(set(prompts)) == 8
    per_category = load_prompts()
    assert prompts[:4] == [per_category[c][0] for c in CATEGORIES]


def test_cpu_by_role_splits_engine_and_front_end() -> None:
    import os
    import subprocess
    import sys

    import psutil

    from helpers.serving.bench import cpu_by_role

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        roles = cpu_by_role([psutil.Process(child.pid)])
        assert set(roles) == {"client", "front_end", "engine"}
        assert roles["client"] > 0 and roles["engine"] == 0.0
        assert cpu_by_role([psutil.Process(os.getpid())])["front_end"] > 0
    finally:
        child.kill()
        child.wait()
