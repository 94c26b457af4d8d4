"""Why is my acceptance low? One pair served under silent mismatches, the damage ranked (notebook
08).

A mismatch between how a drafter was trained and how the pair is served rarely fails: vLLM loads
both models, every output is what the verifier writes, and only the acceptance length τ moves.
This module builds the mismatched inputs (double templating, an unseen system prompt, a template
with Qwen3's empty thinking block, a JSON schema), counts the drafts a grammar threw away, ranks
the damage with intervals, and renders the symptom → cause → fix table (the chapter's
`data/acceptance-doctor.json`: reported cases with their sources, joined to this run's numbers).

Interval method, the workbook's one (`intervals`): damage = τ(baseline) − τ(condition), with a
95 % jackknife t-interval over requests. Where both runs answered the same prompts in the same
order it is paired (leaving prompt i out of both runs, so the variety between prompts cancels);
otherwise the two runs' jackknife variances add, with the smaller run's degrees of freedom. τ's own
intervals are `intervals.tau_interval`, the same method on one run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from helpers.analytics.figures import interval_yerr
from helpers.analytics.intervals import (
    Interval,
    position_intervals,
    tau_difference,
    tau_interval,
)
from helpers.common import vllm_names
from helpers.common.chat import GENERATION_PROMPT, render
from helpers.common.counters import acceptance_stats
from helpers.common.paths import DATA_DIR
from helpers.common.plots import PALETTE, new_figure
from helpers.common.prompts import Messages, as_messages
from helpers.engine.runs import CategoryRun

__all__ = [
    "THINK_OFF_BLOCK",
    "RECORDS_SCHEMA",
    "OTHER_FIELD_ORDER",
    "with_system",
    "double_templated",
    "thinking_off_template",
    "prompt_table",
    "with_field_order",
    "schema_sampling",
    "drafts_invalidated",
    "empty_verify_steps",
    "damage_table",
    "damage_of",
    "damage_ranking",
    "plot_damage",
    "load_cases",
    "measured_text",
    "symptom_markdown",
    "with_history",
    "context_table",
    "published_context_curve",
    "plot_context",
]

#: What Qwen3's chat template appends to the generation prompt with enable_thinking=False.
THINK_OFF_BLOCK = "<think>\n\n</think>\n\n"
#: A system prompt the tiny pair never saw (its corpus has none): the usual frontend default.
_UNSEEN_SYSTEM_PROMPT = "You are a helpful assistant."
#: The records the tiny pair's structured task answers with (helpers.tiny.corpus), as a JSON schema.
RECORDS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer"},
            "city": {"type": "string"},
            "job": {"type": "string"},
            "pet": {"type": "string"},
            "id": {"type": "integer"},
            "active": {"type": "boolean"},
        },
        "required": ["name", "age", "city", "job", "pet", "id", "active"],
        "additionalProperties": False,
    },
}
#: The same fields in another order than the tiny pair writes them (it was trained on name first).
OTHER_FIELD_ORDER: tuple[str, ...] = ("id", "name", "age", "city", "job", "pet", "active")
#: Reported cases: symptom, cause, fix, source, and the condition of notebook 08 that shows it.
_DOCTOR_FILE: Path = Path(__file__).parent / "data" / "acceptance-doctor.json"
#: speculators PR #684's acceptance against context length (and vLLM CI's rows).
_REFERENCES_FILE: Path = DATA_DIR / "published" / "acceptance-references.json"


# --------------------------------------------------------------------------- mismatched inputs


def with_system(prompts: Sequence[str], system: str = _UNSEEN_SYSTEM_PROMPT) -> list[Messages]:
    """Each prompt as a chat that opens with a system message."""
    return [[{"role": "system", "content": system}, *as_messages(p)] for p in prompts]


def double_templated(tok: Any, prompts: Sequence[str]) -> list[Messages]:
    """Each prompt rendered with the chat template and then sent as the user's message: a chat
    API templates it a second time (what notebook 01's `tokens.double_templated` shows as text)."""
    return [as_messages(render(tok, as_messages(p))) for p in prompts]


def thinking_off_template(template: str) -> str:
    """The chat template with Qwen3's empty thinking block after the generation prompt.

    That is what Qwen3's own template renders with enable_thinking=False; a drafter trained on
    prompts without it (the tiny pair's) is served a prefix it never saw.
    """
    plain, escaped = GENERATION_PROMPT, GENERATION_PROMPT.replace("\n", "\\n")
    block = {plain: THINK_OFF_BLOCK, escaped: THINK_OFF_BLOCK.replace("\n", "\\n")}
    for spelled, think in block.items():  # a Jinja string with real newlines, or with `\\n`
        if template.count(f"'{spelled}'") == 1:
            return template.replace(f"'{spelled}'", f"'{spelled}{think}'")
    raise ValueError(
        f"the template does not spell the generation prompt {GENERATION_PROMPT!r} exactly once"
    )


def prompt_table(
    tok: Any, chats: Mapping[str, Messages], templates: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """One row per condition: the prompt text the engine reads for its chat, and its token count."""
    templates = templates or {}
    rows = []
    for name, chat in chats.items():
        text = render(tok, chat, chat_template=templates.get(name))
        tokens = len(tok(text, add_special_tokens=False)["input_ids"])
        rows.append({"condition": name, "tokens": tokens, "text": text})
    return pd.DataFrame(rows)


def with_field_order(schema: Mapping[str, Any], order: Sequence[str]) -> dict[str, Any]:
    """An array-of-records schema whose properties (all required) come in another order.

    vLLM's default grammar backend (xgrammar) emits an object's properties in the schema's order.
    """
    items = schema["items"]
    properties = {name: items["properties"][name] for name in order}
    return {**schema, "items": {**items, "properties": properties, "required": list(order)}}


def schema_sampling(max_tokens: int, schema: Mapping[str, Any] = RECORDS_SCHEMA) -> Any:
    """Greedy vLLM SamplingParams whose output must follow a JSON schema (structured outputs)."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    return SamplingParams(
        temperature=0.0,
        max_tokens=max_tokens,
        structured_outputs=StructuredOutputsParams(json=dict(schema)),
    )


# ---------------------------------------------------------------------- drafts the grammar dropped


def _steps_without_draft(run: CategoryRun) -> int:
    """Decode steps that verified no draft: tokens not explained by drafted steps and prefills.

    Every request's first token comes from its prefill; each drafted step emits 1 + accepted
    tokens. A step whose whole proposal a grammar rejected (vLLM trims drafts to their longest
    grammar-valid prefix before verifying) runs as a plain step and leaves no trace in the
    counters, so this is how to count it. Tokens accepted past a stop string are not emitted,
    so the count is floored at 0.
    """
    c = run.counters
    return max(0, run.output_tokens - len(run.token_ids) - c.num_drafts - c.num_accepted_tokens)


def drafts_invalidated(run: CategoryRun, k: int) -> int:
    """Draft tokens proposed but dropped before verification: k per step minus those verified."""
    proposed = k * (run.counters.num_drafts + _steps_without_draft(run))
    return max(0, proposed - run.counters.num_draft_tokens)


def empty_verify_steps(run: CategoryRun) -> int | None:
    """Verify steps that carried no draft token at all: those whose whole proposal a grammar
    dropped and that vLLM still ran as draft steps (its asynchronous scheduler); None without
    vLLM's `detailed` per-request records, which alone list each step's drafts."""
    if not run.requests or not all(r.per_step_drafted for r in run.requests):
        return None
    return sum(n == 0 for r in run.requests for n in r.per_step_drafted)


# --------------------------------------------------------------------------- damage with intervals


def _nan_interval(estimate: float, n: int) -> Interval:
    """An estimate without ends (this vLLM kept no per-request acceptance)."""
    return Interval(estimate, math.nan, math.nan, n)


def _damage_interval(base: CategoryRun, cond: CategoryRun) -> Interval:
    """τ(base) − τ(cond) with its 95 % jackknife t-interval; paired when both ran the same
    prompts."""
    estimate = _run_interval(base).estimate - _run_interval(cond).estimate
    if len(base.requests) < 2 or len(cond.requests) < 2:
        return _nan_interval(estimate, len(cond.token_ids))
    paired = len(base.token_ids) == len(cond.token_ids)
    return tau_difference(base.requests, cond.requests, estimate, paired)


def _verdict(damage: Interval) -> str:
    """What the interval of a damage says: lowers τ, raises it, or cannot tell at this size."""
    if not damage.bounded:
        return "no interval from this vLLM"
    if damage.low > 0:
        return "lowers τ"
    if damage.high < 0:
        return "raises τ"
    return "not separated from its baseline"


def damage_table(
    runs: Mapping[str, CategoryRun], baselines: Mapping[str, str], k: int
) -> pd.DataFrame:
    """One row per condition: τ and its baseline's τ (95 % intervals), the damage, drafts dropped.

    `baselines` maps each condition to the name of the run it is compared with (a run in `runs`
    that is not itself a condition). Rows are sorted by damage, largest first.
    """
    rows = []
    for name, base_name in baselines.items():
        run, base = runs[name], runs[base_name]
        tau, tau_base, damage = _run_interval(run), _run_interval(base), _damage_interval(base, run)
        rows.append(
            {
                "condition": name,
                "baseline": base_name,
                "n_requests": len(run.token_ids),
                vllm_names.STATS.tau: tau.estimate,
                "tau_ci_low": tau.low,
                "tau_ci_high": tau.high,
                "baseline_tau": tau_base.estimate,
                "baseline_ci_low": tau_base.low,
                "baseline_ci_high": tau_base.high,
                "damage": damage.estimate,
                "damage_ci_low": damage.low,
                "damage_ci_high": damage.high,
                "verdict": _verdict(damage),
                "drafts_invalidated": drafts_invalidated(run, k),
                "baseline_drafts_invalidated": drafts_invalidated(base, k),
            }
        )
    return pd.DataFrame(rows).sort_values("damage", ascending=False, ignore_index=True)


def damage_of(row: Mapping[str, Any]) -> Interval:
    """The damage interval of one damage_table row."""
    return Interval(
        row["damage"], row["damage_ci_low"], row["damage_ci_high"], int(row["n_requests"])
    )


def damage_ranking(table: pd.DataFrame) -> str:
    """The conditions by damage, largest first, each with the conditions its interval overlaps.

    Overlap is compared for every pair, not between neighbours only: A ≈ B and B ≈ C can hold while
    A lies above C, and then A and C are not shown tied.
    """
    rows = table.sort_values("damage", ascending=False).to_dict("records")
    if not rows:
        return "no conditions measured"
    damages = {str(row["condition"]): damage_of(row) for row in rows}
    width = max(len(name) for name in damages)
    lines = [
        "damage τ(baseline) − τ(condition), 95 % intervals, largest first; ≈ names the conditions"
        " whose interval overlaps this one's (this run cannot order those two), every pair not"
        " named is separated:"
    ]
    for name, damage in damages.items():
        if not damage.bounded:
            relation = "? no interval: not ranked"
        else:
            tied = [
                other
                for other, d in damages.items()
                if other != name and d.bounded and damage.overlaps(d)
            ]
            relation = f"≈ {', '.join(tied)}" if tied else "separated from every other"
        lines.append(f"  {name:<{width}}  {damage}  {relation}")
    return "\n".join(lines)


def plot_damage(table: pd.DataFrame, k: int) -> Figure:
    """Each condition's τ next to its baseline's (95 % intervals), most damaging at the top."""
    rows = table.sort_values("damage", ascending=True).reset_index(drop=True)
    fig, (ax,) = new_figure(1, width=8.0, height=0.55 * len(rows) + 1.6)
    y = np.arange(len(rows))
    bars = {
        "its baseline": (0.2, "baseline_tau", "baseline_ci_low", "baseline_ci_high", "plain"),
        "with the mismatch": (
            -0.2,
            vllm_names.STATS.tau,
            "tau_ci_low",
            "tau_ci_high",
            "correction",
        ),
    }
    for label, (offset, value, low, high, color) in bars.items():
        xerr = interval_yerr(rows, value, low, high)  # the same lengths, drawn sideways
        drawn = ax.barh(
            y + offset,
            rows[value],
            height=0.38,
            xerr=xerr,
            capsize=3,
            color=PALETTE[color],
            label=label,
        )
        ax.bar_label(drawn, fmt="%.2f", fontsize=7, label_type="center", color="white")
    ax.set_yticks(y, [f"{c}\n({v})" for c, v in zip(rows.condition, rows.verdict)], fontsize=8)
    ax.axvline(1.0, ls=":", color=PALETTE["plain"], label="no speculation (τ = 1)")
    ax.axvline(k + 1, ls="--", color=PALETTE["spec"], label=f"ceiling k + 1 = {k + 1}")
    ax.set(xlabel="acceptance length τ (95 % interval)", xlim=(0, k + 1.3))
    ax.set_title(
        "τ under each mismatch next to its baseline, most damaging at the top", fontsize=10
    )
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=4)
    return fig


# --------------------------------------------------------------------------- symptom → cause → fix


def load_cases(path: Path = _DOCTOR_FILE) -> list[dict[str, Any]]:
    """The reported cases: symptom, cause, fix, sources, and the condition that shows it (or
    None)."""
    cases = json.loads(Path(path).read_text(encoding="utf-8"))["cases"]
    for case in cases:
        missing = {"symptom", "cause", "fix", "sources", "condition"} - set(case)
        if missing:
            raise ValueError(f"{path}: a case lacks {sorted(missing)}: {case}")
    return cases


def measured_text(row: Mapping[str, Any]) -> str:
    """'τ 3.62 → 1.05, damage 2.57 [2.40, 2.71]: lowers τ' for one damage_table row."""
    return (
        f"τ {row['baseline_tau']:.2f} → {row[vllm_names.STATS.tau]:.2f}, damage {damage_of(row)}: "
        f"{row['verdict']}"
    )


def _symptom_table(cases: Sequence[Mapping[str, Any]], table: pd.DataFrame | None) -> pd.DataFrame:
    """symptom → cause → fix, with each case's sources and what this run measured for it."""
    measured = {r["condition"]: r for r in (table.to_dict("records") if table is not None else [])}
    rows = []
    for case in cases:
        condition = case["condition"]
        if condition is None:
            here = case.get("not_here", "not reproducible on the tiny pair")
        elif condition in measured:
            here = f"{condition}: {measured_text(measured[condition])}"
        else:
            here = f"{condition}: not measured in this run"
        rows.append(
            {
                "symptom": case["symptom"],
                "cause": case["cause"],
                "fix": case["fix"],
                "source": "; ".join(case["sources"]),
                "measured here": here,
            }
        )
    return pd.DataFrame(rows)


def symptom_markdown(cases: Sequence[Mapping[str, Any]], table: pd.DataFrame | None = None) -> str:
    """The symptom → cause → fix table as Markdown: with a damage_table, the last column is what
    this run measured; without one (docs/instructors.md), the condition of notebook 08 that shows
    it."""
    rows = _symptom_table(cases, table)
    if table is None:
        rows["measured here"] = [c["condition"] or c.get("not_here", "—") for c in cases]
    last = "measured here" if table is not None else "notebook 08 condition"
    rows = rows.rename(columns={"measured here": last})

    def cell(text: Any) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(rows.columns) + " |", "|" + "---|" * len(rows.columns)]
    lines += [
        "| " + " | ".join(cell(v) for v in row) + " |" for row in rows.itertuples(index=False)
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------- context length


def with_history(
    targets: Sequence[str],
    turns: Sequence[tuple[str, str]],
    tokens: int,
    count: Callable[[Messages], int],
) -> tuple[list[Messages], list[int]]:
    """Each target prompt after earlier turns of a conversation (user, assistant pairs, cycled
    from a different turn per target) until the rendered prompt holds at least `tokens` tokens
    (`count` renders and counts a chat); the chats and their prompt lengths."""
    chats, lengths = [], []
    for i, target in enumerate(targets):
        history: Messages = []
        used = 0
        while (n := count(history + as_messages(target))) < tokens and used < len(turns):
            user, answer = turns[(i + used) % len(turns)]
            history += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]
            used += 1
        chats.append(history + as_messages(target))
        lengths.append(n)
    return chats, lengths


def context_table(
    runs: Mapping[int, CategoryRun], lengths: Mapping[int, Sequence[int]]
) -> pd.DataFrame:
    """Per history length asked for: the prompts' mean length, τ with its 95 % interval and the
    per-position rates with theirs."""
    rows = []
    for asked, run in runs.items():
        tau = _run_interval(run)
        per = position_intervals(run.requests) if run.requests else None
        row: dict[str, Any] = {
            "history_tokens": asked,
            "prompt_tokens": float(np.mean(lengths[asked])),
            vllm_names.STATS.tau: tau.estimate,
            "tau_ci_low": tau.low,
            "tau_ci_high": tau.high,
            "requests": tau.n,
        }
        for i, rate in enumerate(run.stats[vllm_names.STATS.per_position_rates]):
            row[f"pos_{i}"] = rate
            row[f"pos_{i}_low"] = float(per.rate_ci_low[i]) if per is not None else math.nan
            row[f"pos_{i}_high"] = float(per.rate_ci_high[i]) if per is not None else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def published_context_curve(path: Path = _REFERENCES_FILE) -> tuple[pd.DataFrame, dict[str, Any]]:
    """speculators PR #684's acceptance length by context (thousands of tokens), and its source,
    date and conditions."""
    record = json.loads(path.read_text(encoding="utf-8"))["context_length"]
    return pd.DataFrame(record["points"]), {k: v for k, v in record.items() if k != "points"}


def plot_context(table: pd.DataFrame, trained: int, published: pd.DataFrame, source: str) -> Figure:
    """Left: this run's τ against prompt length (95 % intervals), the pair's training window
    marked. Right: the published curve of a real pair, its own axis."""
    fig, (ax, bx) = new_figure(2, width=5.2)
    ax.errorbar(
        table.prompt_tokens,
        table[vllm_names.STATS.tau],
        yerr=interval_yerr(table, vllm_names.STATS.tau, "tau_ci_low", "tau_ci_high"),
        marker="o",
        capsize=3,
        color=PALETTE["spec"],
        label="this run",
    )
    ax.axvline(
        trained, ls="--", color=PALETTE["plain"], label=f"training window ({trained} tokens)"
    )
    ax.set(xlabel="prompt tokens (earlier turns + the question)", ylabel="τ (95 % interval)")
    ax.legend(fontsize=8)
    ax.set_title("the tiny pair as the conversation grows", fontsize=10)
    bx.plot(
        published.context_k, published.acceptance_length, marker="s", color=PALETTE["correction"]
    )
    bx.set(xlabel="context (thousands of tokens)", ylabel="acceptance length")
    bx.set_title(source, fontsize=9)
    return fig


def _run_interval(run: CategoryRun) -> Interval:
    """τ of a run from vLLM's counters, with its 95 % interval over requests (NaN ends without
    per-request acceptance)."""
    tau = acceptance_stats(run.counters)[vllm_names.STATS.tau]
    if not run.requests:
        return _nan_interval(tau, len(run.token_ids))
    ends = tau_interval(run.requests)
    return Interval(tau, ends.low, ends.high, ends.n)
