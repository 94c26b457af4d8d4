"""The MoE lab's record read (tools/gpu_moe_lab.py, notebook 06): c(k, C) and the speed-up of
every cell, the bandwidth each plain step reached, the routing designs side by side, the graph
mode and model runner checks, and the served-mix and one-prompt cells.

A record of the lab (`speedup.LAB_FILE`) holds one row per measured cell: k (0 = plain decoding),
the target τ, the concurrency C, the routing design, the graph mode and model runner its engine
read back, the kind of cell (lockstep, served mix, one prompt), the decode step time and tokens,
and what the generated positions read: `batch_union_<n>`, the distinct experts per layer of C
sequences × n positions. Every reader here takes one graph mode and runner at a time
(`speedup.lab_rows`: the main grid's unless a check is asked for) and pools the replicates of a
cell by their median: plain's as-loaded blocks at an engine's start and end, a k's τ values.

The step model that `model_c` takes, t(k, C, GB) in ms, is fitted in notebook 06's cells (section
4): fixed + k · per_draft + GB / bandwidth + tokens · per_token.
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
from helpers.common.paths import REPO_ROOT
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
    "graph_check",
    "runner_check",
    "served_mix",
    "one_prompt",
    "shape_verdict",
    "union_effect",
    "union_lines",
    "placement",
    "model_c",
    "recorded_on",
]

#: The routing of a record's rows measured on the weights as loaded (random).
AS_LOADED = speedup.AS_LOADED
#: The routing designs a trained router could plausibly be: the weights as loaded, ρ 0.25 and 0.5
#: (the real Instruct-2507 router's trace reads ρ ≈ 0.48 at 4 positions), the tiny router's ρ and
#: a Zipf-like popularity; independent routing and ρ 0.75 are the bounds, not candidates.
REALISTIC: tuple[str, ...] = (AS_LOADED, "rho 0.25", "rho 0.5", "rho tiny", "zipf 1")
#: A step model: the time (ms) of a step of k drafts at concurrency C that reads GB gigabytes.
_StepModel = Callable[[int, int, float], float]


def load_lab(path: Path = speedup.LAB_FILE) -> dict[str, Any]:
    """A lab record with its provenance ('what', 'how', 'gpu', 'rows')."""
    record = json.loads(Path(path).read_text(encoding="utf-8"))
    missing = {"what", "how", "gpu", "rows"} - set(record)
    if missing:
        raise ValueError(f"{path} lacks provenance ({sorted(missing)}): keep it with the rows")
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


def cells(
    record: Mapping[str, Any], graphs: str | None = None, runner: str | None = None
) -> pd.DataFrame:
    """The lockstep cells of one graph mode and runner (the main grid's by default) with the union
    each step read, its bytes and the bandwidth that makes: one row per cell."""
    shape, context = lab_shape(record), lab_context(record)
    df = speedup.lab_rows(record, graphs, runner)
    df["positions"] = df[COLUMNS.k] + 1
    measured, source = [], []
    for _, r in df.iterrows():
        value = r.get(f"batch_union_{int(r.positions)}")
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
    """Plain decoding per concurrency (as loaded, every block pooled by median): the union a step
    read, its bytes, the bandwidth reached and its share of the GPU's datasheet peak (NaN for a GPU
    `speedup.peak_tb_s` does not list)."""
    df = cells(record)
    df = df[(df[COLUMNS.k] == 0) & (df.routing == AS_LOADED)]
    keep = ["step_ms", "union", "gb_per_step", "achieved_tb_s"]
    out = df.groupby("concurrency")[keep].median().reset_index()
    out["union_source"] = df.groupby("concurrency").union_source.first().to_numpy()
    peak = speedup.peak_tb_s(record["gpu"])
    out["peak_tb_s"] = peak if peak is not None else float("nan")
    out["share_of_peak"] = out.achieved_tb_s / out.peak_tb_s
    return out


def _medians(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per group: the median step time and union of its cells (replicates pooled), and how many."""
    return (
        df.groupby(by)
        .agg(step_ms=("step_ms", "median"), union=("union", "median"), cells=("step_ms", "size"))
        .reset_index()
    )


def design_costs(record: Mapping[str, Any]) -> pd.DataFrame:
    """c(k, C) under every routing design the main grid measured: per (k, C, routing), the median
    speculative step over the median plain step of the same design, with both unions and the
    plain cells' read-back ρ at 4 positions and effective experts."""
    df = cells(record)
    plain = _medians(df[df[COLUMNS.k] == 0], ["routing", "concurrency"])
    extra = (
        df[df[COLUMNS.k] == 0]
        .groupby(["routing", "concurrency"])[["rho_4", "effective_experts"]]
        .median()
        .reset_index()
        if "rho_4" in df
        else None
    )
    spec = _medians(df[df[COLUMNS.k] > 0], [COLUMNS.k, "routing", "concurrency"])
    out = spec.merge(plain, on=["routing", "concurrency"], suffixes=("", "_plain"))
    if extra is not None:
        out = out.merge(extra, on=["routing", "concurrency"], how="left")
    out["c"] = out.step_ms / out.step_ms_plain
    return out.rename(
        columns={"step_ms": "spec_step_ms", "union": "spec_union", "union_plain": "plain_union"}
    )


def routing_table(record: Mapping[str, Any], k: int) -> pd.DataFrame:
    """Per routing design and concurrency at one k: ρ and the effective experts read back, the
    plain and speculative unions and steps, and the measured c(k, C) (one number per cell of the
    table: replicates pooled by median)."""
    df = design_costs(record)
    df = df[df[COLUMNS.k] == k].rename(columns={"c": "measured_c"})
    keep = ["routing", "concurrency", "rho_4", "effective_experts", "plain_union", "spec_union"]
    keep += ["step_ms_plain", "spec_step_ms", "measured_c"]
    return df[[c for c in keep if c in df]].rename(columns={"step_ms_plain": "plain_step_ms"})


def c_table(record: Mapping[str, Any]) -> pd.DataFrame:
    """c(k, C) per k and concurrency on the weights as loaded, main grid: the median speculative
    cell over the median plain cell, and its band, the lowest and highest c any speculative cell
    gives against any plain cell there (the replicates: a k's τ values, plain's blocks)."""
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


def _as_loaded_steps(record: Mapping[str, Any], graphs: str, runner: str | None) -> pd.DataFrame:
    """Median as-loaded step time per (k, C) of one graph mode and runner."""
    df = speedup.lab_rows(record, graphs, runner)
    df = df[df.routing == AS_LOADED]
    return df.groupby([COLUMNS.k, "concurrency"]).step_ms.median()


def graph_check(record: Mapping[str, Any]) -> pd.DataFrame:
    """The graph check: per (k, C) both graph modes measured, the step time of each, their ratio
    (other / main), and c(k, C) in each (empty for a record without the check)."""
    graphs, runner = speedup.lab_mode(record)
    others = {r.get("graphs") for r in record["rows"]} - {graphs, None}
    if not others:
        return pd.DataFrame()
    other = sorted(others)[0]
    main = _as_loaded_steps(record, graphs, runner)
    alt = _as_loaded_steps(record, other, runner)
    rows = []
    for (k, conc), step in alt.items():
        if (k, conc) not in main or (0, conc) not in main or (0, conc) not in alt:
            continue
        rows.append(
            {
                COLUMNS.k: int(k),
                "concurrency": int(conc),
                f"{graphs}_ms": float(main[(k, conc)]),
                f"{other}_ms": float(step),
                "ratio": float(step / main[(k, conc)]),
                f"c_{graphs}": float(main[(k, conc)] / main[(0, conc)]) if k else 1.0,
                f"c_{other}": float(step / alt[(0, conc)]) if k else 1.0,
            }
        )
    return pd.DataFrame(rows)


def runner_check(record: Mapping[str, Any]) -> pd.DataFrame:
    """The runner check: per (k, C) the V1 runner measured (PIECEWISE graphs; k > 0 under a
    k-by-batch schedule), its step beside the main grid's, their ratio, and c_v1 = the V1 step over
    the main grid's plain step (what a schedule's k costs against plain decoding as deployed)."""
    graphs, runner = speedup.lab_mode(record)
    v1 = [r for r in record["rows"] if r.get("runner") == "V1" and runner != "V1"]
    if not v1:
        return pd.DataFrame()
    main = _as_loaded_steps(record, graphs, runner)
    alt = _as_loaded_steps(record, v1[0]["graphs"], "V1")
    rows = []
    for (k, conc), step in alt.items():
        if (k, conc) not in main or (0, conc) not in main:
            continue
        rows.append(
            {
                COLUMNS.k: int(k),
                "concurrency": int(conc),
                "main_ms": float(main[(k, conc)]),
                "v1_ms": float(step),
                "ratio": float(step / main[(k, conc)]),
                "c_main": float(main[(k, conc)] / main[(0, conc)]),
                "c_v1": float(step / main[(0, conc)]),
            }
        )
    return pd.DataFrame(rows)


def served_mix(record: Mapping[str, Any]) -> pd.DataFrame:
    """The served-mix cells: per k, output tokens/s with prefills mixed in, τ, the speed-up over
    plain's served mix, c_served = τ / speed-up, and the lockstep c(k, C) at the same C beside it
    (empty for a record without them)."""
    try:
        df = speedup.lab_rows(record, cell="served mix")
    except KeyError:
        return pd.DataFrame()
    if df.empty or not (df[COLUMNS.k] == 0).any():
        return pd.DataFrame()
    plain = df[df[COLUMNS.k] == 0].iloc[0]
    lockstep = c_table(record).set_index([COLUMNS.k, "concurrency"])
    rows = []
    for r in df[df[COLUMNS.k] > 0].itertuples():
        k, conc = getattr(r, COLUMNS.k), r.concurrency
        gain = r.tok_s / plain.tok_s
        rows.append(
            {
                COLUMNS.k: int(k),
                "concurrency": int(conc),
                "requests": int(r.requests),
                "tau": float(r.tau),
                "tok_s": float(r.tok_s),
                "plain_tok_s": float(plain.tok_s),
                "speedup": float(gain),
                "c_served": float(r.tau / gain),
                "c_lockstep": float(lockstep.c.get((k, conc), float("nan"))),
                "tpot_ms": float(r.tpot_ms_median),
                "plain_tpot_ms": float(plain.tpot_ms_median),
            }
        )
    return pd.DataFrame(rows)


def one_prompt(record: Mapping[str, Any]) -> pd.DataFrame:
    """The one-prompt cells: per k, C copies of one prompt beside C distinct prompts at the same C
    (as loaded): their step times and the unions they read (empty for a record without them)."""
    df = speedup.lab_rows(record, cell="one prompt")
    if df.empty:
        return pd.DataFrame()
    distinct = cells(record)
    distinct = distinct[distinct.routing == AS_LOADED]
    rows = []
    for r in df.itertuples():
        k, conc = getattr(r, COLUMNS.k), r.concurrency
        same = distinct[(distinct[COLUMNS.k] == k) & (distinct.concurrency == conc)]
        n = int(k) + 1
        rows.append(
            {
                COLUMNS.k: int(k),
                "concurrency": int(conc),
                "copies_step_ms": float(r.step_ms),
                "distinct_step_ms": float(same.step_ms.median()),
                "copies_union": float(getattr(r, f"batch_union_{n}", float("nan"))),
                "distinct_union": float(same.union.median()),
            }
        )
    return pd.DataFrame(rows)


def union_effect(record: Mapping[str, Any], k: int) -> pd.DataFrame:
    """Per concurrency, at k: the step times the routing designs gave (each design's replicates
    at their median), the expert unions they read, and the spread of the as-loaded replicates;
    `separate` where the designs' step times spread wider than the replicates, so the union read
    moved the step there (a record without designs gives an empty table)."""
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


def union_lines(effect: pd.DataFrame, k: int) -> list[str]:
    """union_effect as printed lines: per concurrency, the designs' step times and unions beside
    the replicates' spread, and whether the union moved the step there."""
    if effect.empty:
        return ["this record has no routing designs: it cannot say what the union does"]
    seen = {
        True: "the union moved the step",
        False: "within the replicates: not seen here",
        None: "no replicates to compare",
    }
    return [
        f"k={k}, C={r.concurrency}: the designs' steps {r.step_ms_low:.2f}-{r.step_ms_high:.2f} ms "
        f"for unions {r.union_low:.1f}-{r.union_high:.1f}; replicates spread "
        f"{r.replicate_spread_ms:.2f} ms: {seen[r.separate]}"
        for r in effect.itertuples()
    ]


def placement(read_rho: pd.Series, rho: float) -> str:
    """Where a router of correlation `rho` sits among designs by the ρ each read back: between
    the nearest below and above it, or past the last one."""
    below, above = read_rho[read_rho <= rho], read_rho[read_rho > rho]
    if below.empty:
        return (
            f"rho {rho:.2f} is below every design's (lowest: {above.idxmin()}, {above.min():.2f})"
        )
    if above.empty:
        return (
            f"rho {rho:.2f} is above every design's (highest: {below.idxmax()}, {below.max():.2f})"
        )
    return (
        f"rho {rho:.2f} lies between {below.idxmax()} (read back {below.max():.2f}) and "
        f"{above.idxmin()} ({above.min():.2f}) among the designs' read-back rho at 4 positions"
    )


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


def recorded_on(record: Mapping[str, Any]) -> str:
    """The date in a record's 'what' field (YYYY-MM-DD), or 'undated'."""
    found = re.search(r"\d{4}-\d{2}-\d{2}", record.get("what", ""))
    return found.group(0) if found else "undated"
