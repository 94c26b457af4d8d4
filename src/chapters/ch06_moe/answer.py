"""Does EAGLE-3 pay for the real pair? Published acceptance of Qwen3-30B-A3B EAGLE-3 drafters ×
the H200 lab's c(k, C), with bands, labelled predicted (notebook 06, section 7).

τ(k) comes from the published chains of `data/published/real-pair-tau.json` for the profile's
architecture (a per-position record gives τ at every k up to its own); its band is the range over
sources. c(k, C) and its band come from `lab.c_table`; notebook 06 writes the speed-up τ / c
with its band, and vLLM PR #49163's choice of k, in its cells. A schedule's k = 0 entry is priced
from its one measurement (`data/published/dynamic-sd-k0.json`, vLLM issue #49548), interpolated in
log C. Where the profile runs (a GPU and the hub), `measure` times the real pair itself.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from chapters.ch06_moe import schedule
from helpers.common.paths import DATA_DIR
from helpers.common.tables import COLUMNS

__all__ = [
    "published_taus",
    "k0_cost",
    "speculative_config",
    "caveats",
    "measure",
    "summary_lines",
    "literature",
]

_TAU_FILE: Path = DATA_DIR / "published" / "real-pair-tau.json"
_K0_FILE: Path = DATA_DIR / "published" / "dynamic-sd-k0.json"


def _architecture(name: str) -> str:
    """'Qwen/Qwen3-30B-A3B-Instruct-2507' -> 'Qwen3-30B-A3B' (organisation and release dropped)."""
    base = name.split("/")[-1]
    return re.sub(r"-(Instruct|Thinking|Base)(-\d+)?$|-FP8$", "", base)


def published_taus(architecture: str, path: Path = _TAU_FILE) -> pd.DataFrame:
    """τ(k) of every published chain for a verifier architecture: one row per source and k, with
    the source's conditions (a tree's τ is left out: a chain of k drafts cannot reach it)."""
    rows = []
    for r in json.loads(path.read_text())["records"]:
        if _architecture(r["verifier"]) != architecture or r["drafting"] != "chain":
            continue
        per = r.get("per_position")
        taus = {k: 1 + sum(per[:k]) for k in range(1, len(per) + 1)} if per else {r["k"]: r["tau"]}
        for k, tau in taus.items():
            rows.append(
                {
                    "source": r["id"],
                    COLUMNS.k: k,
                    "tau": tau,
                    "from": "per-position rates" if per else "τ at its own k",
                    "conditions": f"{r['verifier']} + {r['drafter']}; {r['dataset']}; "
                    f"T {r['temperature']}; {r['engine']}; {r['date']}",
                }
            )
    return pd.DataFrame(rows)


def k0_cost(concurrency: int, path: Path = _K0_FILE) -> float:
    """The cost of a step of a k = 0 schedule entry in plain steps (1 + its measured TPOT tax),
    interpolated in log concurrency between the record's points and held outside them."""
    points = sorted((p["concurrency"], p["tax"]) for p in json.loads(path.read_text())["points"])
    (c0, t0), (c1, t1) = points[0], points[-1]
    x = min(max(concurrency, c0), c1)
    share = (math.log(x) - math.log(c0)) / (math.log(c1) - math.log(c0))
    return 1.0 + t0 + share * (t1 - t0)


def speculative_config(drafter: str, best: Mapping[int, int]) -> dict[str, Any]:
    """The `--speculative-config` a user pastes: the largest k as the static maximum, and the
    schedule's ranges (k = 0 kept: vLLM gives larger batches the last range's k); empty where no
    k pays at any concurrency (serve without `--speculative-config`)."""
    ranges = schedule.schedule_ranges(best)
    k_max = max(k for _, _, k in ranges)
    config: dict[str, Any] = {"model": drafter, "method": "eagle3"}
    if k_max == 0:
        return {}
    return config | {
        "num_speculative_tokens": k_max,
        "num_speculative_tokens_per_batch_size": [list(r) for r in ranges],
    }


def caveats(record: Mapping[str, Any], taus: pd.DataFrame, verifier: str) -> list[str]:
    """Everything that separates this prediction from a measurement of the real pair."""
    sources = sorted(set(taus.source))
    return [
        f"predicted, not measured: the real pair has not run here ({verifier})",
        f"τ from {len(sources)} published source(s) ({', '.join(sources)}): other drafters than "
        f"the profile's, on the {_architecture(verifier)} verifier as each source names it "
        "(not always the profile's release), on their own datasets and temperatures; the band "
        "over sources is no interval",
        f"c from random weights on the 30B-A3B shape ({record['gpu']}, vLLM "
        f"{record.get('vllm', '?')}, {record['settings'].get('graphs', '?')} CUDA graphs, "
        f"{record['settings'].get('prompt_tokens')}-token prompts): a trained router reads "
        "another expert union (notebook 06, section 3)",
        "k = 0 priced from one measurement of another model and GPU (vLLM #49548)",
        "data parallelism (data_parallel_size > 1) disables the schedule: vLLM falls back to the "
        "static num_speculative_tokens",
    ]


def measure(
    profile: Any, ks: Sequence[int], levels: Sequence[int], prompts: Sequence[str], tokens: int
) -> pd.DataFrame:
    """On the profile's own pair: per k and concurrency, τ and its per-position rates, tokens/s of
    the speculative and plain engines (C prompts at once, forced length), and c = τ·plain/spec."""
    from helpers.common import vllm_names
    from helpers.engine import lifecycle, runs

    params = runs.sampling(tokens, ignore_eos=True)

    def tok_s(k: int) -> dict[int, Any]:
        out = {}
        with lifecycle.open_engine(**lifecycle.engine_kwargs(profile, k=k)) as llm:
            runs.run_prompts(llm, list(prompts[:1]), params)  # warm-up
            for c in levels:
                out[c] = runs.run_prompts(
                    llm, [prompts[i % len(prompts)] for i in range(c)], params
                )
        return out

    plain = tok_s(0)
    rows = []
    for k in ks:
        for c, run in tok_s(k).items():
            stats, base = run.stats, plain[c]
            speedup = (run.output_tokens / run.seconds) / (base.output_tokens / base.seconds)
            rows.append(
                {
                    "concurrency": c,
                    COLUMNS.k: k,
                    "tau": stats[vllm_names.STATS.tau],
                    "per_position": [
                        round(x, 3) for x in stats[vllm_names.STATS.per_position_rates]
                    ],
                    "speedup": speedup,
                    "c": stats[vllm_names.STATS.tau] / speedup,
                }
            )
    return pd.DataFrame(rows)


def summary_lines(
    prediction: pd.DataFrame, best: Mapping[int, int], config: Mapping[str, Any]
) -> list[str]:
    """The answer as printed lines: per concurrency the best k and its predicted speed-up band,
    then the `--speculative-config` to paste."""
    out = []
    for conc, k in best.items():
        row = prediction[(prediction.concurrency == conc) & (prediction[COLUMNS.k] == k)].iloc[0]
        out.append(
            f"C = {conc}: best k {k}, predicted {row.speedup:.2f}x "
            f"[{row.speedup_low:.2f}, {row.speedup_high:.2f}] (PREDICTED, not measured)"
        )
    if config:
        out.append(f"--speculative-config '{json.dumps(config)}'")
    else:
        out.append("no k pays at any measured concurrency: serve without --speculative-config")
    return out


#: Published work on speculation for MoE verifiers, and reported runs, with conditions and dates.
_LITERATURE_FILE: Path = DATA_DIR / "published" / "moe-speculation.json"


def literature(path: Path = _LITERATURE_FILE) -> pd.DataFrame:
    """One row per published number: source, date, role (MoE method, reported speed-up, reported
    slowdown, other drafter), conditions, the number, and whether it was read in the source."""
    record = json.loads(Path(path).read_text())
    return pd.DataFrame(record["records"])
