"""Notebook 03's explorers: a run's acceptance by k, temperature and task, and your own prompt
decoded by the from-scratch EAGLE-3 with every token labelled by how it was produced (widgets from
helpers.analytics.explorers)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from chapters.ch03_acceptance.figures import token_html, token_pieces
from helpers.analytics.explorers import Explorer, ExplorerState
from helpers.analytics.figures import interval_yerr
from helpers.common import vllm_names
from helpers.common.counters import acceptance_stats
from helpers.common.plots import PALETTE, new_figure
from helpers.common.tables import COLUMNS
from helpers.eagle3.decode import ReferencePair, chat_prompt_ids, speculative_generate

__all__ = [
    "acceptance_long_table",
    "acceptance_explorer",
    "prompt_explorer",
]


# --------------------------------------------------------------------------- the run's acceptance


def acceptance_long_table(
    by_category: pd.DataFrame, by_k: pd.DataFrame, by_temperature: pd.DataFrame, main_k: int
) -> pd.DataFrame:
    """Every measured (k, temperature, task) of a sweep in one table (task 'all' pools the
    tasks)."""
    frames = [
        by_category.assign(temperature=0.0, task=by_category.category),
        by_k.assign(temperature=0.0, task="all"),
        by_temperature.assign(**{COLUMNS.k: main_k}, task="all"),
    ]
    keep = [
        COLUMNS.k,
        "temperature",
        "task",
        vllm_names.STATS.tau,
        COLUMNS.tau_ci_low,
        COLUMNS.tau_ci_high,
    ]
    df = pd.concat([f[[c for c in keep if c in f.columns]] for f in frames], ignore_index=True)
    df[COLUMNS.k] = df[COLUMNS.k].astype(int)
    df["temperature"] = df.temperature.astype(float)
    return df.drop_duplicates([COLUMNS.k, "temperature", "task"], keep="last")


def _acceptance_state(table: pd.DataFrame, k: int, temperature: float, task: str) -> ExplorerState:
    """τ of one (k, temperature, task) of the run, if it was measured, with the tasks beside it."""
    hit = table[(table[COLUMNS.k] == k) & (table.temperature == temperature) & (table.task == task)]
    values: dict[str, Any] = {
        "k": k,
        "temperature": temperature,
        "task": task,
        "measured": bool(len(hit)),
    }
    if len(hit):
        row = hit.iloc[0]
        values.update(
            tau=float(row[vllm_names.STATS.tau]),
            low=row.get(COLUMNS.tau_ci_low),
            high=row.get(COLUMNS.tau_ci_high),
        )
        summary = (
            f"k={k}, T={temperature}, {task}: τ {row[vllm_names.STATS.tau]:.2f} "
            f"[{row.get(COLUMNS.tau_ci_low, float('nan')):.2f}, "
            f"{row.get(COLUMNS.tau_ci_high, float('nan')):.2f}] (ceiling {k + 1})"
        )
    else:
        summary = (
            f"k={k}, T={temperature}, {task}: not measured in this run (tasks were run at "
            f"T = 0, temperatures at the main k over all tasks)"
        )
    fig, (ax,) = new_figure(width=6.0, height=3.0)
    same = table[(table.temperature == temperature) & (table.task == task)].sort_values(COLUMNS.k)
    if len(same):
        ax.errorbar(
            same[COLUMNS.k],
            same[vllm_names.STATS.tau],
            yerr=interval_yerr(same, vllm_names.STATS.tau, COLUMNS.tau_ci_low, COLUMNS.tau_ci_high),
            fmt="o-",
            capsize=3,
            color=PALETTE["spec"],
            label=f"{task}, T={temperature}",
        )
        ax.plot(
            same[COLUMNS.k],
            same[COLUMNS.k] + 1,
            "--",
            color=PALETTE["plain"],
            label="ceiling k + 1",
        )
    if len(hit):
        ax.scatter([k], [values["tau"]], color="black", zorder=4, label="your selection")
    ax.set(xlabel="k", ylabel="τ (95 % interval)", title="τ against k, from this run")
    ax.legend(fontsize=7)
    return ExplorerState(values, summary, fig)


def acceptance_explorer(table: pd.DataFrame, k: int, temperature: float = 0.0) -> Explorer:
    """Browse the run's τ by k, temperature and task (no engine restarts: the run's own table)."""
    import ipywidgets as w

    ks = sorted(table[COLUMNS.k].unique().tolist())
    temps = sorted(table.temperature.unique().tolist())
    tasks = sorted(table.task.unique().tolist(), key=lambda t: (t != "all", t))
    controls = {
        "k": w.SelectionSlider(options=ks, value=k, description="k"),
        "temperature": w.SelectionSlider(options=temps, value=temperature, description="T"),
        "task": w.Dropdown(options=tasks, value="all", description="task"),
    }
    return Explorer("Acceptance of this run", controls, lambda **v: _acceptance_state(table, **v))


# --------------------------------------------------------------------------- your own prompt


def _prompt_state(pair: ReferencePair, prompt: str, k: int, max_tokens: int) -> ExplorerState:
    """Greedy draft-and-verify from scratch on the learner's prompt, tokens coloured by origin."""
    out = speculative_generate(pair, chat_prompt_ids(pair.tokenizer, prompt), k, max_tokens)
    counters = out.counters()
    tau = acceptance_stats(counters)[vllm_names.STATS.tau] if counters.num_drafts else float("nan")
    values = {
        "k": k,
        "tokens": len(out.token_ids),
        "rounds": counters.num_drafts,
        "accepted": counters.num_accepted_tokens,
        "tau": tau,
        "labels": list(out.labels),
    }
    view = token_html(token_pieces(pair.tokenizer, out.token_ids), out.labels)
    summary = (
        f"k={k}: {len(out.token_ids)} tokens in {counters.num_drafts} verify steps after the "
        f"prefill, {counters.num_accepted_tokens} accepted drafts, τ {tau:.2f}"
    )
    return ExplorerState(values, summary, None, view)


def prompt_explorer(pair: ReferencePair, prompt: str, k: int = 3, max_tokens: int = 48) -> Explorer:
    """Type a prompt, pick k: the from-scratch decoder colours accepted, corrected and bonus
    tokens."""
    import ipywidgets as w

    controls = {
        "prompt": w.Text(
            value=prompt,
            description="prompt",
            continuous_update=False,
            layout=w.Layout(width="90%"),
        ),
        "k": w.IntSlider(value=k, min=1, max=7, description="k"),
        "max_tokens": w.IntSlider(
            value=max_tokens, min=8, max=max(128, max_tokens), step=8, description="max tokens"
        ),
    }
    return Explorer("Try your own prompt", controls, lambda **v: _prompt_state(pair, **v))
