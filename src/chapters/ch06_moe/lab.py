"""The MoE lab's record read (tools/gpu_moe_lab.py): c(k, C), bandwidth, designs, checks."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from math import nan
from pathlib import Path
from typing import Any

import pandas as pd

from chapters.ch06_moe import moe
from helpers.analytics import speedup
from helpers.common.configs import read_config, read_json
from helpers.common.paths import REPO_ROOT
from helpers.common.tables import COLUMNS

__all__ = [
    "load_lab",
    "lab_shape",
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

#: Routings a trained router could be (the real router reads ρ ≈ 0.48); independent and ρ 0.75
#: are the bounds, not candidates.
REALISTIC: tuple[str, ...] = (speedup.AS_LOADED, "rho 0.25", "rho 0.5", "rho tiny", "zipf 1")
_K = COLUMNS.k


def load_lab(path: Path = speedup.LAB_FILE) -> dict[str, Any]:
    """A lab record with its provenance ('what', 'how', 'gpu', 'rows')."""
    record = read_json(path)
    if missing := {"what", "how", "gpu", "rows"} - set(record):
        raise ValueError(f"{path} lacks provenance ({sorted(missing)}): keep it with the rows")
    return record


def lab_shape(record: Mapping[str, Any]) -> tuple[moe.MoeShape, int]:
    """The verifier shape the lab ran (its drafter's lm_head in) and a step's mean context."""
    drafter, s = record.get("drafter_config"), record["settings"]
    drafter = read_config(REPO_ROOT / record["drafter"]) if drafter is None else drafter
    shape = moe.shape_from_folder(REPO_ROOT / record["verifier"], drafter)
    return shape, int(s["prompt_tokens"] + s["new_tokens"] // 2)  # prompt + half the answer


def cells(record: Mapping[str, Any]) -> pd.DataFrame:
    """The lockstep cells of one graph mode and runner with each step's union, bytes, bandwidth."""
    shape, context = lab_shape(record)
    df = speedup.lab_rows(record)
    df["positions"] = df[_K] + 1
    read = [r.get(f"batch_union_{int(r.positions)}") for _, r in df.iterrows()]
    read = pd.Series(read, df.index, float)  # the union read back, else independent routing's
    sizes = zip(df.concurrency, df.positions)
    expected = [moe.independent_union(shape.experts, shape.active, c * n) for c, n in sizes]
    df["union"] = read.fillna(pd.Series(expected, df.index))
    df["union_source"] = read.notna().map({True: "read back", False: "independent (expected)"})
    df["gb_per_step"] = [
        moe.step_bytes(shape, c, u, context, drafter_steps=k) / 1e9
        for c, u, k in zip(df.concurrency, df.union, df[_K])
    ]
    df["achieved_tb_s"] = df.gb_per_step / df.step_ms  # GB/ms = TB/s
    df["tokens"] = df.concurrency * df.positions
    return df


def _as_loaded(record: Mapping[str, Any]) -> pd.DataFrame:
    """The main grid's cells on the weights as loaded."""
    df = cells(record)
    return df[df.routing == speedup.AS_LOADED]


def plain_bandwidth(record: Mapping[str, Any]) -> pd.DataFrame:
    """Plain steps per concurrency (as loaded): union, bytes, bandwidth and its share of peak."""
    df = _as_loaded(record).loc[lambda d: d[_K] == 0]
    keep = ["step_ms", "union", "gb_per_step", "achieved_tb_s"]
    out = df.groupby("concurrency")[keep].median().reset_index()
    out["union_source"] = df.groupby("concurrency").union_source.first().to_numpy()
    out["peak_tb_s"] = speedup.peak_tb_s(record["gpu"]) or float("nan")
    out["share_of_peak"] = out.achieved_tb_s / out.peak_tb_s
    return out


def _medians(df: pd.DataFrame, by: list[str], extra: Sequence[str] = ()) -> pd.DataFrame:
    """Per group: the median step time and union of its cells, how many, and `extra` medians."""
    agg = {"step_ms": ("step_ms", "median"), "union": ("union", "median")}
    agg |= {"cells": ("step_ms", "size")} | {c: (c, "median") for c in extra}
    return df.groupby(by).agg(**agg).reset_index()


def routing_table(record: Mapping[str, Any], k: int | None = None) -> pd.DataFrame:
    """Per routing design, C (and k): ρ, effective experts, unions, steps and measured c."""
    df = cells(record)
    read = ["rho_4", "effective_experts"] if "rho_4" in df else []  # a plain step's routing
    plain = _medians(df[df[_K] == 0], ["routing", "concurrency"], read)
    spec = _medians(df[df[_K] > 0], [_K, "routing", "concurrency"])
    out = spec.merge(plain, on=["routing", "concurrency"], suffixes=("", "_plain"))
    out["measured_c"] = out.step_ms / out.step_ms_plain
    names = {"step_ms": "spec_step_ms", "union": "spec_union", "union_plain": "plain_union"}
    out = out.rename(columns=names | {"step_ms_plain": "plain_step_ms"})
    if k is None:
        return out
    keep = ["routing", "concurrency", "rho_4", "effective_experts", "plain_union", "spec_union"]
    keep += ["plain_step_ms", "spec_step_ms", "measured_c"]
    return out[out[_K] == k][[c for c in keep if c in out]]


def c_table(record: Mapping[str, Any]) -> pd.DataFrame:
    """c(k, C) as loaded: median spec cell over median plain cell, band from the replicates."""
    df = _as_loaded(record)
    plain = df[df[_K] == 0].groupby("concurrency").step_ms.agg(["min", "max", "median"])
    rows = []
    for (k, conc), grp in df[df[_K] > 0].groupby([_K, "concurrency"]):
        p, step = plain.loc[conc], grp.step_ms
        c = (step.median() / p["median"], step.min() / p["max"], step.max() / p["min"])
        rows.append((int(k), int(conc), *map(float, c), len(grp)))
    return pd.DataFrame(rows, columns=[_K, "concurrency", "c", "c_low", "c_high", "cells"])


def _versus(
    record: Mapping[str, Any], graphs: str, runner: str | None, a: str, b: str, own_plain: bool
) -> pd.DataFrame:
    """Per (k, C) of another graph mode or runner: both steps, their ratio and c in each."""
    main, alt = (  # the median as-loaded step per (k, C) of the main grid, of the other
        speedup.lab_rows(record, g, r)
        .loc[lambda df: df.routing == speedup.AS_LOADED]
        .groupby([_K, "concurrency"])
        .step_ms.median()
        for g, r in (speedup.lab_mode(record), (graphs, runner))
    )
    plain = alt if own_plain else main  # c of the other: against its own plain step, or main's
    rows = [
        {_K: int(k), "concurrency": int(conc), f"{a}_ms": float(main[(k, conc)])}
        | {f"{b}_ms": float(step), "ratio": float(step / main[(k, conc)])}
        | {f"c_{a}": float(main[(k, conc)] / main[(0, conc)])}
        | {f"c_{b}": float(step / plain[(0, conc)])}
        for (k, conc), step in alt.items()
        if (k, conc) in main and (0, conc) in main and (0, conc) in plain
    ]
    return pd.DataFrame(rows)


def graph_check(record: Mapping[str, Any]) -> pd.DataFrame:
    """Per (k, C): the main and the other graph mode's steps, their ratio and c in each."""
    graphs, runner = speedup.lab_mode(record)
    others = {r.get("graphs") for r in record["rows"]} - {graphs, None}
    if not others:
        return pd.DataFrame()
    return _versus(record, min(others), runner, graphs, min(others), own_plain=True)


def runner_check(record: Mapping[str, Any]) -> pd.DataFrame:
    """Per (k, C) on the V1 runner: its step beside the main grid's, and c_v1 over main's plain."""
    runner = speedup.lab_mode(record)[1]
    v1 = [r for r in record["rows"] if r.get("runner") == "V1" and runner != "V1"]
    if not v1:
        return pd.DataFrame()
    return _versus(record, v1[0]["graphs"], "V1", "main", "v1", own_plain=False)


def served_mix(record: Mapping[str, Any]) -> pd.DataFrame:
    """Served-mix cells per k: tok/s, τ, speed-up, c_served = τ / speed-up beside lockstep c."""
    df = speedup.lab_rows(record, cell="served mix")
    if df.empty or not (df[_K] == 0).any():
        return pd.DataFrame()
    plain = df[df[_K] == 0].iloc[0]
    lockstep = c_table(record).set_index([_K, "concurrency"]).c
    rows = []
    for r in df[df[_K] > 0].itertuples():
        k, conc, gain = getattr(r, _K), r.concurrency, r.tok_s / plain.tok_s
        rows.append(
            {_K: int(k), "concurrency": int(conc), "requests": int(r.requests), "tau": float(r.tau)}
            | {"tok_s": float(r.tok_s), "plain_tok_s": float(plain.tok_s), "speedup": float(gain)}
            | {"c_served": float(r.tau / gain), "c_lockstep": float(lockstep.get((k, conc), nan))}
            | {"tpot_ms": float(r.tpot_ms_median), "plain_tpot_ms": float(plain.tpot_ms_median)}
        )
    return pd.DataFrame(rows)


def one_prompt(record: Mapping[str, Any]) -> pd.DataFrame:
    """Per k: C copies of one prompt beside C distinct prompts, their steps and unions."""
    df = speedup.lab_rows(record, cell="one prompt")
    if df.empty:
        return pd.DataFrame()
    distinct = _as_loaded(record)
    rows = []
    for r in df.itertuples():
        k, conc = getattr(r, _K), r.concurrency
        same = distinct[(distinct[_K] == k) & (distinct.concurrency == conc)]
        copies = float(getattr(r, f"batch_union_{int(k) + 1}", float("nan")))
        rows.append(
            {_K: int(k), "concurrency": int(conc), "copies_step_ms": float(r.step_ms)}
            | {"distinct_step_ms": float(same.step_ms.median()), "copies_union": copies}
            | {"distinct_union": float(same.union.median())}
        )
    return pd.DataFrame(rows)


def union_effect(record: Mapping[str, Any], k: int) -> pd.DataFrame:
    """Per C at k: the designs' step and union range beside the as-loaded replicates' spread."""
    spec = cells(record).loc[lambda d: d[_K] == k]
    if spec.routing.nunique() < 2:
        return pd.DataFrame()
    designs = spec.groupby(["concurrency", "routing"])[["step_ms", "union"]].median()
    low, high = designs.groupby("concurrency").min(), designs.groupby("concurrency").max()
    loaded = spec[spec.routing == speedup.AS_LOADED].groupby("concurrency").step_ms
    out = pd.DataFrame({"step_ms_low": low.step_ms, "step_ms_high": high.step_ms})
    out["union_low"], out["union_high"] = low.union, high.union
    out["replicate_spread_ms"] = (loaded.max() - loaded.min()).where(loaded.size() > 1)
    span = zip(out.step_ms_high - out.step_ms_low, out.replicate_spread_ms)
    out["separate"] = [bool(s > r) if r == r else None for s, r in span]
    return out.reset_index()


def union_lines(effect: pd.DataFrame, k: int) -> list[str]:
    """union_effect as printed lines, with whether the union moved the step."""
    if effect.empty:
        return ["this record has no routing designs: it cannot say what the union does"]
    seen = {True: "the union moved the step", False: "within the replicates: not seen here"}
    return [
        f"k={k}, C={r.concurrency}: the designs' steps {r.step_ms_low:.2f}-{r.step_ms_high:.2f} ms "
        f"for unions {r.union_low:.1f}-{r.union_high:.1f}; replicates spread "
        f"{r.replicate_spread_ms:.2f} ms: {seen.get(r.separate, 'no replicates to compare')}"
        for r in effect.itertuples()
    ]


def placement(read_rho: pd.Series, rho: float) -> str:
    """Where a router of correlation `rho` sits among the designs' read-back ρ."""
    below, above, at = read_rho[read_rho <= rho], read_rho[read_rho > rho], f"rho {rho:.2f}"
    if below.empty:
        return f"{at} is below every design's (lowest: {above.idxmin()}, {above.min():.2f})"
    if above.empty:
        return f"{at} is above every design's (highest: {below.idxmax()}, {below.max():.2f})"
    return (
        f"{at} lies between {below.idxmax()} (read back {below.max():.2f}) and "
        f"{above.idxmin()} ({above.min():.2f}) among the designs' read-back rho at 4 positions"
    )


def shape_verdict(table: pd.DataFrame, x: str, est: str, low: str, high: str) -> str:
    """How `est` moves along `x` where the bands say it: rises, falls, or within its band."""
    t = table.sort_values(x)
    lo, hi = t[low].tolist(), t[high].tolist()
    steps = [  # each step up, down or within the band, by the neighbours' bands
        "up" if b_lo > a_hi else "down" if b_hi < a_lo else "band"
        for a_lo, a_hi, b_lo, b_hi in zip(lo, hi, lo[1:], hi[1:])
    ]
    moves = [s for s in steps if s != "band"]
    if not moves:
        return "stays within its band"
    if len(moves) < len(steps):
        return "this run cannot tell (" + ", ".join(steps).replace("band", "within the band") + ")"
    turns = [m for i, m in enumerate(moves) if i == 0 or m != moves[i - 1]]
    return " then ".join({"up": "rises", "down": "falls"}[m] for m in turns)


def model_c(
    step_ms: Callable[..., float], shape: moe.MoeShape, k: int, conc: int, rho: float, context: int
) -> float:
    """c(k, C) a step model t(k, C, GB) predicts for routing of within-sequence correlation rho."""
    plain = moe.union_with_correlation(shape.experts, shape.active, conc, 1, rho)
    spec = moe.union_with_correlation(shape.experts, shape.active, conc, k + 1, rho)
    gb_plain = moe.step_bytes(shape, conc, plain, context) / 1e9
    gb_spec = moe.step_bytes(shape, conc, spec, context, drafter_steps=k) / 1e9
    return step_ms(k, conc, gb_spec) / step_ms(0, conc, gb_plain)


def recorded_on(record: Mapping[str, Any]) -> str:
    """The date in a record's 'what' field (YYYY-MM-DD), or 'undated'."""
    found = re.search(r"\d{4}-\d{2}-\d{2}", record.get("what", ""))
    return found.group(0) if found else "undated"
