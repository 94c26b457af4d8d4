"""Notebook 03's experiments: τ and per-position acceptance over k and task (each k, T = 0), over
temperature at the main k, and tokens/s over k at forced and natural length, with the plan that
sizes them and the best-k sentence computed from the throughput table.

vLLM fixes k (`num_speculative_tokens`) when an engine starts, so each experiment starts its own
engines, one section of notebook 03 each: `acceptance_sweep` one engine per k (every category at
T = 0), `temperature_sweep` one at the main k (each temperature), `throughput_sweep` a plain
engine and one per k (tokens/s). Every table is tidy, uses vLLM's key names
(`num_speculative_tokens`, `spec_decode_acceptance_length`, ... from `helpers.common.vllm_names`);
each result's `tables()` names them for saving.

Why acceptance falls with temperature is notebook 03's section 3. On a CPU without Triton, vLLM's
CPU build gets T > 0 speculative decoding wrong (vLLM issue #55005); the workbook's vLLM plugin
fixes it in every vLLM process (`helpers.engine.vllm_issue_55005`), and speculative engines load
the extension `EXPAND_KERNEL_CHECK` names so `temperature_sweep` can ask the worker whether the fix
is in place.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from helpers.analytics.intervals import position_intervals
from helpers.analytics.sweeps import acceptance_table
from helpers.common import vllm_names
from helpers.common.ci import ci_scaled
from helpers.common.counters import Meter, SpecCounters, acceptance_stats
from helpers.common.profiles import Profile
from helpers.common.prompts import CATEGORIES, interleaved, load_prompts
from helpers.common.tables import COLUMNS
from helpers.engine.lifecycle import engine_kwargs, open_engine
from helpers.engine.runs import (
    CategoryRun,
    merge_runs,
    run_categories,
    run_prompts,
    sampling,
    throughput,
)
from helpers.engine.vllm_issue_55005 import EXPAND_KERNEL_CHECK

__all__ = [
    "sweep_plan",
    "main_k_runs",
    "acceptance_sweep",
    "temperature_sweep",
    "throughput_sweep",
    "best_k_sentence",
]


@dataclass(frozen=True)
class _SweepPlan:
    """What to run: the k values, the main k, temperatures, and how many prompts/tokens."""

    ks: tuple[int, ...] = (1, 2, 3, 4, 5)
    k: int = 3
    temperatures: tuple[float, ...] = (0.0, 0.3, 0.7, 1.0)
    n_prompts: int = 4
    max_tokens: int = 64
    throughput_prompts: int = 4
    throughput_tokens: int = 64
    throughput_repeats: int = 3
    seed: int = 0

    @property
    def engines(self) -> dict[str, int]:
        """Engines each section starts: one per k (acceptance), one at the main k (temperature),
        one per k plus the plain baseline (throughput)."""
        return {"acceptance": len(self.ks), "temperature": 1, "throughput": len(self.ks) + 1}


def sweep_plan(**params: Any) -> _SweepPlan:
    """A SweepPlan from notebook parameters; in CI, fewer prompts and tokens (the one CI switch)."""
    params = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items() if v is not None}
    plan = _SweepPlan(**params)
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


def _pooled_by_k(runs_by_k: Mapping[int, Mapping[str, CategoryRun]]) -> dict[int, CategoryRun]:
    """Each k's category runs merged into one (τ pooled over every request of that k)."""
    return {k: merge_runs(list(runs.values())) for k, runs in runs_by_k.items()}


def _acceptance_vs_k(runs_by_k: Mapping[int, Mapping[str, CategoryRun]]) -> pd.DataFrame:
    """τ and acceptance per k (T = 0, categories pooled), with intervals and the k + 1 ceiling."""
    df = acceptance_table(_pooled_by_k(runs_by_k), COLUMNS.k)
    df["acceptance_length_ceiling"] = df[COLUMNS.k] + 1
    return df


#: The interval columns of a per-position table (from position_intervals).
_POSITION_CI_COLUMNS = (
    COLUMNS.rate_ci_low,
    COLUMNS.rate_ci_high,
    COLUMNS.conditional_ci_low,
    COLUMNS.conditional_ci_high,
)


def _per_position_table(runs: Mapping[Any, CategoryRun], key: str) -> pd.DataFrame:
    """Long table: one row per (experiment, draft position): vLLM's rate, the conditional rate,
    CIs."""
    frames = []
    for name, run in runs.items():
        if run.requests:
            df = position_intervals(run.requests)
        else:
            rates = acceptance_stats(run.counters)[vllm_names.STATS.per_position_rates]
            before = [1.0, *rates[:-1]]
            df = pd.DataFrame(
                {
                    "position": range(len(rates)),
                    vllm_names.STATS.per_position_rate: rates,
                    COLUMNS.conditional_rate: [
                        r / b if b else np.nan for r, b in zip(rates, before)
                    ],
                    # no per-request data, so no intervals: the same columns, empty
                    **{c: np.nan for c in _POSITION_CI_COLUMNS},
                }
            )
        frames.append(df.assign(**{key: name}))
    df = pd.concat(frames, ignore_index=True)
    return df[[key, *(c for c in df.columns if c != key)]]


def _per_position_vs_k(runs_by_k: Mapping[int, Mapping[str, CategoryRun]]) -> pd.DataFrame:
    """Per-position and conditional acceptance rates for every k (long table, with intervals)."""
    return _per_position_table(_pooled_by_k(runs_by_k), COLUMNS.k)


def _acceptance_by_category(runs_by_k: Mapping[int, Mapping[str, CategoryRun]]) -> pd.DataFrame:
    """τ per task category for every k (T = 0), with intervals."""
    frames = [acceptance_table(runs, "category") for runs in runs_by_k.values()]
    for k, frame in zip(runs_by_k, frames):
        frame.insert(0, COLUMNS.k, k)
    return pd.concat(frames, ignore_index=True)


def _temperature_runs(
    llm: Any, prompts: Sequence[str], temperatures: Sequence[float], max_tokens: int, seed: int
) -> dict[float, CategoryRun]:
    """One batch of prompts at each temperature (seeded sampling)."""
    return {
        t: run_prompts(llm, prompts, sampling(max_tokens, temperature=t, seed=seed))
        for t in temperatures
    }


def _acceptance_vs_temperature(runs: Mapping[float, CategoryRun], k: int) -> pd.DataFrame:
    """τ and acceptance per temperature at one k, with intervals."""
    df = acceptance_table(runs, "temperature")
    df.insert(1, COLUMNS.k, k)
    return df


#: The two lengths throughput is measured at: answers forced to max_tokens, and natural answers.
_LENGTHS = {"forced": True, "natural": False}


def _metered_throughput(
    llm: Any, prompts: Sequence[str], max_tokens: int, repeats: int = 3
) -> dict[str, Any]:
    """Tokens/s at concurrency 1, `repeats` times at forced and at natural length, with τ of each.

    Forced length (ignore_eos) gives every engine the same number of tokens; natural length
    measures the answers users get. At T = 0 speculative decoding is lossless, so plain and
    speculative engines write the same natural answers: equal work there too.
    """
    row: dict[str, Any] = {"concurrency": 1, "requests": len(prompts), "repeats": repeats}
    for label, ignore_eos in _LENGTHS.items():
        rates, tokens, total = [], 0, SpecCounters()
        for _ in range(repeats):
            with Meter(llm) as meter:
                run = throughput(llm, prompts, 1, max_tokens, ignore_eos=ignore_eos)
            rates.append(run["output_tokens_per_s"])
            tokens += run["output_tokens"]
            total += meter.delta
        prefix = "" if label == "forced" else "natural_"
        row[f"{prefix}output_tokens_per_s"] = float(np.median(rates))
        row[f"{prefix}tokens_per_s_min"] = min(rates)
        row[f"{prefix}tokens_per_s_max"] = max(rates)
        row[f"{prefix}mean_answer_tokens"] = tokens / (repeats * len(prompts))
        tau = acceptance_stats(total)[vllm_names.STATS.tau] or 1.0
        row[vllm_names.STATS.tau if label == "forced" else "natural_acceptance_length"] = tau
    return row


def _throughput_vs_k(rows: Mapping[int, dict[str, Any]]) -> pd.DataFrame:
    """Output tokens/s per k (0 = plain) at concurrency 1, speed-up over plain with its range.

    The range of a speed-up is (slowest spec / fastest plain, fastest spec / slowest plain) over
    the repeats. A plain step emits 1 token and a speculative step τ tokens, so the cost of a
    speculative step relative to a plain one, as vLLM ran it here, is τ / speed-up.
    """
    df = pd.DataFrame([{COLUMNS.k: k, **row} for k, row in sorted(rows.items())])
    plain = df.loc[df[COLUMNS.k] == 0].iloc[0]
    for prefix in ("", "natural_"):
        rate = df[f"{prefix}output_tokens_per_s"]
        df[f"{prefix}speedup_vs_plain"] = rate / plain[f"{prefix}output_tokens_per_s"]
        if f"{prefix}tokens_per_s_min" in df:
            df[f"{prefix}speedup_min"] = (
                df[f"{prefix}tokens_per_s_min"] / plain[f"{prefix}tokens_per_s_max"]
            )
            df[f"{prefix}speedup_max"] = (
                df[f"{prefix}tokens_per_s_max"] / plain[f"{prefix}tokens_per_s_min"]
            )
    df["implied_relative_step_cost"] = df[vllm_names.STATS.tau] / df.speedup_vs_plain
    return df


@dataclass
class _AcceptanceSweep:
    """Section 2 of notebook 03: one engine per k, every category at T = 0 (greedy)."""

    plan: _SweepPlan
    prompts: dict[str, list[str]]
    by_k: pd.DataFrame
    per_position: pd.DataFrame
    by_category: pd.DataFrame
    main_runs: dict[str, CategoryRun]
    seconds: dict[str, float] = field(default_factory=dict)

    def tables(self) -> dict[str, pd.DataFrame]:
        """Its tables under the names they are saved as (build/tables/<name>.csv)."""
        return {
            "acceptance_vs_k": self.by_k,
            "acceptance_per_position": self.per_position,
            "acceptance_by_category": self.by_category,
        }


@dataclass
class _TemperatureSweep:
    """Section 3 of notebook 03: one engine at the main k, the prompts at each temperature."""

    by_temperature: pd.DataFrame
    checks: dict[str, bool] = field(default_factory=dict)
    seconds: float = 0.0

    def tables(self) -> dict[str, pd.DataFrame]:
        """Its table under the name it is saved as."""
        return {"acceptance_vs_temperature": self.by_temperature}


def _with_engine(profile: Profile, k: int, work: Callable[[Any], Any]) -> tuple[Any, float]:
    """Start an engine with k drafts (0: plain), run work(llm), shut down; return (result, seconds).

    Speculative engines load the extension EXPAND_KERNEL_CHECK names, so the worker can report on
    the vLLM #55005 fix.
    """
    t0 = time.perf_counter()
    extra = {"worker_extension_cls": EXPAND_KERNEL_CHECK} if k else {}
    with open_engine(**engine_kwargs(profile, k=k, **extra)) as llm:
        result = work(llm)
    return result, time.perf_counter() - t0


def main_k_runs(profile: Profile, plan: _SweepPlan) -> dict[str, CategoryRun]:
    """The plan's main-k, T = 0 runs on one profile's engine (what acceptance_sweep keeps)."""
    prompts = load_prompts(plan.n_prompts)
    greedy = sampling(plan.max_tokens)
    runs, _ = _with_engine(profile, plan.k, lambda llm: run_categories(llm, prompts, greedy))
    return runs


def acceptance_sweep(profile: Profile, plan: _SweepPlan, verbose: bool = True) -> _AcceptanceSweep:
    """One engine per k of the plan: every category's prompts at T = 0; τ by k, position, task."""
    prompts = load_prompts(plan.n_prompts)
    greedy = sampling(plan.max_tokens)
    runs: dict[int, dict[str, CategoryRun]] = {}
    seconds: dict[str, float] = {}
    for k in plan.ks:
        runs[k], seconds[f"k={k}"] = _with_engine(
            profile, k, lambda llm: run_categories(llm, prompts, greedy)
        )
        if verbose:
            tau = acceptance_stats(merge_runs(list(runs[k].values())).counters)[
                vllm_names.STATS.tau
            ]
            print(f"k={k}: engine + runs {seconds[f'k={k}']:.0f} s, τ = {tau:.2f}")
    return _AcceptanceSweep(
        plan,
        prompts,
        _acceptance_vs_k(runs),
        _per_position_vs_k(runs),
        _acceptance_by_category(runs),
        runs[plan.k],
        seconds,
    )


def temperature_sweep(profile: Profile, plan: _SweepPlan) -> _TemperatureSweep:
    """One engine at the main k: the plan's prompts (all categories) at each temperature, seeded,
    after asking the worker whether the vLLM #55005 fix is in place."""
    prompts = load_prompts(plan.n_prompts)
    flat = [p for c in CATEGORIES for p in prompts[c]]
    checks: dict[str, bool] = {}

    def work(llm: Any) -> dict[float, CategoryRun]:
        checks["expand_kernel_ok_in_worker"] = all(llm.collective_rpc("workbook_cpu_expand_ok"))
        return _temperature_runs(llm, flat, plan.temperatures, plan.max_tokens, plan.seed)

    temps, seconds = _with_engine(profile, plan.k, work)
    return _TemperatureSweep(_acceptance_vs_temperature(temps, plan.k), checks, seconds)


def throughput_sweep(profile: Profile, plan: _SweepPlan, verbose: bool = True) -> pd.DataFrame:
    """A plain engine and one per k, each decoding the throughput prompts one at a time, at forced
    and natural length, repeated (throughput_vs_k)."""
    tp = interleaved(load_prompts(plan.n_prompts), plan.throughput_prompts)
    rows: dict[int, dict[str, Any]] = {}
    for k in (0, *plan.ks):
        rows[k], seconds = _with_engine(
            profile,
            k,
            lambda llm: _metered_throughput(
                llm, tp, plan.throughput_tokens, plan.throughput_repeats
            ),
        )
        if verbose:
            rate = rows[k]["output_tokens_per_s"]
            print(f"{'plain' if k == 0 else f'k={k}'}: {seconds:.0f} s, {rate:.0f} tokens/s")
    return _throughput_vs_k(rows)


def best_k_sentence(throughput_df: pd.DataFrame) -> str:
    """Which k was fastest, by how much, and whether the runner-up's range overlaps it."""
    df = throughput_df.sort_values("output_tokens_per_s", ascending=False)
    first, second = df.iloc[0], df.iloc[1]

    def name(row: pd.Series) -> str:
        k = int(row[COLUMNS.k])
        return "plain" if k == 0 else f"k={k}"

    def rng(row: pd.Series) -> str:
        low, high = row.get("tokens_per_s_min", np.nan), row.get("tokens_per_s_max", np.nan)
        return f"{row.output_tokens_per_s:.0f} tok/s [{low:.0f}, {high:.0f}]"

    overlap = first.get("tokens_per_s_min", np.inf) <= second.get("tokens_per_s_max", -np.inf)
    verdict = (
        "their ranges overlap: this run cannot tell them apart"
        if overlap
        else "their ranges do not overlap"
    )
    return f"fastest {name(first)} {rng(first)}, then {name(second)} {rng(second)}: {verdict}"
