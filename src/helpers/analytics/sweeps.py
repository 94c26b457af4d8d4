"""Acceptance experiments on the tiny pair (notebook 03): vs k, vs temperature, per task category, and throughput.

vLLM fixes k (`num_speculative_tokens`) when an engine starts, so the k sweep starts one engine per
k; the engine of the main k also runs the temperature sweep, and one plain engine gives the
throughput baseline. Every table is tidy, uses vLLM's key names (`num_speculative_tokens`,
`spec_decode_acceptance_length`, ...); `SweepResults.tables()` names them for saving.

Why acceptance falls with temperature: EAGLE-3 drafts in vLLM are greedy argmax proposals
(`draft_sample_method="greedy"`, no draft probabilities). The rejection sampler then accepts a draft
d with probability p_T(d), the verifier's temperature-T probability of d (q is one-hot, so
min(1, p/q) = p), and on rejection samples from p_T with d removed. At T = 0 p is one-hot on the
argmax, so a draft is accepted exactly when it equals the argmax and the output is bit-identical
to plain greedy decoding; as T grows p_T(argmax) shrinks and so does acceptance. For T > 0 the
output is still distributed as plain sampling, but the random stream differs, so it is only
equal in distribution, not token for token.

On a CPU without Triton, vLLM 0.31.0 gets T > 0 speculative decoding wrong (vLLM issue #55005);
the workbook's vLLM plugin fixes it in every vLLM process (`helpers.engine.vllm_issue_55005`), and
the main-k engine loads `ExpandKernelCheck` as a worker extension so `run_sweeps` can ask the
worker process itself whether the fix is in place.

Functions return tables; the notebook saves them (`helpers.common.tables.save_table`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from helpers.common.ci import ci_scaled
from helpers.common.counters import Meter, SpecCounters, acceptance_stats
from helpers.common.profiles import Profile
from helpers.common.prompts import CATEGORIES, interleaved, load_prompts
from helpers.common.tables import K_COLUMN
from helpers.engine.lifecycle import engine_kwargs, open_engine
from helpers.engine.runs import (
    CategoryRun,
    pooled,
    run_categories,
    run_prompts,
    sampling,
    throughput,
)
from helpers.engine.vllm_issue_55005 import EXPAND_KERNEL_CHECK

__all__ = [
    "SCALAR_KEYS",
    "SweepPlan",
    "sweep_plan",
    "acceptance_row",
    "acceptance_table",
    "per_position_table",
    "acceptance_vs_k",
    "per_position_vs_k",
    "acceptance_by_category",
    "temperature_counters",
    "acceptance_vs_temperature",
    "metered_throughput",
    "throughput_vs_k",
    "SweepResults",
    "main_k_runs",
    "run_sweeps",
    "best_k",
]

#: Scalar statistics copied into the tables (the per-position list goes to its own long table).
SCALAR_KEYS = (
    "spec_decode_num_drafts",
    "spec_decode_draft_tokens",
    "spec_decode_accepted_tokens",
    "spec_decode_acceptance_length",
    "spec_decode_acceptance_rate",
)


@dataclass(frozen=True)
class SweepPlan:
    """What to run: the k values, the main k, temperatures, and how many prompts/tokens."""

    ks: tuple[int, ...] = (1, 2, 3, 4, 5)
    k: int = 3
    temperatures: tuple[float, ...] = (0.0, 0.3, 0.7, 1.0)
    n_prompts: int = 4
    max_tokens: int = 64
    throughput_prompts: int = 4
    throughput_tokens: int = 64
    seed: int = 0

    @property
    def engines(self) -> int:
        """Engines the plan starts: one per k, plus the plain baseline."""
        return len(self.ks) + 1


def sweep_plan(**params: Any) -> SweepPlan:
    """A SweepPlan from notebook parameters; in CI, fewer prompts and tokens (the one CI switch)."""
    params = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items() if v is not None}
    plan = SweepPlan(**params)
    plan = replace(
        plan,
        n_prompts=ci_scaled(plan.n_prompts, 2),
        max_tokens=ci_scaled(plan.max_tokens, 32),
        throughput_prompts=ci_scaled(plan.throughput_prompts, 2),
        throughput_tokens=ci_scaled(plan.throughput_tokens, 32),
    )
    if plan.k not in plan.ks:
        raise ValueError(f"the main k={plan.k} must be one of ks={plan.ks}")
    return plan


def acceptance_row(counters: SpecCounters) -> dict[str, Any]:
    """The scalar acceptance statistics of one counter delta (vLLM's key names)."""
    stats = acceptance_stats(counters)
    return {key: stats[key] for key in SCALAR_KEYS}


def acceptance_table(counters: Mapping[Any, SpecCounters], key: str) -> pd.DataFrame:
    """One row per experiment (key column first) with the scalar statistics."""
    return pd.DataFrame([{key: name, **acceptance_row(c)} for name, c in counters.items()])


def per_position_table(counters: Mapping[Any, SpecCounters], key: str) -> pd.DataFrame:
    """Long table: one row per (experiment, draft position) with vLLM's per-position rate."""
    rows = []
    for name, c in counters.items():
        rates = acceptance_stats(c)["spec_decode_per_position_acceptance_rates"]
        rows += [
            {key: name, "position": i, "spec_decode_per_position_acceptance_rate": r}
            for i, r in enumerate(rates)
        ]
    return pd.DataFrame(rows)


def acceptance_vs_k(runs_by_k: Mapping[int, Mapping[str, CategoryRun]]) -> pd.DataFrame:
    """τ and acceptance per k (T = 0, categories pooled), with the k + 1 ceiling."""
    df = acceptance_table({k: pooled(runs) for k, runs in runs_by_k.items()}, K_COLUMN)
    df["acceptance_length_ceiling"] = df[K_COLUMN] + 1
    return df


def per_position_vs_k(runs_by_k: Mapping[int, Mapping[str, CategoryRun]]) -> pd.DataFrame:
    """Per-position acceptance rates for every k (long table)."""
    df = per_position_table({k: pooled(runs) for k, runs in runs_by_k.items()}, K_COLUMN)
    return df


def acceptance_by_category(runs_by_k: Mapping[int, Mapping[str, CategoryRun]]) -> pd.DataFrame:
    """τ per task category for every k (T = 0)."""
    frames = [
        acceptance_table({c: r.counters for c, r in runs.items()}, "category").assign(
            **{K_COLUMN: k}
        )
        for k, runs in runs_by_k.items()
    ]
    df = pd.concat(frames, ignore_index=True)
    df = df[[K_COLUMN, "category", *SCALAR_KEYS]]
    return df


def temperature_counters(
    llm: Any, prompts: Sequence[str], temperatures: Sequence[float], max_tokens: int, seed: int
) -> dict[float, SpecCounters]:
    """Counter deltas of one batch of prompts at each temperature (seeded sampling)."""
    return {
        t: run_prompts(llm, prompts, sampling(max_tokens, temperature=t, seed=seed)).counters
        for t in temperatures
    }


def acceptance_vs_temperature(counters: Mapping[float, SpecCounters], k: int) -> pd.DataFrame:
    """τ and acceptance per temperature at one k."""
    df = acceptance_table(counters, "temperature")
    df.insert(1, K_COLUMN, k)
    return df


def metered_throughput(llm: Any, prompts: Sequence[str], max_tokens: int) -> dict[str, Any]:
    """experiments.throughput at concurrency 1, plus the acceptance length τ of that same run."""
    with Meter(llm) as meter:
        row = throughput(llm, prompts, concurrency=1, max_tokens=max_tokens)
    return {
        **row,
        "spec_decode_acceptance_length": meter.stats["spec_decode_acceptance_length"] or 1.0,
    }


def throughput_vs_k(rows: Mapping[int, dict[str, Any]]) -> pd.DataFrame:
    """Output tokens/s per k (0 = plain) at concurrency 1, speedup over plain, implied step cost.

    A plain step emits 1 token and a speculative step τ tokens, so the cost of a speculative step
    relative to a plain one, as vLLM ran it here, is τ / speedup.
    """
    df = pd.DataFrame([{K_COLUMN: k, **row} for k, row in sorted(rows.items())])
    plain = df.loc[df[K_COLUMN] == 0, "output_tokens_per_s"].iloc[0]
    df["speedup_vs_plain"] = df.output_tokens_per_s / plain
    df["implied_relative_step_cost"] = df.spec_decode_acceptance_length / df.speedup_vs_plain
    return df


@dataclass
class SweepResults:
    """Every table of the sweep, plus the main-k runs (their outputs feed the reference check)."""

    plan: SweepPlan
    prompts: dict[str, list[str]]
    by_k: pd.DataFrame
    per_position: pd.DataFrame
    by_category: pd.DataFrame
    by_temperature: pd.DataFrame
    throughput: pd.DataFrame
    main_runs: dict[str, CategoryRun]
    seconds: dict[str, float] = field(default_factory=dict)
    checks: dict[str, bool] = field(default_factory=dict)

    @property
    def main_prompts(self) -> list[str]:
        """The prompts of the main-k runs, in category order (as main_token_ids)."""
        return [p for c in self.main_runs for p in self.prompts[c]]

    @property
    def main_token_ids(self) -> list[list[int]]:
        """vLLM's output tokens of the main-k, T = 0 runs, in category order."""
        return [ids for run in self.main_runs.values() for ids in run.token_ids]

    @property
    def main_counters(self) -> SpecCounters:
        """vLLM's counter delta over the main-k, T = 0 runs."""
        return pooled(self.main_runs)

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table of the sweep under the name it is saved as (build/tables/<name>.csv)."""
        return {
            "acceptance_vs_k": self.by_k,
            "acceptance_per_position": self.per_position,
            "acceptance_by_category": self.by_category,
            "acceptance_vs_temperature": self.by_temperature,
            "throughput_vs_k": self.throughput,
        }


def _with_engine(profile: Profile, k: int, work: Callable[[Any], Any]) -> tuple[Any, float]:
    """Start an engine with k drafts (0: plain), run work(llm), shut down; return (result, seconds).

    Speculative engines load ExpandKernelCheck, so the worker can report on the vLLM #55005 fix.
    """
    t0 = time.perf_counter()
    extra = {"worker_extension_cls": EXPAND_KERNEL_CHECK} if k else {}
    with open_engine(**engine_kwargs(profile, k=k, **extra)) as llm:
        result = work(llm)
    return result, time.perf_counter() - t0


def main_k_runs(profile: Profile, plan: SweepPlan) -> dict[str, CategoryRun]:
    """The plan's main-k, T = 0 runs on one profile's engine (what run_sweeps keeps as main_runs)."""
    prompts = load_prompts(plan.n_prompts)
    greedy = sampling(plan.max_tokens)
    runs, _ = _with_engine(profile, plan.k, lambda llm: run_categories(llm, prompts, greedy))
    return runs


def run_sweeps(profile: Profile, plan: SweepPlan, verbose: bool = True) -> SweepResults:
    """Run the whole plan: a plain engine, then one engine per k (the main k also sweeps temperature)."""
    prompts = load_prompts(plan.n_prompts)
    flat = [p for c in CATEGORIES for p in prompts[c]]
    tp = interleaved(prompts, plan.throughput_prompts)
    greedy = sampling(plan.max_tokens)
    tput, runs, seconds, temps, checks = {}, {}, {}, {}, {}

    tput[0], seconds["plain"] = _with_engine(
        profile, 0, lambda llm: metered_throughput(llm, tp, plan.throughput_tokens)
    )
    for k in plan.ks:

        def work(llm: Any, k: int = k) -> None:
            runs[k] = run_categories(llm, prompts, greedy)
            tput[k] = metered_throughput(llm, tp, plan.throughput_tokens)
            if k == plan.k:
                checks["expand_kernel_ok_in_worker"] = all(
                    llm.collective_rpc("workbook_cpu_expand_ok")
                )
                temps.update(
                    temperature_counters(llm, flat, plan.temperatures, plan.max_tokens, plan.seed)
                )

        _, seconds[f"k={k}"] = _with_engine(profile, k, work)
        if verbose:
            print(
                f"k={k}: engine + runs {seconds[f'k={k}']:.0f} s, τ = "
                f"{acceptance_stats(pooled(runs[k]))['spec_decode_acceptance_length']:.2f}"
            )
    return SweepResults(
        plan,
        prompts,
        acceptance_vs_k(runs),
        per_position_vs_k(runs),
        acceptance_by_category(runs),
        acceptance_vs_temperature(temps, plan.k),
        throughput_vs_k(tput),
        runs[plan.k],
        seconds,
        checks,
    )


def best_k(throughput_df: pd.DataFrame) -> int:
    """The k with the highest measured output tokens/s (0 when plain decoding wins)."""
    return int(throughput_df.loc[throughput_df.output_tokens_per_s.idxmax(), K_COLUMN])
