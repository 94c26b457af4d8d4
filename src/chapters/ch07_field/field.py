"""EAGLE-3 among the other ways to draft (notebook 07): the methods table, and a comparison of
methods that counts every decode step.

**The table** lives in data/published/drafting-methods.json: what each method drafts from, what it
is trained on, chain or tree in its paper and in vLLM (with the vLLM file that decides it), what a
step costs, and one published number with its conditions. Whether the installed vLLM accepts each
row's `method` and options is checked against its own `SpeculativeMethod` and `SpeculativeConfig`.

**The comparison.** vLLM's τ = 1 + accepted / drafts counts only the steps that *had* a draft: the
n-gram proposer returns an empty draft when nothing matches, the scheduler then runs a plain
one-token step and counts no draft (vLLM `v1/spec_decode/ngram_proposer.py`, `v1/core/sched/
scheduler.py`), so n-gram's τ is conditional on a match while EAGLE-3 drafts on every step. The
fair quantities divide by **all** decode steps of a request (every verifier forward after the
prefill): with N output tokens, D steps that had a draft and A accepted draft tokens, the steps
with a draft wrote D + A tokens and every other step wrote one, so

    decode steps S = max(D, N - 1 - A),   tokens per verifier forward = (N - 1) / S,
    draft coverage = D / S.

S is exact unless the request's last step wrote past its stop (an end-of-sequence token or
`max_tokens` inside accepted drafts: vLLM counts them accepted, then drops them) *and* the request
had steps without a draft; then it undercounts by at most k (`truncation_bound` says how much
that can move the ratios). For a drafter that drafts on every step, S = D exactly, and its tokens
per forward is τ less the tokens last steps wrote past the stop. Requests run one at a time
(`run_one_by_one`): each request's counters are then the engine's counter delta over it (every
vLLM has that) and its tokens/s its own wall time.

**Intervals** (`INTERVAL_METHOD`): the workbook's one method (`intervals`), a jackknife t-interval
over whole requests of each ratio of sums.
"""

from __future__ import annotations

import ast
import inspect
import json
import math
import textwrap
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from helpers.analytics.intervals import METHOD, Interval, jackknife_ends
from helpers.common import vllm_names
from helpers.common.ci import ci_scaled
from helpers.common.counters import SpecCounters, counters_of
from helpers.common.paths import DATA_DIR
from helpers.engine import compat
from helpers.engine.runs import CategoryRun, run_prompts

__all__ = [
    "DFLASH_NAME",
    "run_sizes",
    "has_token_tree",
    "methods_table",
    "mtp_model_types",
    "has_mtp_head",
    "INTERVAL_METHOD",
    "drafter_for",
    "run_one_by_one",
    "steps_of",
    "summarize",
    "comparison_table",
    "always_drafts",
    "truncation_bound",
]

#: The tiny DFlash drafter's folder, beside its verifier (written by this chapter's DFlash recipe).
DFLASH_NAME: str = "tiny-qwen3-moe-dflash"

_METHODS_FILE = DATA_DIR / "published" / "drafting-methods.json"


def run_sizes(n_prompts: int, max_tokens: int, vocab_steps: int) -> tuple[int, int, int]:
    """Held-out prompts per category, tokens per answer and draft-vocabulary training steps: as
    given, under CI (helpers.common.ci) at most 2 prompts and 32 tokens, and half the steps."""
    steps = ci_scaled(vocab_steps, vocab_steps // 2)
    return ci_scaled(n_prompts, 2), ci_scaled(max_tokens, 32), steps


@dataclass(frozen=True)
class _Method:
    """One speculative-decoding method as a row of the table (fields of drafting-methods.json)."""

    name: str
    vllm_method: str
    vllm_options: dict[str, Any]
    drafts_every_step: bool
    drafts_from: str
    trained_on: str
    shape_in_paper: str
    shape_in_vllm: str
    vllm_source: str
    vllm_source_detail: str
    cost_per_step: str
    published: dict[str, Any]
    paper: str


def _load_methods(path: Path = _METHODS_FILE) -> list[_Method]:
    """The rows of the methods file."""
    return [_Method(**row) for row in json.loads(Path(path).read_text(encoding="utf-8"))["methods"]]


def _installed_methods() -> set[str]:
    """Every `method` the installed vLLM's SpeculativeConfig accepts."""
    from vllm.config import speculative

    def flatten(tp: object) -> set[str]:
        args = typing.get_args(tp)
        return {a for a in args if isinstance(a, str)} | {
            s for a in args if not isinstance(a, str) for s in flatten(a)
        }

    return flatten(speculative.SpeculativeMethod)


def has_token_tree() -> bool:
    """True when the installed vLLM has `speculative_token_tree` (tree drafts for EAGLE)."""
    return "speculative_token_tree" in compat.speculative_config_fields()


def _accepted_by_vllm(method: _Method, known: set[str], fields: set[str]) -> bool:
    """True when this vLLM knows the row's `method` and every option it sets."""
    return method.vllm_method in known and set(method.vllm_options) <= fields


def methods_table(methods: Sequence[_Method] | None = None) -> pd.DataFrame:
    """The table, one row per method, with whether the installed vLLM accepts it."""
    methods = _load_methods() if methods is None else methods
    known, fields = _installed_methods(), compat.speculative_config_fields()
    rows = []
    for m in methods:
        config = {"method": m.vllm_method, **m.vllm_options}
        rows.append(
            {
                "name": m.name,
                "speculative_config": json.dumps(config),
                "in this vLLM": _accepted_by_vllm(m, known, fields),
                "drafts from": m.drafts_from,
                "trained on": m.trained_on,
                "paper": m.shape_in_paper,
                "in vLLM": f"{m.shape_in_vllm} (vllm/{m.vllm_source})",
                "cost per step": m.cost_per_step,
                "published": f"{m.published['value']} ({m.published['conditions']}; "
                f"{m.published['source']})",
            }
        )
    return pd.DataFrame(rows).set_index("name")


def _vllm_file(relative: str) -> Path:
    """A file of the installed vLLM package, by its path inside the package."""
    import vllm

    return Path(vllm.__file__).parent / relative


def mtp_model_types() -> set[str]:
    """The string constants of vLLM's MTP config override: the model types it maps to an MTP
    drafter."""
    from vllm.config.speculative import SpeculativeConfig

    tree = ast.parse(textwrap.dedent(inspect.getsource(SpeculativeConfig.hf_config_override)))
    return {
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def has_mtp_head(config: Mapping[str, Any]) -> bool:
    """True when a verifier config.json declares MTP layers (`num_nextn_predict_layers` > 0)."""
    text = config.get("text_config") or {}
    return bool(config.get("num_nextn_predict_layers") or text.get("num_nextn_predict_layers"))


#: The one sentence that says how every interval of the comparison is computed.
INTERVAL_METHOD = f"{METHOD}, of each ratio of sums"


@dataclass(frozen=True)
class _RequestSteps:
    """One request's decode, counted from what vLLM reports for it."""

    output_tokens: int
    seconds: float
    drafted_steps: int
    accepted: int
    draft_tokens: int

    @property
    def decode_tokens(self) -> int:
        """Tokens written by decode steps: all but the first, which the prefill writes."""
        return max(0, self.output_tokens - 1)

    @property
    def decode_steps(self) -> int:
        """Verifier forwards after the prefill: max(D, N - 1 - A) (module docstring)."""
        return max(self.drafted_steps, self.decode_tokens - self.accepted)


def drafter_for(verifier_dir: str | Path) -> Path | None:
    """The DFlash drafter tools/dflash_recipe.py built beside this verifier, if there is one."""
    path = Path(verifier_dir).parent / DFLASH_NAME
    return path if (path / "config.json").is_file() else None


def _request_steps(run: CategoryRun) -> _RequestSteps:
    """The counts of a one-request run: vLLM's per-request record if it kept one, else the
    engine's counter delta over the run (the same numbers: tests/kit/test_tiny_recipe.py)."""
    if len(run.token_ids) != 1:
        raise ValueError(f"request_steps needs a one-request run, got {len(run.token_ids)}")
    c: SpecCounters = counters_of(run.requests) if run.requests else run.counters
    return _RequestSteps(
        run.output_tokens, run.seconds, c.num_drafts, c.num_accepted_tokens, c.num_draft_tokens
    )


def run_one_by_one(
    llm: Any, prompts: Mapping[str, Sequence[str]], params: Any
) -> dict[str, list[CategoryRun]]:
    """Each prompt of each category as its own request, one after another (concurrency 1)."""
    return {cat: [run_prompts(llm, [p], params) for p in items] for cat, items in prompts.items()}


def steps_of(runs: Mapping[str, Sequence[CategoryRun]]) -> list[_RequestSteps]:
    """The counted steps of every one-request run, categories in order."""
    return [_request_steps(r) for items in runs.values() for r in items]


def _ratio_interval(num: Sequence[float], den: Sequence[float], offset: float = 0.0) -> Interval:
    """offset + Σnum / Σden over requests, with its jackknife t-interval (NaN ends below 2)."""
    a, b = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    n = len(a)
    point = offset + a.sum() / b.sum() if b.sum() else math.nan
    if n < 2:
        return Interval(point, math.nan, math.nan, n)
    with np.errstate(invalid="ignore", divide="ignore"):
        loo = offset + (a.sum() - a) / (b.sum() - b)
    lo, hi = jackknife_ends(np.asarray(point), loo)
    return Interval(float(point), float(lo), float(hi), n)


@dataclass(frozen=True)
class _MethodSummary:
    """A method's run over all its decode steps, each ratio with its interval."""

    tau: Interval
    tokens_per_forward: Interval
    coverage: Interval
    tokens_per_s: Interval
    requests: int
    decode_steps: int
    drafted_steps: int

    def row(self) -> dict[str, Any]:
        """Flat columns for a table (estimate, low, high of each ratio)."""
        out: dict[str, Any] = {"n_requests": self.requests}
        for name in ("tau", "tokens_per_forward", "coverage", "tokens_per_s"):
            iv = getattr(self, name)
            key = vllm_names.STATS.tau if name == "tau" else name
            out |= {key: iv.estimate, f"{name}_ci_low": iv.low, f"{name}_ci_high": iv.high}
        return out | {"decode_steps": self.decode_steps, "drafted_steps": self.drafted_steps}


def summarize(requests: Sequence[_RequestSteps]) -> _MethodSummary:
    """τ (vLLM's: per drafted step), tokens per verifier forward and draft coverage (per decode
    step), and output tokens/s (per second of the request), each pooled over the requests."""
    r = requests
    steps = [x.decode_steps for x in r]
    drafted = [x.drafted_steps for x in r]
    return _MethodSummary(
        _ratio_interval([x.accepted for x in r], drafted, offset=1.0),
        _ratio_interval([x.decode_tokens for x in r], steps),
        _ratio_interval(drafted, steps),
        _ratio_interval([x.output_tokens for x in r], [x.seconds for x in r]),
        len(r),
        sum(steps),
        sum(drafted),
    )


def comparison_table(by_method: Mapping[str, Sequence[_RequestSteps]]) -> pd.DataFrame:
    """One row per method: τ, tokens per forward, coverage and tokens/s with their intervals."""
    rows = [{"method": m, **summarize(r).row()} for m, r in by_method.items()]
    return pd.DataFrame(rows).set_index("method")


def always_drafts(vllm_method: str, methods: Sequence[_Method] | None = None) -> bool:
    """True when every row of the table with this vLLM `method` drafts on every decode step
    (False for a method the table does not list, such as plain decoding)."""
    rows = [
        m for m in (_load_methods() if methods is None else methods) if m.vllm_method == vllm_method
    ]
    return bool(rows) and all(m.drafts_every_step for m in rows)


def truncation_bound(
    requests: Sequence[_RequestSteps], k: int, drafts_every_step: bool = False
) -> float:
    """The largest share by which the decode steps can be undercounted.

    A request undercounts by min(E, X): E steps without a draft, X tokens its last step wrote past
    the stop (X <= k). A drafter that drafts on every step has E = 0, so its count is exact;
    otherwise every request that drafted may be off by up to k.
    """
    steps = sum(x.decode_steps for x in requests)
    if drafts_every_step or not steps:
        return 0.0
    return k * sum(x.drafted_steps > 0 for x in requests) / steps
