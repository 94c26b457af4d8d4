"""When does speculation pay? A speculative step emits τ tokens and costs c(k) plain steps, so
the speed-up is τ / c(k): the recorded H200 MoE lab's c and published real-pair runs (notebooks 01
and 06).

The H200 costs of the real Qwen3-30B-A3B shape are *recorded* measurements from another
machine, never results of this run: the MoE lab (`LAB_FILE`, scripts/gpu_moe_lab.py: distinct
prompts, concurrency 1-64). Notebook 06's chapter reads the rest of what it records
(`chapters.ch06_moe.lab`).
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
    "trusted_rows",
    "lab_step_costs",
    "AS_LOADED",
    "peak_tb_s",
]

#: The MoE lab's recorded H200 run (scripts/gpu_moe_lab.py), with its provenance.
LAB_FILE: Path = DATA_DIR / "measurements" / "h200-moe-lab.json"
#: The routing label of the lab's rows measured on the weights as loaded (random), and of old
#: records (kit.moe_lab names its designs beside it).
AS_LOADED = "random weights (as loaded)"
#: Peak HBM bandwidth by GPU (TB/s), from the vendor's datasheet: NVIDIA H200 (HBM3e),
#: https://www.nvidia.com/en-us/data-center/h200/ ("4.8TB/s" memory bandwidth).
_PEAK_HBM_TB_S: Mapping[str, float] = {"H200": 4.8}


def peak_tb_s(gpu: str) -> float | None:
    """The datasheet HBM bandwidth of a GPU named like 'NVIDIA H200' (None when not listed)."""
    for name, tb_s in _PEAK_HBM_TB_S.items():
        if re.search(rf"\b{name}\b", gpu):
            return tb_s
    return None


def trusted_rows(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The lab's rows whose routing is known to be their label's.

    From format 3 on the lab writes a cell only after the worker read back the routing it labels
    (`routing_read_back`), so a row without that match is dropped. Format 2 never restored the
    weights as loaded after a design: its as-loaded cells after an engine's first routing block
    measured the last design's routing (the τ grid's tail at k = 3 and 5 carries the Zipf design's
    read-back signature). Of those records only the first block's as-loaded cells are kept: per
    engine, the first two τ it measured (the lab's `blocks` put them before any design).
    """
    rows = list(record["rows"])
    if record.get("format", 0) >= 3:
        return [r for r in rows if r.get("routing_read_back", r.get("routing")) == r.get("routing")]
    first: dict[int, list[Any]] = {}
    for r in rows:
        if r.get("routing", AS_LOADED) == AS_LOADED:
            taus = first.setdefault(r["k"], [])
            if r["tau_target"] not in taus and len(taus) < 2:
                taus.append(r["tau_target"])
    return [
        r
        for r in rows
        if r.get("routing", AS_LOADED) != AS_LOADED or r["tau_target"] in first[r["k"]]
    ]


def lab_step_costs(record: Mapping[str, Any]) -> pd.DataFrame:
    """The MoE lab's speculative rows with their speed-up and measured c(k, C) over plain decoding
    at the same concurrency (the median of plain's cells there), for the routing as loaded, over
    `trusted_rows` only (`chapters.ch06_moe.lab.routing_table` reads the designs)."""
    rows = pd.DataFrame(trusted_rows(record)).rename(columns={"k": COLUMNS.k})
    if "routing" in rows:
        rows = rows[rows.routing == AS_LOADED]
    plain = rows[rows[COLUMNS.k] == 0].groupby("concurrency")[["tok_s", "steps_per_s"]].median()
    lab = rows[rows[COLUMNS.k] > 0].copy()
    lab["speedup"] = lab.tok_s / lab.concurrency.map(plain.tok_s)
    lab["measured_c"] = lab.concurrency.map(plain.steps_per_s) / lab.steps_per_s
    return lab.reset_index(drop=True)


_PUBLISHED_FILE: Path = DATA_DIR / "published" / "qwen3-30b-a3b-eagle3.json"


def published_points(path: Path = _PUBLISHED_FILE) -> pd.DataFrame:
    """Published Qwen3-30B-A3B + EAGLE-3 runs (recorded, another framework and GPU): one row per
    run with its batch, acceptance length, and speed-up over the same source's plain run."""
    record = json.loads(Path(path).read_text())
    rows = []
    for run in record["spec"]:
        plain = record["plain_tok_s"][run["source"]].get(str(run["batch"]))
        if plain is None:
            continue
        rows.append(
            {
                **run,
                "plain_tok_s": plain,
                "speedup_vs_plain": run["tok_s"] / plain,
                "date": record["sources"][run["source"]]["date"],
                "role": record["sources"][run["source"]].get("role", ""),
            }
        )
    return pd.DataFrame(rows)
