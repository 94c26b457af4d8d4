"""Notebook 04's cells on a vLLM without per-request records (the GPU test stack's): the cells that
branch on it run here on canned benchmark runs, so the path the CPU never takes cannot fail on a
typo. The cells are read from the notebook by id and run as they are."""

from __future__ import annotations

import math
from types import SimpleNamespace

import nbformat
import pandas as pd
import pytest
from IPython.display import display

from chapters.ch04_serving import bench, clients, server
from chapters.ch04_serving.clients import StreamResult
from helpers.analytics import intervals
from helpers.common import counters, tables, vllm_names
from helpers.common.counters import SpecCounters
from helpers.common.paths import NOTEBOOKS_DIR
from helpers.engine import compat

NOTEBOOK = NOTEBOOKS_DIR / "04_serving_and_benchmarks.ipynb"


def cell(cell_id: str) -> str:
    """The source of the notebook cell with this id."""
    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    return next(c.source for c in nb.cells if c.get("id") == cell_id)


def stream(tokens: int, finish: str) -> StreamResult:
    """A streamed request that brought no acceptance record."""
    return StreamResult(
        output_tokens=tokens,
        prompt_tokens=30,
        ttft=0.05,
        latency=1.0,
        first_token_at=0.05,
        last_token_at=1.0,
        finish_reason=finish,
    )


def level(mode: str, c: int, length: str = bench._FORCED, repeat: int = 0) -> bench._LevelRun:
    """One level of canned requests; a speculative one moved the counters."""
    tokens, finish = (128, "length") if length == bench._FORCED else (90, "stop")
    counters_moved = SpecCounters(40, 120, 90, (35, 30, 25)) if mode == "spec" else SpecCounters()
    results = [stream(tokens, finish) for _ in range(max(4, c))]
    run = bench._LevelRun(mode, c, results, 2.0, 0, counters_moved, length=length)
    run.repeat = repeat
    return run


@pytest.fixture
def without_records(monkeypatch: pytest.MonkeyPatch) -> dict:
    """The notebook's namespace after a benchmark on a vLLM that returns no records."""
    monkeypatch.setattr(tables, "save_table", lambda df, name: f"build/tables/{name}.csv")
    level_runs = [level(m, c, repeat=r) for r in (0, 1) for c in (1, 4) for m in ("spec", "plain")]
    return {
        "bench": bench,
        "clients": clients,
        "compat": compat,
        "counters": counters,
        "display": display,
        "intervals": intervals,
        "math": math,
        "pd": pd,
        "server": server,
        "tables": tables,
        "vllm_names": vllm_names,
        "has_per_request": False,
        "profile": SimpleNamespace(name="canned"),
        "NATURAL_CONCURRENCY": 4,
        "NATURAL_MAX_TOKENS": 512,
        "requests_per_level": {1: 4, 4: 4},
        "level_runs": level_runs,
        "spec_runs": [r for r in level_runs if r.mode == "spec"],
        "natural_runs": [level(m, 4, bench._NATURAL) for m in ("spec", "plain")],
        "results": bench.results_frame(level_runs),
        "reply": {"choices": [{"message": {"role": "assistant", "content": "{}"}}]},
    }


def test_acceptance_cells_fall_back_to_the_counters(
    without_records: dict, capsys: pytest.CaptureFixture
) -> None:
    ns = without_records
    exec(cell("c21"), ns)  # section 5: the reply has no record
    assert ns["one"] is None
    for cell_id in ("reconcile", "countersframe", "c29", "c30", "n02", "n03"):  # section 6
        exec(cell(cell_id), ns)
    out = capsys.readouterr().out
    assert server.feature_label(vllm_names.PER_REQUEST.arg) in out
    # nothing to reconcile, and it says so
    assert (ns["reconciled"].equal == "not available in this vLLM").all()
    tau = ns["taus"][4]
    assert tau.estimate == pytest.approx(1 + 90 / 40) and not tau.bounded
    assert "no intervals (no per-request acceptance" in out
    assert ns["acceptance"].tau_ci_low.isna().all() and ns["acceptance"].requests.eq(0).all()
    assert not ns["natural_tau"].bounded
