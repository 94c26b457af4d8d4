"""When does speculation pay? The speed-up model and the recorded H200 measurements (notebooks 01
and 06).

Model (Leviathan et al. 2023, with EAGLE's per-token acceptance α assumed i.i.d.): a speculative
step emits E[tokens/step] = (1 − α^{k+1}) / (1 − α) tokens (k + 1 when α = 1) and costs c(k) plain
steps, so speedup(k, α) = E[tokens/step] / c(k). With vLLM's measured acceptance length τ in place
of E[tokens/step], speculation pays exactly when τ > c(k).

The H200 costs of the real Qwen3-30B-A3B shape are *recorded* measurements from another
machine, never results of this run: the MoE lab (`LAB_FILE`, scripts/gpu_moe_lab.py: distinct
prompts, concurrency 1-64) and an earlier single-sequence record (`_H200_FILE`), whose batch runs
copied one prompt and are kept only as the contrast `one_prompt_batch` teaches from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.common.paths import DATA_DIR
from helpers.common.tables import K_COLUMN

__all__ = [
    "published_points",
    "load_h200",
    "recorded_on",
    "one_prompt_batch",
    "LAB_FILE",
    "trusted_rows",
    "lab_step_costs",
    "literature",
    "expected_tokens_per_step",
    "AS_LOADED",
    "PEAK_HBM_TB_S",
    "peak_tb_s",
]

_H200_FILE: Path = DATA_DIR / "measurements" / "h200-vllm-step-costs.json"
_H200_SHAPE = "qwen3_30b_a3b_real_shape"


# --------------------------------------------------------------------------- the model


def expected_tokens_per_step(k: int, alpha: float) -> float:
    """E[tokens per speculative step] = 1 + α + … + α^k = (1 − α^{k+1}) / (1 − α)."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


# ------------------------------------------------------------------- the recorded H200 measurement


def load_h200(path: Path = _H200_FILE) -> dict[str, Any]:
    """The recorded H200 step-rate measurement with its provenance ('what', 'how')."""
    record = json.loads(Path(path).read_text())
    missing = {"what", "how", _H200_SHAPE} - set(record)
    if missing:
        raise ValueError(f"{path} lacks {sorted(missing)}: keep the provenance when copying it")
    return record


def recorded_on(record: dict[str, Any]) -> str:
    """The date in a record's 'what' field (YYYY-MM-DD), or 'undated'."""
    found = re.search(r"\d{4}-\d{2}-\d{2}", record.get("what", ""))
    return found.group(0) if found else "undated"


#: The block of the H200 record that batched copies of one prompt (its caveat says why it is kept).
_ONE_PROMPT = "one_prompt_batch"


def one_prompt_batch(record: dict[str, Any]) -> pd.DataFrame:
    """The recorded batch runs of ONE prompt copied B times, as steps/s and c(k, B) per batch
    size, with the bs1 run beside them: identical greedy sequences route to identical experts, so
    these batches read one sequence's experts and look cheap (the contrast, not a batch cost)."""
    block = record[_ONE_PROMPT]["steps_per_s"]
    single = record[_H200_SHAPE]["steps_per_s"]
    rows = []
    for name, rates in block.items():
        for batch, rate in {**{"bs1": single[name]["bs1"]}, **rates}.items():
            rows.append({"run": name, "batch_size": int(batch[2:]), "steps_per_s": rate})
    df = pd.DataFrame(rows)
    plain = df[df.run == "plain"].set_index("batch_size").steps_per_s
    df[K_COLUMN] = [0 if r == "plain" else int(r[1:]) for r in df.run]
    df["relative_step_cost"] = df.batch_size.map(plain) / df.steps_per_s
    return df.sort_values([K_COLUMN, "batch_size"], ignore_index=True)


#: The MoE lab's recorded H200 run (scripts/gpu_moe_lab.py), with its provenance.
LAB_FILE: Path = DATA_DIR / "measurements" / "h200-moe-lab.json"
#: The routing label of the lab's rows measured on the weights as loaded (random), and of old
#: records (kit.moe_lab names its designs beside it).
AS_LOADED = "random weights (as loaded)"
#: Peak HBM bandwidth by GPU (TB/s), from the vendor's datasheet: NVIDIA H200 (HBM3e),
#: https://www.nvidia.com/en-us/data-center/h200/ ("4.8TB/s" memory bandwidth).
PEAK_HBM_TB_S: Mapping[str, float] = {"H200": 4.8}


def peak_tb_s(gpu: str) -> float | None:
    """The datasheet HBM bandwidth of a GPU named like 'NVIDIA H200' (None when not listed)."""
    for name, tb_s in PEAK_HBM_TB_S.items():
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
    rows = pd.DataFrame(trusted_rows(record)).rename(columns={"k": K_COLUMN})
    if "routing" in rows:
        rows = rows[rows.routing == AS_LOADED]
    plain = rows[rows[K_COLUMN] == 0].groupby("concurrency")[["tok_s", "steps_per_s"]].median()
    lab = rows[rows[K_COLUMN] > 0].copy()
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


#: Published work on speculation for MoE verifiers, and reported runs, with conditions and dates.
_LITERATURE_FILE: Path = DATA_DIR / "published" / "moe-speculation.json"


def literature(path: Path = _LITERATURE_FILE) -> pd.DataFrame:
    """One row per published number: source, date, role (MoE method, reported speed-up, reported
    slowdown, other drafter), conditions, the number, and whether it was read in the source."""
    record = json.loads(Path(path).read_text())
    return pd.DataFrame(record["records"])
