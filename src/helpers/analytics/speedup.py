"""When does speculation pay? A speculative step emits τ tokens and costs c(k) plain steps, so
the speed-up is τ / c(k): the recorded GPU MoE lab's c and published real-pair runs (notebooks 01
and 06).

The GPU costs of the real Qwen3-30B-A3B shape are *recorded* measurements from another machine,
never results of this run: the MoE lab (`LAB_FILE`, the GPU MoE lab of docs/gpu.md: distinct
prompts, concurrency 1-64, the pinned vLLM). `lab_rows` reads one graph mode and model runner of
it at a time (the main grid's by default: what the lab ran as a deployment runs) and refuses a
record whose cells cannot be trusted; notebook 06's chapter reads the rest (its `lab` module).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.common.paths import DATA_DIR
from helpers.common.tables import COLUMNS

__all__ = [
    "published_points",
    "LAB_FILE",
    "lab_mode",
    "lab_rows",
    "lab_step_costs",
    "AS_LOADED",
    "peak_tb_s",
]

#: The MoE lab's recorded GPU run (docs/gpu.md's GPU MoE lab), with its provenance.
LAB_FILE: Path = DATA_DIR / "measurements" / "gpu-moe-lab.json"
#: The routing label of the lab's rows measured on the weights as loaded (random), and of old
#: records (the lab names its designs beside it).
AS_LOADED = "random weights (as loaded)"
#: The cells of C requests decoding together (prefill excluded): the lab's grid. Format 4 adds
#: served-mix and one-prompt cells beside them; older records hold lockstep cells only.
_LOCKSTEP = "lockstep"
#: The first record format whose every cell read back the routing it labels (format 2 measured
#: some designs' routing under as-loaded labels and is not read).
_FIRST_TRUSTED_FORMAT = 3
#: Peak HBM bandwidth by GPU (TB/s), from the vendor's datasheets, read 2026-12-06: NVIDIA H200
#: (HBM3e), https://www.nvidia.com/en-us/data-center/h200/ ("4.8TB/s"); H100 SXM (HBM3),
#: https://www.nvidia.com/en-us/data-center/h100/ ("3.35TB/s"; the NVL card: 3.9TB/s).
_PEAK_HBM_TB_S: Mapping[str, float] = {"H200": 4.8, "H100 NVL": 3.9, "H100": 3.35}


def peak_tb_s(gpu: str) -> float | None:
    """The datasheet HBM bandwidth of a GPU named like 'NVIDIA H200' (None when not listed)."""
    for name, tb_s in _PEAK_HBM_TB_S.items():
        if re.search(rf"\b{name}\b", gpu):
            return tb_s
    return None


def lab_mode(record: Mapping[str, Any]) -> tuple[str, str | None]:
    """The main grid's graph mode and model runner: what `lab_rows` reads unless told otherwise
    (the runner is None for a record that did not read it back, format 3)."""
    labels = record.get("engine_labels", {})
    return record["settings"]["graphs"], labels.get("plain", {}).get("runner")


def lab_rows(
    record: Mapping[str, Any],
    graphs: str | None = None,
    runner: str | None = None,
    cell: str = _LOCKSTEP,
) -> pd.DataFrame:
    """The record's cells of one graph mode, one model runner and one kind (default: the main
    grid's, `lab_mode`, lockstep), k as COLUMNS.k. Raises ValueError for a record older than
    format 3, or for a cell whose read-back routing is not its label's."""
    version = record.get("format", 0)
    if version < _FIRST_TRUSTED_FORMAT:
        raise ValueError(
            f"a format {version} MoE-lab record: its cells did not read their routing back; "
            f"measure again with the GPU MoE lab of docs/gpu.md (format {_FIRST_TRUSTED_FORMAT} "
            "or later)"
        )
    main_graphs, main_runner = lab_mode(record)
    graphs, runner = graphs or main_graphs, runner or main_runner
    df = pd.DataFrame(record["rows"]).rename(columns={"k": COLUMNS.k})
    for name, default in (("cell", _LOCKSTEP), ("runner", main_runner), ("graphs", main_graphs)):
        if name not in df:
            df[name] = default
        df[name] = df[name].fillna(default) if default is not None else df[name]
    wrong = df[df.get("routing_read_back", df.routing) != df.routing]
    if len(wrong):
        r = wrong.iloc[0]
        raise ValueError(
            f"{len(wrong)} cell(s) read back another routing than their label (k={r[COLUMNS.k]}, "
            f"C={r.concurrency}: {r.routing!r} read back {r.routing_read_back!r}): not read"
        )
    keep = (df.graphs == graphs) & (df.cell == cell)
    if runner is not None:
        keep &= df.runner == runner
    return df[keep].reset_index(drop=True)


def lab_step_costs(record: Mapping[str, Any]) -> pd.DataFrame:
    """The main grid's speculative cells on the weights as loaded, with their speed-up and
    measured c(k, C) over plain decoding at the same concurrency (the median of every plain cell
    there, both as-loaded blocks pooled); 06's chapter (its `lab`) reads the designs and checks."""
    rows = lab_rows(record)
    rows = rows[rows.routing == AS_LOADED]
    plain = rows[rows[COLUMNS.k] == 0].groupby("concurrency")[["tok_s", "steps_per_s"]].median()
    lab = rows[rows[COLUMNS.k] > 0].copy()
    lab["speedup"] = lab.tok_s / lab.concurrency.map(plain.tok_s)
    lab["measured_c"] = lab.concurrency.map(plain.steps_per_s) / lab.steps_per_s
    return lab.reset_index(drop=True)


_PUBLISHED_FILE: Path = DATA_DIR / "published" / "qwen3-30b-a3b-eagle3.json"


def published_points(path: Path = _PUBLISHED_FILE) -> pd.DataFrame:
    """Published Qwen3-30B-A3B + EAGLE-3 runs (recorded; other engines and GPUs): one row per run
    with its conditions, τ as `acceptance_length` and the speed-up over the same source's plain
    run at the same batch (runs without a stated batch or a plain rate are left out)."""
    record = json.loads(Path(path).read_text(encoding="utf-8"))
    rows = [
        {
            **run,
            "acceptance_length": run["tau"],
            "speedup_vs_plain": run["spec_tok_s"] / run["plain_tok_s"],
        }
        for run in record["runs"]
        if run["batch"] is not None and run["plain_tok_s"] and run["spec_tok_s"]
    ]
    return pd.DataFrame(rows)
