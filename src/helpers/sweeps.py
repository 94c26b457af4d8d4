"""Acceptance experiments on the tiny pair (notebook 03): vs k, vs temperature, per task category, and throughput.

vLLM fixes k (`num_speculative_tokens`) when an engine starts, so the k sweep starts one engine per
k; the engine of the main k also runs the temperature sweep, and one plain engine gives the
throughput baseline. Every table is tidy, uses vLLM's key names (`num_speculative_tokens`,
`spec_decode_acceptance_length`, ...) and is saved under build/tables/.

Why acceptance falls with temperature: EAGLE-3 drafts in vLLM are greedy argmax proposals
(`draft_sample_method="greedy"`, no draft probabilities). The rejection sampler then accepts a draft
d with probability p_T(d), the verifier's temperature-T probability of d (q is one-hot, so
min(1, p/q) = p), and on rejection samples from p_T with d removed. At T = 0 p is one-hot on the
argmax, so a draft is accepted exactly when it equals the argmax and the output is bit-identical
to plain greedy decoding; as T grows p_T(argmax) shrinks and so does acceptance. For T > 0 the
output is still distributed as plain sampling, but the random stream differs, so it is only
equal in distribution, not token for token.

On a CPU without Triton, vLLM 0.31.0 gets T > 0 speculative decoding wrong (vLLM issue #55005:
its `expand_kernel` fallback leaves the per-token temperature buffer uninitialized), so every
speculative engine here loads `CpuExpandFix` as a worker extension, which swaps in a correct
kernel inside the worker process; `run_sweeps` asks the worker to confirm it.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.corpus import CATEGORIES, load_prompts
from helpers.engine import engine_kwargs, open_engine
from helpers.experiments import CategoryRun, run_categories, run_prompts, sampling, throughput
from helpers.metrics import Meter, SpecCounters, acceptance_stats
from helpers.paths import DATA_DIR, build_path
from helpers.profiles import Profile, load_profile

#: Environment variable that shrinks every experiment (fewer prompts and tokens) in CI.
CI_ENV = "CI"
K_COLUMN = "num_speculative_tokens"
#: Scalar statistics copied into the tables (the per-position list goes to its own long table).
SCALAR_KEYS = ("spec_decode_num_drafts", "spec_decode_draft_tokens", "spec_decode_accepted_tokens",
               "spec_decode_acceptance_length", "spec_decode_acceptance_rate")


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


def in_ci() -> bool:
    """True when the CI environment variable is set (to anything but '' or '0')."""
    return os.environ.get(CI_ENV, "") not in ("", "0")


def sweep_plan(**params: Any) -> SweepPlan:
    """A SweepPlan from notebook parameters; in CI, fewer prompts and tokens (the one CI switch)."""
    params = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items() if v is not None}
    plan = SweepPlan(**params)
    if in_ci():
        plan = replace(plan, n_prompts=min(plan.n_prompts, 2), max_tokens=min(plan.max_tokens, 32),
                       throughput_prompts=min(plan.throughput_prompts, 2),
                       throughput_tokens=min(plan.throughput_tokens, 32))
    if plan.k not in plan.ks:
        raise ValueError(f"the main k={plan.k} must be one of ks={plan.ks}")
    return plan


def save_table(df: pd.DataFrame, name: str) -> Path:
    """Write a table to build/tables/<name>.csv and return the path."""
    path = build_path("tables", f"{name}.csv")
    df.to_csv(path, index=False)
    return path


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
        rows += [{key: name, "position": i, "spec_decode_per_position_acceptance_rate": r}
                 for i, r in enumerate(rates)]
    return pd.DataFrame(rows)


def pooled(runs: Mapping[str, CategoryRun]) -> SpecCounters:
    """Counters of several runs added up (pooled, not an average of ratios)."""
    return sum((r.counters for r in runs.values()), SpecCounters())


def acceptance_vs_k(runs_by_k: Mapping[int, Mapping[str, CategoryRun]]) -> pd.DataFrame:
    """τ and acceptance per k (T = 0, categories pooled), with the k + 1 ceiling; saved as CSV."""
    df = acceptance_table({k: pooled(runs) for k, runs in runs_by_k.items()}, K_COLUMN)
    df["acceptance_length_ceiling"] = df[K_COLUMN] + 1
    save_table(df, "acceptance_vs_k")
    return df


def per_position_vs_k(runs_by_k: Mapping[int, Mapping[str, CategoryRun]]) -> pd.DataFrame:
    """Per-position acceptance rates for every k (long table); saved as CSV."""
    df = per_position_table({k: pooled(runs) for k, runs in runs_by_k.items()}, K_COLUMN)
    save_table(df, "acceptance_per_position")
    return df


def acceptance_by_category(runs_by_k: Mapping[int, Mapping[str, CategoryRun]]) -> pd.DataFrame:
    """τ per task category for every k (T = 0); saved as CSV."""
    frames = [acceptance_table({c: r.counters for c, r in runs.items()}, "category").assign(**{K_COLUMN: k})
              for k, runs in runs_by_k.items()]
    df = pd.concat(frames, ignore_index=True)
    df = df[[K_COLUMN, "category", *SCALAR_KEYS]]
    save_table(df, "acceptance_by_category")
    return df


def temperature_counters(llm: Any, prompts: Sequence[str], temperatures: Sequence[float],
                         max_tokens: int, seed: int) -> dict[float, SpecCounters]:
    """Counter deltas of one batch of prompts at each temperature (seeded sampling)."""
    return {t: run_prompts(llm, prompts, sampling(max_tokens, temperature=t, seed=seed)).counters
            for t in temperatures}


def acceptance_vs_temperature(counters: Mapping[float, SpecCounters], k: int) -> pd.DataFrame:
    """τ and acceptance per temperature at one k; saved as CSV."""
    df = acceptance_table(counters, "temperature")
    df.insert(1, K_COLUMN, k)
    save_table(df, "acceptance_vs_temperature")
    return df


def metered_throughput(llm: Any, prompts: Sequence[str], max_tokens: int) -> dict[str, Any]:
    """experiments.throughput at concurrency 1, plus the acceptance length τ of that same run."""
    with Meter(llm) as meter:
        row = throughput(llm, prompts, concurrency=1, max_tokens=max_tokens)
    return {**row, "spec_decode_acceptance_length": meter.stats["spec_decode_acceptance_length"] or 1.0}


def throughput_vs_k(rows: Mapping[int, dict[str, Any]]) -> pd.DataFrame:
    """Output tokens/s per k (0 = plain) at concurrency 1, speedup over plain, implied step cost; saved.

    A plain step emits 1 token and a speculative step τ tokens, so the cost of a speculative step
    relative to a plain one, as vLLM ran it here, is τ / speedup.
    """
    df = pd.DataFrame([{K_COLUMN: k, **row} for k, row in sorted(rows.items())])
    plain = df.loc[df[K_COLUMN] == 0, "output_tokens_per_s"].iloc[0]
    df["speedup_vs_plain"] = df.output_tokens_per_s / plain
    df["implied_relative_step_cost"] = df.spec_decode_acceptance_length / df.speedup_vs_plain
    save_table(df, "throughput_vs_k")
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


def throughput_prompts(prompts: Mapping[str, Sequence[str]], n: int) -> list[str]:
    """n prompts taken round-robin across categories (so every category is represented)."""
    order = [p for group in zip(*prompts.values()) for p in group]
    return order[:n]


def _with_engine(profile: Profile, k: int, work: Callable[[Any], Any]) -> tuple[Any, float]:
    """Start an engine with k drafts (0: plain), run work(llm), shut down; return (result, seconds).

    Speculative engines get the CPU expand-kernel fix as a worker extension (a no-op with Triton).
    """
    t0 = time.perf_counter()
    extra = {"worker_extension_cls": CPU_EXPAND_FIX} if k else {}
    with open_engine(**engine_kwargs(profile, k=k, **extra)) as llm:
        result = work(llm)
    return result, time.perf_counter() - t0


def run_sweeps(profile: Profile | None = None, plan: SweepPlan | None = None, verbose: bool = True) -> SweepResults:
    """Run the whole plan: a plain engine, then one engine per k (the main k also sweeps temperature)."""
    profile, plan = profile or load_profile(), plan or sweep_plan()
    prompts = load_prompts(DATA_DIR / "prompts", plan.n_prompts)
    flat = [p for c in CATEGORIES for p in prompts[c]]
    tp = throughput_prompts(prompts, plan.throughput_prompts)
    greedy = sampling(plan.max_tokens)
    tput, runs, seconds, temps, checks = {}, {}, {}, {}, {}

    tput[0], seconds["plain"] = _with_engine(profile, 0, lambda llm: metered_throughput(llm, tp, plan.throughput_tokens))
    for k in plan.ks:
        def work(llm: Any, k: int = k) -> None:
            runs[k] = run_categories(llm, prompts, greedy)
            tput[k] = metered_throughput(llm, tp, plan.throughput_tokens)
            if k == plan.k:
                checks["expand_kernel_ok_in_worker"] = all(llm.collective_rpc("workbook_cpu_expand_ok"))
                temps.update(temperature_counters(llm, flat, plan.temperatures, plan.max_tokens, plan.seed))
        _, seconds[f"k={k}"] = _with_engine(profile, k, work)
        if verbose:
            print(f"k={k}: engine + runs {seconds[f'k={k}']:.0f} s, τ = "
                  f"{acceptance_stats(pooled(runs[k]))['spec_decode_acceptance_length']:.2f}")
    return SweepResults(plan, prompts, acceptance_vs_k(runs), per_position_vs_k(runs),
                        acceptance_by_category(runs), acceptance_vs_temperature(temps, plan.k),
                        throughput_vs_k(tput), runs[plan.k], seconds, checks)


# --------------------------------------------------------------------------- vLLM CPU bug at T > 0

#: vLLM issue: on CPUs without Triton the `expand_kernel` fallback discards its output.
CPU_EXPAND_BUG = "https://github.com/vllm-project/vllm/issues/55005"


def fixed_expand_kernel(output: Any, input_val: Any, cu_num_tokens: Any, replace_from: Any, replace_to: Any,
                        MAX_NUM_TOKENS: Any = None) -> None:  # noqa: N803 - the kernel's argument name
    """A correct CPU `expand_kernel`: repeat each request's value over its draft tokens, in any dtype.

    vLLM 0.31.0's `cpu_triton_utils._expand_kernel_impl` hands `_ensure_int64(output)` (a new int64
    copy for the float32 temperature / top-p buffers) to its C++ kernel and never copies it back,
    and truncates float inputs to int64: the rejection sampler then divides the verifier's logits
    by uninitialized memory at every T > 0 request, so speculative outputs at T > 0 are garbage.
    """
    import torch

    counts = torch.diff(cu_num_tokens.long(), prepend=cu_num_tokens.new_zeros(1).long())
    values = torch.where(input_val == replace_from, torch.full_like(input_val, replace_to), input_val)
    total = int(counts.sum())
    output[:total] = values.repeat_interleave(counts).to(output.dtype)


def patch_cpu_expand_kernel() -> bool:
    """Swap in fixed_expand_kernel for vLLM's CPU fallback; True when something was patched.

    Must run in every vLLM worker process before `register_triton_kernel_overrides()` (a vLLM
    general plugin does: plugins load first in `WorkerWrapperBase.init_worker`); afterwards it also
    re-registers the override so an already-initialized process is fixed too.
    """
    try:
        from vllm.triton_utils import HAS_TRITON
        from vllm.utils import cpu_triton_utils
    except ImportError:
        return False
    if HAS_TRITON or cpu_triton_utils._expand_kernel_impl is fixed_expand_kernel:
        return False
    cpu_triton_utils._expand_kernel_impl = fixed_expand_kernel
    from vllm.triton_utils import dispatcher

    name = "vllm.v1.sample.rejection_sampler.expand_kernel"
    if dispatcher._registry.pop(name, None) is not None:
        dispatcher.register_kernels({name: fixed_expand_kernel})
    return True


def cpu_expand_kernel_ok() -> bool:
    """True unless this vLLM's CPU kernel overrides expand float tensors wrongly (checked in-process)."""
    import torch
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return True
    from vllm.triton_utils import dispatcher
    from vllm.v1.sample import rejection_sampler

    if "vllm.v1.sample.rejection_sampler.expand_kernel" not in dispatcher._registry:
        current_platform.import_kernels()
        current_platform.register_triton_kernel_overrides()

    temps = torch.tensor([0.3, 0.7])
    got = rejection_sampler.expand_batch_to_tokens(temps, torch.tensor([2, 3], dtype=torch.int32), 3,
                                                   replace_from=-1, replace_to=1)
    return torch.allclose(got, torch.tensor([0.3, 0.3, 0.7]))


#: `worker_extension_cls` for vLLM: the worker resolving this name applies the fix in its own process.
CPU_EXPAND_FIX = "helpers.sweeps.CpuExpandFix"


class _CpuExpandFixExtension:
    """vLLM worker extension: reports from inside the worker whether the expand kernel is correct."""

    def workbook_cpu_expand_ok(self) -> bool:
        """cpu_expand_kernel_ok() evaluated in the worker process (call via llm.collective_rpc)."""
        return cpu_expand_kernel_ok()


def __getattr__(name: str) -> Any:
    """Resolving `CpuExpandFix` (as a vLLM worker does for `worker_extension_cls`) patches the kernel first.

    The worker imports this module and reads the name after its kernel overrides are registered,
    so the fix lands in the process where the rejection sampler runs; importing the module
    elsewhere patches nothing.
    """
    if name == "CpuExpandFix":
        patch_cpu_expand_kernel()
        return _CpuExpandFixExtension
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def best_k(throughput_df: pd.DataFrame) -> int:
    """The k with the highest measured output tokens/s (0 when plain decoding wins)."""
    return int(throughput_df.loc[throughput_df.output_tokens_per_s.idxmax(), K_COLUMN])
