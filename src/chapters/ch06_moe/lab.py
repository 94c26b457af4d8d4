"""The MoE lab's record read (scripts/gpu_moe_lab.py, notebook 06): c(k, C) and the speed-up of
every cell, the bandwidth each plain step reached, the cells a step model is fitted to, and the
routing designs side by side.

A record of the lab (`speedup.LAB_FILE`) holds one row per measured cell: k (0 = plain decoding),
the target τ, the concurrency C, the routing design, the decode step time and tokens, and (from
format 2 on) what the generated positions read: `batch_union_<n>`, the distinct experts per layer
of C sequences × n positions. Older records lack the routing; their unions are then the
independent-routing expectation (random weights route at random), and the tables say which.

The step model that `model_c` and `answer_table` take, t(k, C, GB) in ms, is fitted in notebook
06's cells (section 4): fixed + k · per_draft + GB / bandwidth + tokens · per_token.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from chapters.ch06_moe import moe
from helpers.analytics import speedup
from helpers.common.configs import read_config
from helpers.common.paths import DATA_DIR, REPO_ROOT
from helpers.common.tables import COLUMNS

__all__ = [
    "AS_LOADED",
    "load_lab",
    "lab_shape",
    "lab_context",
    "cells",
    "plain_bandwidth",
    "routing_table",
    "c_table",
    "shape_verdict",
    "union_effect",
    "answer_table",
    "model_c",
    "load_h200",
    "recorded_on",
    "one_prompt_batch",
]

#: The routing of a record's rows measured on the weights as loaded (random), and of old records.
AS_LOADED = speedup.AS_LOADED
#: A step model: the time (ms) of a step of k drafts at concurrency C that reads GB gigabytes.
_StepModel = Callable[[int, int, float], float]
#: An earlier single-sequence H200 record, whose batch runs copied one prompt: kept only as the
#: contrast `one_prompt_batch` teaches from.
_H200_FILE: Path = DATA_DIR / "measurements" / "h200-vllm-step-costs.json"
_H200_SHAPE = "qwen3_30b_a3b_real_shape"


def load_lab(path: Path = speedup.LAB_FILE) -> dict[str, Any]:
    """A lab record with its provenance ('what', 'how' or 'caveats', 'gpu', 'rows')."""
    record = json.loads(Path(path).read_text())
    missing = {"what", "gpu", "rows"} - set(record)
    if missing or not ({"how", "caveats"} & set(record)):
        raise ValueError(
            f"{path} lacks provenance ({sorted(missing) or 'how'}): keep it with the rows"
        )
    return record


def lab_shape(record: Mapping[str, Any]) -> moe.MoeShape:
    """The verifier shape the lab ran (the config.json of its `verifier` folder), with the lm_head
    of the drafter it ran (the `drafter_config` it recorded, else its `drafter` folder's)."""
    drafter = record.get("drafter_config")
    if drafter is None:
        drafter = read_config(REPO_ROOT / record["drafter"])
    return moe.shape_from_folder(REPO_ROOT / record["verifier"], drafter)


def lab_context(record: Mapping[str, Any]) -> int:
    """The mean context of a decode step in the lab: the prompt plus half the answer."""
    s = record["settings"]
    return int(s["prompt_tokens"] + s["new_tokens"] // 2)


def cells(record: Mapping[str, Any]) -> pd.DataFrame:
    """Every cell whose routing is known to be its label's (`speedup.trusted_rows`) with its step
    time, the union its step read, its bytes, and the bandwidth that makes: one row per (k, τ,
    concurrency, routing)."""
    shape, context = lab_shape(record), lab_context(record)
    df = pd.DataFrame(speedup.trusted_rows(record)).rename(columns={"k": COLUMNS.k})
    if "routing" not in df:
        df["routing"] = AS_LOADED
    if "step_ms" not in df:
        df["step_ms"] = 1e3 / df.steps_per_s
    df["positions"] = df[COLUMNS.k] + 1
    measured, source = [], []
    for _, r in df.iterrows():
        key = f"batch_union_{int(r.positions)}"
        value = r.get(key)
        if value is not None and value == value:
            measured.append(float(value))
            source.append("read back")
        else:
            n = r.concurrency * r.positions
            measured.append(moe.independent_union(shape.experts, shape.active, n))
            source.append("independent (expected)")
    df["union"], df["union_source"] = measured, source
    df["gb_per_step"] = [
        moe.step_bytes(shape, c, u, context, drafter_steps=k) / 1e9
        for c, u, k in zip(df.concurrency, df.union, df[COLUMNS.k])
    ]
    df["achieved_tb_s"] = df.gb_per_step / df.step_ms  # GB/ms = TB/s
    df["tokens"] = df.concurrency * df.positions
    return df


def plain_bandwidth(record: Mapping[str, Any]) -> pd.DataFrame:
    """Plain decoding per concurrency: the union a step read, its bytes, the bandwidth reached and
    its share of the GPU's datasheet peak (NaN for a GPU `speedup.peak_tb_s` does not list)."""
    df = cells(record)
    df = df[(df[COLUMNS.k] == 0) & (df.routing == AS_LOADED)].copy()
    peak = speedup.peak_tb_s(record["gpu"])
    df["peak_tb_s"] = peak if peak is not None else float("nan")
    df["share_of_peak"] = df.achieved_tb_s / df.peak_tb_s
    keep = ["concurrency", "step_ms", "union", "union_source", "gb_per_step", "achieved_tb_s"]
    return df[keep + ["peak_tb_s", "share_of_peak"]].reset_index(drop=True)


def routing_table(record: Mapping[str, Any], k: int) -> pd.DataFrame:
    """Per routing design and concurrency: ρ and the effective experts read back, the plain and
    speculative unions, and the measured c(k, C) (empty for a record without designs)."""
    df = cells(record)
    plain = df[df[COLUMNS.k] == 0].set_index(["routing", "concurrency"])
    spec = df[df[COLUMNS.k] == k]
    rows = []
    for (design, conc), grp in spec.groupby(["routing", "concurrency"], sort=False):
        if (design, conc) not in plain.index:
            continue
        p = plain.loc[(design, conc)]
        rows.append(
            {
                "routing": design,
                "concurrency": conc,
                "rho_4": p.get("rho_4", float("nan")),
                "effective_experts": p.get("effective_experts", float("nan")),
                "plain_union": p.union,
                "spec_union": grp.union.median(),
                "plain_step_ms": p.step_ms,
                "spec_step_ms": grp.step_ms.median(),
                "measured_c": grp.step_ms.median() / p.step_ms,
            }
        )
    return pd.DataFrame(rows)


def c_table(record: Mapping[str, Any]) -> pd.DataFrame:
    """c(k, C) per k and concurrency over the trusted as-loaded cells: the median of the
    speculative cells' c, and its band, the lowest and highest c any speculative cell gives against
    any plain cell at that concurrency (replicates: τ cells of one k, which cost the same work, and
    plain's first and last blocks where the record has both)."""
    df = cells(record)
    df = df[df.routing == AS_LOADED]
    plain = df[df[COLUMNS.k] == 0].groupby("concurrency").step_ms.agg(["min", "max", "median"])
    rows = []
    for (k, conc), grp in df[df[COLUMNS.k] > 0].groupby([COLUMNS.k, "concurrency"]):
        p = plain.loc[conc]
        rows.append(
            {
                COLUMNS.k: int(k),
                "concurrency": int(conc),
                "c": float(grp.step_ms.median() / p["median"]),
                "c_low": float(grp.step_ms.min() / p["max"]),
                "c_high": float(grp.step_ms.max() / p["min"]),
                "cells": len(grp),
            }
        )
    return pd.DataFrame(rows)


def union_effect(record: Mapping[str, Any], k: int) -> pd.DataFrame:
    """Per concurrency, at k: the step times the routing designs gave (the weights as loaded
    among them, at their median), the expert unions they read, and the spread of the as-loaded
    replicates; `separate` where the designs' step times spread wider than the replicates, so the
    union read moved the step there (a record without designs gives an empty table)."""
    df = cells(record)
    spec = df[df[COLUMNS.k] == k]
    if spec.routing.nunique() < 2:
        return pd.DataFrame()
    rows = []
    for conc, grp in spec.groupby("concurrency"):
        by = grp.groupby("routing").agg(step_ms=("step_ms", "median"), union=("union", "median"))
        loaded = grp[grp.routing == AS_LOADED].step_ms
        replicates = float(loaded.max() - loaded.min()) if len(loaded) > 1 else float("nan")
        span = float(by.step_ms.max() - by.step_ms.min())
        rows.append(
            {
                "concurrency": int(conc),
                "step_ms_low": float(by.step_ms.min()),
                "step_ms_high": float(by.step_ms.max()),
                "union_low": float(by.union.min()),
                "union_high": float(by.union.max()),
                "replicate_spread_ms": replicates,
                "separate": bool(span > replicates) if replicates == replicates else None,
            }
        )
    return pd.DataFrame(rows)


def shape_verdict(table: pd.DataFrame, x: str, est: str, low: str, high: str) -> str:
    """How `est` moves along `x`, said only where the bands say it: each step between neighbours
    is 'up' or 'down' when their bands do not overlap, else 'within the band'; the verdict is
    'rises', 'falls', 'rises then falls', 'falls then rises', 'stays within its band', or
    'this run cannot tell' where some steps are within the band and others not."""
    t = table.sort_values(x).reset_index(drop=True)
    steps = []
    for a, b in zip(t.iloc[:-1].itertuples(), t.iloc[1:].itertuples()):
        if getattr(b, low) > getattr(a, high):
            steps.append("up")
        elif getattr(b, high) < getattr(a, low):
            steps.append("down")
        else:
            steps.append("band")
    moves = [s for s in steps if s != "band"]
    if not moves:
        return "stays within its band"
    if len(moves) < len(steps):
        return "this run cannot tell (" + ", ".join(steps).replace("band", "within the band") + ")"
    turns = [m for i, m in enumerate(moves) if i == 0 or m != moves[i - 1]]
    names = {("up",): "rises", ("down",): "falls"}
    return names.get(
        tuple(turns), " then ".join({"up": "rises", "down": "falls"}[m] for m in turns)
    )


def model_c(
    step_ms: _StepModel, shape: moe.MoeShape, k: int, conc: int, rho: float, context: int
) -> float:
    """c(k, C) a step model predicts for routing of within-sequence correlation rho."""
    plain = moe.union_with_correlation(shape.experts, shape.active, conc, 1, rho)
    spec = moe.union_with_correlation(shape.experts, shape.active, conc, k + 1, rho)
    gb_plain = moe.step_bytes(shape, conc, plain, context) / 1e9
    gb_spec = moe.step_bytes(shape, conc, spec, context, drafter_steps=k) / 1e9
    return step_ms(k, conc, gb_spec) / step_ms(0, conc, gb_plain)


def answer_table(record: Mapping[str, Any], step_ms: _StepModel, rho: float) -> pd.DataFrame:
    """Per k and concurrency: the measured c (as loaded, median over the trusted cells) and its
    band: the range over the routing designs the record measured, else the step model's change
    of c from independent routing to within-sequence correlation `rho` (a trained router's; the
    real router's is unknown), laid on the measured c."""
    costs = speedup.lab_step_costs(record)
    shape, context = lab_shape(record), lab_context(record)
    by_k = {k: routing_table(record, k) for k in costs[COLUMNS.k].unique()}
    rows = []
    for (k, conc), grp in costs.groupby([COLUMNS.k, "concurrency"]):
        c = float(grp.measured_c.median())
        designs = by_k[k]
        at = designs[designs.concurrency == conc].measured_c if len(designs) else []
        if len(at) > 1:
            low, high, source = min(c, at.min()), max(c, at.max()), "routing designs, measured"
        else:
            ends = [model_c(step_ms, shape, k, conc, r, context) for r in (0.0, rho)]
            moved = c + ends[1] - ends[0]
            low, high = min(c, moved), max(c, moved)
            source = f"fitted model, rho 0 to {rho:.2f}"
        rows.append({COLUMNS.k: k, "concurrency": conc, "c": c, "c_low": low, "c_high": high})
        rows[-1]["band_source"] = source
    return pd.DataFrame(rows)


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
    df[COLUMNS.k] = [0 if r == "plain" else int(r[1:]) for r in df.run]
    df["relative_step_cost"] = df.batch_size.map(plain) / df.steps_per_s
    return df.sort_values([COLUMNS.k, "batch_size"], ignore_index=True)
