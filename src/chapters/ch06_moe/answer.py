"""Does EAGLE-3 pay for the real pair? Published τ, the lab's c, the outside check, the answer."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from chapters.ch06_moe import lab, moe, schedule
from helpers.analytics import calibration
from helpers.common import vllm_names
from helpers.common.configs import read_json
from helpers.common.counters import Meter
from helpers.common.paths import DATA_DIR
from helpers.common.prompts import as_messages
from helpers.common.tables import COLUMNS
from helpers.engine import lifecycle, runs

__all__ = [
    "published_taus",
    "with_derived",
    "real_router",
    "c_bands",
    "public_runs",
    "outside_check",
    "k0_cost",
    "caveats",
    "measure",
    "summary_lines",
    "outside_lines",
    "literature",
]

_PUBLISHED = DATA_DIR / "published"
#: What only this chapter reads (published records too), in its own data/.
_OWN = Path(__file__).parent / "data"
#: The profiles' verifier release (Qwen3-30B-A3B-Instruct-2507): base-model heads are another's.
_INSTRUCT = "Instruct-2507"
_GEOMETRIC = "derived: one acceptance rate α for every position, fitted to τ(3)"
_RATIO = "derived: τ(k) − 1 = r · (τ(3) − 1), r measured on Instruct-2507 sources"
_K = COLUMNS.k
_RELEASE = r"-(Instruct|Thinking|Base)(-\d+)?$|-FP8$"  # a verifier's release in its name


def published_taus(release: str = _INSTRUCT) -> pd.DataFrame:
    """τ(k) of every published chain on one release: a row per source, dataset and k."""
    rows = []
    for r in calibration.published_taus():
        architecture = re.sub(_RELEASE, "", r.verifier.split("/")[-1])
        if (architecture, r.drafting, r.release) != ("Qwen3-30B-A3B", "chain", release):
            continue
        conditions = f"{r.drafter}; {r.engine}; batch {r.batch}; T {r.temperature}; {r.date}"
        subsets, how = r.tau_by_subset or {r.dataset: r.tau}, "measured"
        found = {(name, r.k): tau for name, tau in subsets.items()}
        if r.per_position:  # τ at every k up to the record's
            found = {(r.dataset, k): r.tau_at(k) for k in range(1, len(r.per_position) + 1)}
            how = "per-position rates"
        source = re.sub(r"-k\d+$", "", r.id)  # one study's records per k
        rows += [
            {"source": source, "dataset": dataset, _K: k, "tau": float(tau), "how": how}
            | {"conditions": conditions}
            for (dataset, k), tau in found.items()
        ]
    return pd.DataFrame(rows)


def _geometric_tau(tau3: float, k: int) -> float:
    """τ(k) with one acceptance rate α for every draft, α fitted to τ(3)."""
    # 1 + α + α² + α³ = τ(3) has one real root: the cubic rises everywhere
    alpha = next(r.real for r in np.roots([1, 1, 1, 1 - tau3]) if abs(r.imag) < 1e-9)
    return sum(alpha**i for i in range(k + 1))


def with_derived(taus: pd.DataFrame, ks: Sequence[int] = (1, 3, 5)) -> pd.DataFrame:
    """The published τ at `ks`, plus τ(k) derived from τ(3) by one α and by the measured ratio."""
    wide = taus.pivot_table(index=["source", "dataset"], columns=_K, values="tau")
    both = {int(k): wide[[3, k]].dropna() for k in wide.columns if k != 3 and 3 in wide}
    # per k measured beside τ(3): the median (τ(k) − 1) / (τ(3) − 1) over those pairs, how many
    ratios = {k: (((b[k] - 1) / (b[3] - 1)).median(), len(b)) for k, b in both.items() if len(b)}
    rows = []
    for (source, dataset), grp in taus.groupby(["source", "dataset"], sort=False):
        at, conditions = grp.set_index(_K).tau, grp.conditions.iloc[0]
        for k in [k for k in ks if 3 in at and k not in at]:
            base = {"source": source, "dataset": dataset, _K: k, "conditions": conditions}
            rows.append(base | {"tau": _geometric_tau(at[3], k), "how": _GEOMETRIC})
            if k in ratios:
                r, n = ratios[k]
                tau = 1 + r * (at[3] - 1)
                rows.append(base | {"tau": tau, "how": f"{_RATIO} (r = {r:.3f}, {n} pair(s))"})
    return pd.concat([taus[taus[_K].isin(ks)], pd.DataFrame(rows)], ignore_index=True)


def real_router(path: Path = _PUBLISHED / "real-router-trace.json") -> dict[str, Any]:
    """The real Instruct-2507 router's union over 4-token windows (a public trace) and its ρ."""
    trace = read_json(path)
    union = float(trace["union_size"]["mean"])
    n, experts, active = trace["window_size"], trace["num_experts"], trace["top_k"]
    return trace | {"mean_union": union, "rho": moe.correlation(union, experts, active, n)}


def c_bands(record: Mapping[str, Any], designs: Sequence[str] = lab.REALISTIC) -> pd.DataFrame:
    """Per (k, C): c as the median over the realistic designs, banded by them and the graph mode."""
    costs = lab.routing_table(record)
    costs = costs[costs.routing.isin(designs)]
    graphs = lab.graph_check(record)
    alt = {}
    if len(graphs):
        main = f"c_{record['settings']['graphs']}"
        other = [c for c in graphs if c.startswith("c_") and c != main][0]
        alt = {(int(k), int(c)): float(v) for k, c, v in graphs[[_K, "concurrency", other]].values}
    rows = []
    for (k, conc), grp in costs.groupby([_K, "concurrency"]):
        values = grp.measured_c.tolist()
        graph = alt.get((int(k), int(conc)))
        ends = values + ([graph] if graph is not None and k else [])
        band = f"{len(values)} routing designs"
        band += " and the other graph mode" if graph is not None else ""
        rows.append(
            {_K: int(k), "concurrency": int(conc), "c": float(pd.Series(values).median())}
            | {"c_low": float(min(ends)), "c_high": float(max(ends)), "designs": len(values)}
            | {"graph_mode": graph is not None, "band_source": band}
        )
    return pd.DataFrame(rows)


def public_runs(path: Path = _PUBLISHED / "qwen3-30b-a3b-eagle3.json") -> pd.DataFrame:
    """Every published Qwen3-30B-A3B + EAGLE-3 run, with its speed-up (NaN without both rates)."""
    runs = pd.DataFrame(read_json(path)["runs"])
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


def outside_check(runs: pd.DataFrame, bands: pd.DataFrame, tolerance: float = 0.0) -> pd.DataFrame:
    """Each public run beside its predicted band (widened by `tolerance`) at the nearest C."""
    ks = sorted(int(k) for k in bands[_K].unique())
    levels = sorted(int(c) for c in bands.concurrency.unique())
    out = []
    for _, run in runs.iterrows():
        row = {"id": run["id"], "batch": run.batch, "k": run.k, "tau": run.tau}
        row |= {"measured": run.speedup, "hardware": run.hardware, "engine": run.engine}
        reason = _why_not(run, ks)
        keys = ("at_concurrency", "predicted", "predicted_low", "predicted_high", "covered")
        row |= dict.fromkeys(keys)
        if reason is None:  # the measured concurrency nearest its batch, in log scale
            conc = min(levels, key=lambda c: abs(math.log(c) - math.log(float(run.batch))))
            band = bands[(bands[_K] == int(run.k)) & (bands.concurrency == conc)].iloc[0]
            low = run.tau / band.c_high * (1 - tolerance)
            high = run.tau / band.c_low * (1 + tolerance)
            row |= {"at_concurrency": conc, "predicted": run.tau / band.c, "predicted_low": low}
            row |= {"predicted_high": high, "covered": bool(low <= run.speedup <= high)}
        out.append(row | {"not_comparable": reason})
    return pd.DataFrame(out)


def k0_cost(concurrency: int, path: Path = _OWN / "dynamic-sd-k0.json") -> float:
    """A schedule's k = 0 step in plain steps (1 + its V1 TPOT tax), log-interpolated in C."""
    points = sorted((p["concurrency"], p["tax"]) for p in read_json(path)["points"])
    (c0, t0), (c1, t1) = points[0], points[-1]
    x = min(max(concurrency, c0), c1)
    share = (math.log(x) - math.log(c0)) / (math.log(c1) - math.log(c0))
    return 1.0 + t0 + share * (t1 - t0)


def caveats(record: Mapping[str, Any], taus: pd.DataFrame, verifier: str) -> list[str]:
    """Everything that separates this prediction from a measurement of the real pair."""
    sources, settings = sorted(set(taus.source)), record["settings"]
    return [
        f"predicted, not measured: the real pair has not run here ({verifier})",
        f"τ from {len(sources)} published source(s) on {verifier.split('/')[-1]} "
        f"({', '.join(sources)}): other engines, datasets and temperatures than yours; the band "
        "over heads and datasets is no interval",
        f"c from random weights on the 30B-A3B shape ({record['gpu']}, vLLM "
        f"{record.get('vllm', '?')}, {settings.get('graphs', '?')} graphs, "
        f"{settings.get('prompt_tokens')}-token prompts decoding in lockstep): a trained router "
        "reads another expert union (the band spans the realistic designs)",
        *schedule.quirk_lines(),
    ]


def measure(
    profile: Any, ks: Sequence[int], levels: Sequence[int], prompts: Sequence[str], tokens: int
) -> pd.DataFrame:
    """On the profile's own pair, per k and C: τ, per-position rates, decode speed-up and c."""
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
                made = sum(len(o.outputs[0].token_ids) - 1 for o in outs)  # first token: prefill
                seconds = sum(o.metrics.last_token_ts - o.metrics.first_token_ts for o in outs)
                out[c] = (made / seconds, meter.stats)
        return out

    plain, rows = decode(0), []
    for k in ks:
        for c, (rate, stats) in decode(k).items():
            tau, gain = stats[vllm_names.STATS.tau], rate / plain[c][0]
            per = [round(x, 3) for x in stats[vllm_names.STATS.per_position_rates]]
            rows.append(
                {"concurrency": c, _K: k, "tau": tau, "per_position": per}
                | {"speedup": gain, "c": tau / gain}
            )
    return pd.DataFrame(rows)


def summary_lines(
    prediction: pd.DataFrame, choice: Mapping[int, Mapping[str, Any]], verifier: str, drafter: str
) -> list[str]:
    """The answer as lines: per C the k chosen, its band and rivals; then the config to paste."""
    out, by_k = [], {}
    for conc, ch in choice.items():
        k = ch["k"]
        by_k.setdefault(k, []).append(conc)
        row = prediction[(prediction.concurrency == conc) & (prediction[_K] == k)].iloc[0]
        name = "plain (no drafter)" if k == 0 else f"k = {k}"
        line = f"C = {conc}: {name}, predicted {row.speedup:.2f}x [{row.speedup_low:.2f}, "
        line += f"{row.speedup_high:.2f}]"
        rivals = ["plain" if r == 0 else f"k = {r}" for r in ch["cannot_tell"]]
        line += f"; cannot tell it from {', '.join(rivals)}" if rivals else "; its band is clear"
        out.append(line + " (PREDICTED, not measured)")
    for k, levels in by_k.items():
        at = f"at C = {', '.join(map(str, levels))}"
        said = json.dumps(lifecycle.speculative_config(drafter, k))
        serve = f"--speculative-config '{said}'" if k else "  (no --speculative-config)"
        llm = f", speculative_config={said}" if k else ""
        out += [f"{at}: vllm serve {verifier} {serve}", f'{at}: LLM(model="{verifier}"{llm})']
    return out


def outside_lines(check: pd.DataFrame) -> list[str]:
    """The outside check as lines: runs covered, each run's verdict, and why others are not."""
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
    return out + [f"  not comparable, {n} run(s): {why}" for why, n in reasons.items()]


def literature(path: Path = _OWN / "moe-speculation.json") -> pd.DataFrame:
    """One row per published number on MoE speculation, with its source, conditions and role."""
    return pd.DataFrame(read_json(path)["records"])
