"""Does EAGLE-3 pay for the real pair? The evidence notebook 06's answer is computed from, and the
lines it prints (section 7).

τ(k) of the real pair comes from published chains on the profile's verifier release
(`published_taus`; Instruct-2507 heads, base-model heads apart), per source and dataset; where a
source measured τ at one k only, `with_derived` adds τ at the others by two stated methods. c(k, C)
comes from the MoE lab's main grid (vLLM's deployed graph mode on the pinned vLLM) with a band over
the routing designs a trained router could be and over the graph mode (`c_bands`). The notebook's
cells turn both into the predicted speed-up and the static k to paste; `outside_check` sets that
prediction beside every public measurement of the model. `measure` times the real pair itself where
it runs (a GPU and the hub).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from chapters.ch06_moe import lab, moe
from helpers.common.paths import DATA_DIR
from helpers.common.tables import COLUMNS

__all__ = [
    "published_taus",
    "with_derived",
    "real_router",
    "c_bands",
    "public_runs",
    "outside_check",
    "k0_cost",
    "speculative_config",
    "unknown_config_keys",
    "caveats",
    "measure",
    "summary_lines",
    "outside_lines",
    "literature",
]

_TAU_FILE: Path = DATA_DIR / "published" / "real-pair-tau.json"
_K0_FILE: Path = DATA_DIR / "published" / "dynamic-sd-k0.json"
_RUNS_FILE: Path = DATA_DIR / "published" / "qwen3-30b-a3b-eagle3.json"
_TRACE_FILE: Path = DATA_DIR / "published" / "real-router-trace.json"
_LITERATURE_FILE: Path = DATA_DIR / "published" / "moe-speculation.json"
#: The release of the profiles' verifier (Qwen/Qwen3-30B-A3B-Instruct-2507): the heads whose τ the
#: answer uses; base-model heads (Qwen/Qwen3-30B-A3B) are another model's.
_INSTRUCT = "Instruct-2507"
#: How a derived τ says where it comes from.
_GEOMETRIC = "derived: one acceptance rate α for every position, fitted to τ(3)"
_RATIO = "derived: τ(k) − 1 = r · (τ(3) − 1), r measured on Instruct-2507 sources"


def _architecture(name: str) -> str:
    """'Qwen/Qwen3-30B-A3B-Instruct-2507' -> 'Qwen3-30B-A3B' (organisation and release dropped)."""
    base = name.split("/")[-1]
    return re.sub(r"-(Instruct|Thinking|Base)(-\d+)?$|-FP8$", "", base)


def published_taus(
    release: str = _INSTRUCT, architecture: str = "Qwen3-30B-A3B", path: Path = _TAU_FILE
) -> pd.DataFrame:
    """τ(k) of every published chain on one release of a verifier architecture: one row per
    source, dataset and k (a per-position record gives τ at every k up to its own; a record per
    benchmark one row per benchmark), with the source's conditions (a tree's τ is left out: a
    chain of k drafts cannot reach it)."""
    rows = []
    for r in json.loads(path.read_text(encoding="utf-8"))["records"]:
        if _architecture(r["verifier"]) != architecture or r["drafting"] != "chain":
            continue
        if r.get("release") != release:
            continue
        conditions = (
            f"{r['drafter']}; {r['engine']}; batch {r.get('batch')}; T {r['temperature']}; "
            f"{r['date']}"
        )
        per, subsets = r.get("per_position"), r.get("tau_by_subset")
        if per:
            found = {(r["dataset"], k): 1 + sum(per[:k]) for k in range(1, len(per) + 1)}
            how = "per-position rates"
        elif subsets:
            found = {(name, r["k"]): tau for name, tau in subsets.items()}
            how = "measured"
        else:
            found = {(r["dataset"], r["k"]): r["tau"]}
            how = "measured"
        for (dataset, k), tau in found.items():
            rows.append(
                {
                    "source": re.sub(r"-k\d+$", "", r["id"]),  # one study's records per k
                    "dataset": dataset,
                    COLUMNS.k: k,
                    "tau": float(tau),
                    "how": how,
                    "conditions": conditions,
                }
            )
    return pd.DataFrame(rows)


def _geometric_tau(tau3: float, k: int) -> float:
    """τ(k) of a drafter whose every draft is accepted with one probability α, α fitted to τ(3)
    (1 + α + α² + α³ = τ(3), by bisection)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if 1 + mid + mid**2 + mid**3 < tau3 else (lo, mid)
    alpha = (lo + hi) / 2
    return sum(alpha**i for i in range(k + 1))


def _ratios(taus: pd.DataFrame) -> dict[int, tuple[float, int]]:
    """Per k: the median of (τ(k) − 1) / (τ(3) − 1) over the (source, dataset) pairs that measured
    both, and how many did."""
    wide = taus.pivot_table(index=["source", "dataset"], columns=COLUMNS.k, values="tau")
    out = {}
    for k in wide.columns:
        if k == 3 or 3 not in wide:
            continue
        both = wide[[3, k]].dropna()
        if len(both):
            out[int(k)] = (float(((both[k] - 1) / (both[3] - 1)).median()), len(both))
    return out


def with_derived(taus: pd.DataFrame, ks: Sequence[int] = (1, 3, 5)) -> pd.DataFrame:
    """The published τ at `ks`, plus for every (source, dataset) that measured τ(3) but not τ(k),
    τ(k) derived two ways: one acceptance rate α for every position (fitted to its τ(3)), and the
    ratio (τ(k) − 1) / (τ(3) − 1) measured on the sources that have both (where any has)."""
    ratios = _ratios(taus)
    have = taus[taus[COLUMNS.k].isin(ks)]
    rows = []
    for (source, dataset), grp in taus.groupby(["source", "dataset"], sort=False):
        at = grp.set_index(COLUMNS.k).tau
        if 3 not in at:
            continue
        for k in ks:
            if k in at:
                continue
            base = {"source": source, "dataset": dataset, COLUMNS.k: k}
            base["conditions"] = grp.conditions.iloc[0]
            rows.append(base | {"tau": _geometric_tau(at[3], k), "how": _GEOMETRIC})
            if k in ratios:
                r, n = ratios[k]
                tau = 1 + r * (at[3] - 1)
                rows.append(base | {"tau": tau, "how": f"{_RATIO} (r = {r:.3f}, {n} pair(s))"})
    return pd.concat([have, pd.DataFrame(rows)], ignore_index=True)


def real_router(path: Path = _TRACE_FILE) -> dict[str, Any]:
    """The real Instruct-2507 router's union over 4-token windows (a public trace) and the ρ it
    gives (`moe.correlation`), with the trace's provenance."""
    trace = json.loads(path.read_text(encoding="utf-8"))
    union = float(trace["union_size"]["mean"])
    n, experts, active = trace["window_size"], trace["num_experts"], trace["top_k"]
    return trace | {"mean_union": union, "rho": moe.correlation(union, experts, active, n)}


def c_bands(record: Mapping[str, Any], designs: Sequence[str] = lab.REALISTIC) -> pd.DataFrame:
    """Per (k, C): c as the median over the realistic routing designs the main grid measured, and
    its band: the lowest and highest c of those designs and, where the graph check measured it,
    of the other graph mode (which designs and whether the graph mode entered, per row)."""
    costs = lab.design_costs(record)
    costs = costs[costs.routing.isin(designs)]
    graphs = lab.graph_check(record)
    alt = {}
    if len(graphs):
        other = [
            c for c in graphs if c.startswith("c_") and c != f"c_{record['settings']['graphs']}"
        ]
        alt = {
            (int(r[COLUMNS.k]), int(r.concurrency)): float(r[other[0]])
            for _, r in graphs.iterrows()
        }
    rows = []
    for (k, conc), grp in costs.groupby([COLUMNS.k, "concurrency"]):
        values = grp.c.tolist()
        graph = alt.get((int(k), int(conc)))
        ends = values + ([graph] if graph is not None and k else [])
        rows.append(
            {
                COLUMNS.k: int(k),
                "concurrency": int(conc),
                "c": float(pd.Series(values).median()),
                "c_low": float(min(ends)),
                "c_high": float(max(ends)),
                "designs": len(values),
                "graph_mode": graph is not None,
                "band_source": f"{len(values)} routing designs"
                + (" and the other graph mode" if graph is not None else ""),
            }
        )
    return pd.DataFrame(rows)


def public_runs(path: Path = _RUNS_FILE) -> pd.DataFrame:
    """Every published run of Qwen3-30B-A3B with an EAGLE-3 drafter, with its conditions and its
    speed-up (spec over plain output tokens/s at the same batch; NaN without both)."""
    runs = pd.DataFrame(json.loads(path.read_text(encoding="utf-8"))["runs"])
    runs["speedup"] = runs.spec_tok_s / runs.plain_tok_s
    return runs


def _why_not(run: pd.Series, ks: Sequence[int]) -> str | None:
    """Why the lab's model cannot predict a run (None: it can)."""
    if run.drafting == "not stated" or pd.isna(run.batch) or pd.isna(run.tau):
        return "its batch, drafting or τ is not stated"
    if run.drafting != "chain":
        return f"{run.drafting} drafting (the lab measured chains)"
    if run.regime != "GPU-resident":
        return "experts offloaded to the CPU (a PCIe-bound step the lab did not measure)"
    if int(run.k) not in ks:
        return f"k = {int(run.k)} (the lab measured k = {', '.join(map(str, ks))})"
    return None


def _nearest(levels: Sequence[int], batch: float) -> int:
    """The measured concurrency nearest a batch size, in log scale."""
    return min(levels, key=lambda c: abs(math.log(c) - math.log(batch)))


def outside_check(runs: pd.DataFrame, bands: pd.DataFrame, tolerance: float = 0.0) -> pd.DataFrame:
    """Each public run beside the prediction for it: with the run's own τ and k, the band
    τ / c_high … τ / c_low at the measured concurrency nearest its batch, widened by `tolerance`
    on each side, and whether its measured speed-up lies inside (None where the lab's model cannot
    predict the run, with the reason)."""
    ks = sorted(int(k) for k in bands[COLUMNS.k].unique())
    levels = sorted(int(c) for c in bands.concurrency.unique())
    out = []
    for _, run in runs.iterrows():
        row = {"id": run["id"], "batch": run.batch, "k": run.k, "tau": run.tau}
        row |= {"measured": run.speedup, "hardware": run.hardware, "engine": run.engine}
        reason = _why_not(run, ks)
        if reason is None:
            conc = _nearest(levels, float(run.batch))
            band = bands[(bands[COLUMNS.k] == int(run.k)) & (bands.concurrency == conc)].iloc[0]
            low = run.tau / band.c_high * (1 - tolerance)
            high = run.tau / band.c_low * (1 + tolerance)
            row |= {"at_concurrency": conc, "predicted": run.tau / band.c}
            row |= {"predicted_low": low, "predicted_high": high}
            row["covered"] = bool(low <= run.speedup <= high)
        else:
            row |= {"at_concurrency": None, "predicted": None, "predicted_low": None}
            row |= {"predicted_high": None, "covered": None}
        out.append(row | {"not_comparable": reason})
    return pd.DataFrame(out)


def k0_cost(concurrency: int, path: Path = _K0_FILE) -> float:
    """The cost of a step of a k = 0 schedule entry in plain steps (1 + its measured TPOT tax, on
    vLLM's V1 runner), interpolated in log concurrency between the record's points and held outside
    them."""
    record = json.loads(path.read_text(encoding="utf-8"))
    points = sorted((p["concurrency"], p["tax"]) for p in record["points"])
    (c0, t0), (c1, t1) = points[0], points[-1]
    x = min(max(concurrency, c0), c1)
    share = (math.log(x) - math.log(c0)) / (math.log(c1) - math.log(c0))
    return 1.0 + t0 + share * (t1 - t0)


def speculative_config(drafter: str, k: int) -> dict[str, Any]:
    """The `--speculative-config` a user pastes for a static k on vLLM's default runner (empty for
    k = 0: serve without one)."""
    if k == 0:
        return {}
    return {"model": drafter, "method": "eagle3", "num_speculative_tokens": k}


def unknown_config_keys(config: Mapping[str, Any]) -> list[str]:
    """The keys of a `speculative_config` that the installed vLLM's `SpeculativeConfig` has no field
    for (empty: it takes the config as it is)."""
    from vllm.config import SpeculativeConfig

    return sorted(set(config) - set(SpeculativeConfig.__dataclass_fields__))


def _llm_call(verifier: str, drafter: str, k: int) -> str:
    """The `vllm.LLM(...)` call with that config (plain for k = 0)."""
    config = speculative_config(drafter, k)
    if not config:
        return f'LLM(model="{verifier}")'
    return f'LLM(model="{verifier}", speculative_config={json.dumps(config)})'


def caveats(record: Mapping[str, Any], taus: pd.DataFrame, verifier: str) -> list[str]:
    """Everything that separates this prediction from a measurement of the real pair."""
    from helpers.engine import compat

    sources = sorted(set(taus.source))
    settings = record["settings"]
    return [
        f"predicted, not measured: the real pair has not run here ({verifier})",
        f"τ from {len(sources)} published source(s) on {verifier.split('/')[-1]} "
        f"({', '.join(sources)}): other engines, datasets and temperatures than yours; the band "
        "over heads and datasets is no interval",
        f"c from random weights on the 30B-A3B shape ({record['gpu']}, vLLM "
        f"{record.get('vllm', '?')}, {settings.get('graphs', '?')} graphs, "
        f"{settings.get('prompt_tokens')}-token prompts decoding in lockstep): a trained router "
        "reads another expert union (the band spans the realistic designs)",
        compat.label_quirk("mrv2_schedule_capture"),
        compat.label_quirk("mrv2_schedule_ignored"),
        compat.label_quirk("v1_schedule_piecewise"),
    ]


def measure(
    profile: Any, ks: Sequence[int], levels: Sequence[int], prompts: Sequence[str], tokens: int
) -> pd.DataFrame:
    """On the profile's own pair: per k and concurrency C, τ and its per-position rates, and the
    decode speed-up over plain decoding: C distinct prompts at once (at least C must be given),
    forced length, each request's decode time from the engine's own per-request timestamps (first
    token to last: prefill left out), so c = τ / speed-up is a decode step's cost."""
    from helpers.common import vllm_names
    from helpers.common.counters import Meter
    from helpers.common.prompts import as_messages
    from helpers.engine import lifecycle, runs

    if len(prompts) < max(levels):
        raise ValueError(f"{len(prompts)} prompts for concurrency {max(levels)}: give at least C")
    params = runs.sampling(tokens, ignore_eos=True)

    def decode(k: int) -> dict[int, tuple[float, dict[str, Any]]]:
        out = {}
        with lifecycle.open_engine(**lifecycle.engine_kwargs(profile, k=k)) as llm:
            llm.chat([as_messages(prompts[0])], params, use_tqdm=False)  # warm-up
            for c in levels:
                with Meter(llm) as meter:
                    outs = llm.chat([as_messages(p) for p in prompts[:c]], params, use_tqdm=False)
                made = sum(len(o.outputs[0].token_ids) - 1 for o in outs)
                seconds = sum(o.metrics.last_token_ts - o.metrics.first_token_ts for o in outs)
                out[c] = (made / seconds, meter.stats)
        return out

    plain = decode(0)
    rows = []
    for k in ks:
        for c, (rate, stats) in decode(k).items():
            tau = stats[vllm_names.STATS.tau]
            gain = rate / plain[c][0]
            rows.append(
                {
                    "concurrency": c,
                    COLUMNS.k: k,
                    "tau": tau,
                    "per_position": [
                        round(x, 3) for x in stats[vllm_names.STATS.per_position_rates]
                    ],
                    "speedup": gain,
                    "c": tau / gain,
                }
            )
    return pd.DataFrame(rows)


def summary_lines(
    prediction: pd.DataFrame, choice: Mapping[int, Mapping[str, Any]], verifier: str, drafter: str
) -> list[str]:
    """The answer as printed lines: per concurrency the k chosen on the medians with its predicted
    speed-up and band, and the k (0 = plain) the bands cannot tell it from; then, per k chosen,
    the static `--speculative-config` and `LLM(...)` to paste, or plain serving."""
    out = []
    for conc, ch in choice.items():
        k = ch["k"]
        row = prediction[(prediction.concurrency == conc) & (prediction[COLUMNS.k] == k)].iloc[0]
        name = "plain (no drafter)" if k == 0 else f"k = {k}"
        line = (
            f"C = {conc}: {name}, predicted {row.speedup:.2f}x "
            f"[{row.speedup_low:.2f}, {row.speedup_high:.2f}]"
        )
        rivals = ["plain" if r == 0 else f"k = {r}" for r in ch["cannot_tell"]]
        line += f"; cannot tell it from {', '.join(rivals)}" if rivals else "; its band is clear"
        out.append(line + " (PREDICTED, not measured)")
    by_k: dict[int, list[int]] = {}
    for conc, ch in choice.items():
        by_k.setdefault(ch["k"], []).append(conc)
    for k, levels in by_k.items():
        at = f"at C = {', '.join(map(str, levels))}"
        config = speculative_config(drafter, k)
        if config:
            out.append(f"{at}: vllm serve {verifier} --speculative-config '{json.dumps(config)}'")
        else:
            out.append(f"{at}: vllm serve {verifier}   (no --speculative-config)")
        out.append(f"{at}: {_llm_call(verifier, drafter, k)}")
    return out


def outside_lines(check: pd.DataFrame) -> list[str]:
    """The outside check as printed lines: how many comparable public runs the prediction covered,
    each run with its verdict, and the runs it cannot predict with why."""
    comparable = check[check.not_comparable.isna()]
    covered = int(comparable.covered.sum())
    out = [f"the prediction covers {covered} of {len(comparable)} comparable public runs"]
    for r in comparable.itertuples():
        verdict = "inside" if r.covered else ("above" if r.measured > r.predicted_high else "below")
        out.append(
            f"  {r.id}: measured {r.measured:.2f}x at batch {int(r.batch)}, predicted "
            f"[{r.predicted_low:.2f}, {r.predicted_high:.2f}] at C = {int(r.at_concurrency)}: "
            f"{verdict}"
        )
    reasons = check[check.not_comparable.notna()].groupby("not_comparable").id.count()
    out += [f"  not comparable, {n} run(s): {why}" for why, n in reasons.items()]
    return out


def literature(path: Path = _LITERATURE_FILE) -> pd.DataFrame:
    """One row per published number: source, date, role (MoE method, reported speed-up, reported
    slowdown, other drafter), conditions, the number, and whether it was read in the source."""
    record = json.loads(Path(path).read_text(encoding="utf-8"))
    return pd.DataFrame(record["records"])
