"""Explorers: small ipywidgets apps a learner moves to watch an answer change (notebooks 01, 03,
06).

Each explorer is a pure `*_state(...)` function (numbers in, numbers and a figure out; tested and
asserted in the notebooks) wired to sliders by `Explorer`. An explorer is a `VBox` with the CSS
class `workbook-explorer`; its sliders carry `workbook-explorer-control` and its one-line result
`workbook-explorer-result` (the browser test of `make lab` moves a slider and reads that line).
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from helpers.analytics.figures import interval_yerr, token_html, token_pieces
from helpers.analytics.moe import (
    MoeShape,
    shipped_shapes,
    step_bytes,
    union_with_correlation,
)
from helpers.common import vllm_names
from helpers.common.counters import acceptance_stats
from helpers.common.plots import PALETTE, new_figure
from helpers.common.tables import K_COLUMN, TAU_CI_HIGH, TAU_CI_LOW
from helpers.eagle3.decode import ReferencePair, chat_prompt_ids, speculative_generate

__all__ = [
    "speedup_explorer",
    "acceptance_long_table",
    "acceptance_explorer",
    "prompt_explorer",
]

CSS_EXPLORER, CSS_CONTROL, CSS_RESULT = (
    "workbook-explorer",
    "workbook-explorer-control",
    "workbook-explorer-result",
)


@dataclass
class _ExplorerState:
    """What an explorer shows for one setting: its numbers, a one-line summary, a view."""

    values: dict[str, Any]
    summary: str
    figure: Figure | None = None
    html: str = ""


@dataclass
class _Explorer:
    """Controls wired to a state function; the result line and view follow every move."""

    title: str
    controls: dict[str, Any]
    compute: Callable[..., _ExplorerState]
    on_change: Callable[[_Explorer, str], None] | None = None
    state: _ExplorerState = field(init=False)

    def __post_init__(self) -> None:
        import ipywidgets as w

        self.result = w.HTML().add_class(CSS_RESULT)
        self.view = w.Output()
        for name, control in self.controls.items():
            control.add_class(CSS_CONTROL)
            control.observe(lambda change, name=name: self._changed(name), "value")
        self.widget = w.VBox(
            [w.HTML(f"<b>{html.escape(self.title)}</b>"), *self.controls.values(), self.result]
            + [self.view]
        ).add_class(CSS_EXPLORER)
        self.refresh()

    def values(self) -> dict[str, Any]:
        """The controls' current values by name."""
        return {name: control.value for name, control in self.controls.items()}

    def _changed(self, name: str) -> None:
        """A control moved: let the explorer adjust the others, then recompute."""
        if self.on_change is not None:
            self.on_change(self, name)
        self.refresh()

    def refresh(self) -> _ExplorerState:
        """Recompute from the controls and redraw the result line and the view."""
        from IPython.display import HTML, clear_output, display

        self.state = self.compute(**self.values())
        self.result.value = html.escape(self.state.summary)
        with self.view:
            clear_output(wait=True)
            if self.state.figure is not None:
                display(self.state.figure)
            if self.state.html:
                display(HTML(self.state.html))
        if self.state.figure is not None:
            plt.close(self.state.figure)
        return self.state

    def _ipython_display_(self) -> None:
        """The live widget, then the executed state as text (what an exported page shows)."""
        from IPython.display import display

        display(self.widget)
        print(f"as executed: {self.state.summary}")


# --------------------------------------------------------------------------- the speed-up model


def _speedup_state(
    tau: float,
    k: int,
    batch: int,
    c: float,
    lab: pd.DataFrame | None = None,
    published: pd.DataFrame | None = None,
) -> _ExplorerState:
    """Speed-up τ / c and break-even τ = c, beside the recorded c(k, batch) and published runs."""
    tau = min(max(tau, 1.0), k + 1.0)
    values: dict[str, Any] = {
        "tau": tau,
        "k": k,
        "batch": batch,
        "c": c,
        "speedup": tau / c,
        "break_even_tau": c,
        "pays": tau > c,
        "reachable": c <= k + 1,
    }
    fig, (ax,) = new_figure(width=6.0, height=3.4)
    taus = [1 + i * k / 50 for i in range(51)]
    ax.plot(taus, [t / c for t in taus], color=PALETTE["spec"], label=f"τ / c, c = {c:.2f}")
    recorded = ""
    if lab is not None:
        at = lab[(lab[K_COLUMN] == k) & (lab.concurrency == batch)]
        if len(at):
            rc = float(at.measured_c.median())
            values["recorded_c"] = rc
            ax.plot(
                taus,
                [t / rc for t in taus],
                "--",
                color=PALETTE["plain"],
                label=f"recorded H200 c = {rc:.2f} (k={k}, C={batch})",
            )
            recorded = f"; recorded H200 c(k={k}, C={batch}) {rc:.2f} → {tau / rc:.2f}×"
    if published is not None and len(published):
        pts = published[published.batch == batch]
        if len(pts):
            ax.scatter(
                pts.acceptance_length,
                pts.speedup_vs_plain,
                color=PALETTE["bonus"],
                label=f"published runs at batch {batch}",
                zorder=3,
            )
            values["published_points"] = len(pts)
    ax.axhline(1, color="grey", lw=0.8)
    ax.axvline(c, color=PALETTE["correction"], lw=0.8, ls=":", label="break-even τ = c")
    ax.scatter([tau], [tau / c], color="black", zorder=4, label="your setting")
    ax.set(
        xlabel="acceptance length τ",
        ylabel="speed-up over plain decoding",
        title=f"k = {k}: speed-up = τ / c(k, batch)",
        xlim=(1, k + 1),
    )
    ax.legend(fontsize=7)
    verdict = "pays" if tau > c else "does not pay"
    summary = (
        f"τ {tau:.2f}, c {c:.2f} → speed-up {tau / c:.2f}× ({verdict}; break-even τ "
        f"{c:.2f}, ceiling k + 1 = {k + 1}){recorded}"
    )
    return _ExplorerState(values, summary, fig)


def speedup_explorer(
    lab: pd.DataFrame | None = None,
    published: pd.DataFrame | None = None,
    tau: float = 2.5,
    k: int = 3,
    batch: int = 1,
    c: float = 1.8,
) -> _Explorer:
    """Sliders for τ, k, batch and the step-cost ratio c over the speed-up model."""
    import ipywidgets as w

    controls = {
        "tau": w.FloatSlider(value=tau, min=1.0, max=k + 1.0, step=0.05, description="τ"),
        "k": w.IntSlider(value=k, min=1, max=7, description="k"),
        "batch": w.SelectionSlider(options=[1, 4, 16, 64], value=batch, description="batch"),
        "c": w.FloatSlider(value=c, min=0.8, max=4.0, step=0.05, description="c(k, batch)"),
    }

    def clamp_tau(ex: _Explorer, name: str) -> None:
        if name == "k":
            ex.controls["tau"].max = ex.controls["k"].value + 1.0

    return _Explorer(
        "Speed-up model: does speculation pay?",
        controls,
        lambda **v: _speedup_state(**v, lab=lab, published=published),
        clamp_tau,
    )


# --------------------------------------------------------------------------- the expert union


def _union_state(
    shape: MoeShape, positions: int, batch: int = 1, rho: float = 0.0, context: int = 512
) -> _ExplorerState:
    """Distinct experts per layer and verify-step bytes for `positions` per sequence, vs one
    token."""
    union = union_with_correlation(shape.experts, shape.active, batch, positions, rho)
    one = union_with_correlation(shape.experts, shape.active, batch, 1, rho)
    verify = step_bytes(shape, batch, union, context)
    plain = step_bytes(shape, batch, one, context)
    values = {
        "shape": shape.name,
        "positions": positions,
        "batch": batch,
        "rho": rho,
        "distinct_experts": union,
        "one_token_experts": one,
        "verify_gb": verify / 1e9,
        "plain_gb": plain / 1e9,
        "bytes_ratio": verify / plain,
    }
    fig, (ax,) = new_figure(width=6.0, height=3.2)
    ns = list(range(1, 17))
    curve = [union_with_correlation(shape.experts, shape.active, batch, n, rho) for n in ns]
    ax.plot(ns, curve, "o-", ms=3, color=PALETTE["spec"], label=f"ρ = {rho:.2f}")
    ax.axhline(shape.experts, ls="--", color=PALETTE["plain"], label=f"all {shape.experts} experts")
    ax.scatter([positions], [union], color="black", zorder=4, label="your setting")
    ax.set(
        xlabel="positions per sequence (k + 1 in a verify pass)",
        ylabel="distinct experts per layer",
        title=f"{shape.name}, batch {batch}",
    )
    ax.legend(fontsize=7)
    summary = (
        f"{shape.name}: {positions} positions × batch {batch} read {union:.1f} of "
        f"{shape.experts} experts per layer (one token: {one:.1f}); verify step "
        f"{verify / 1e9:.2f} GB vs {plain / 1e9:.2f} GB, {verify / plain:.2f}× the bytes"
    )
    return _ExplorerState(values, summary, fig)


def _union_explorer(
    tiny: MoeShape, positions: int = 4, batch: int = 1, rho: float = 0.0
) -> _Explorer:
    """Pick a shape, positions, batch and routing correlation; see the union and step bytes."""
    import ipywidgets as w

    shapes = {s.name: s for s in (tiny, *shipped_shapes())}
    controls = {
        "shape": w.Dropdown(options=list(shapes), value=tiny.name, description="shape"),
        "positions": w.IntSlider(value=positions, min=1, max=16, description="positions"),
        "batch": w.SelectionSlider(options=[1, 4, 16, 64], value=batch, description="batch"),
        "rho": w.FloatSlider(value=rho, min=0.0, max=1.0, step=0.05, description="ρ"),
    }
    return _Explorer(
        "Expert union: what a verify pass reads",
        controls,
        lambda shape, **v: _union_state(shapes[shape], **v),
    )


# --------------------------------------------------------------------------- the run's acceptance


def acceptance_long_table(
    by_category: pd.DataFrame, by_k: pd.DataFrame, by_temperature: pd.DataFrame, main_k: int
) -> pd.DataFrame:
    """Every measured (k, temperature, task) of a sweep in one table (task 'all' pools the
    tasks)."""
    frames = [
        by_category.assign(temperature=0.0, task=by_category.category),
        by_k.assign(temperature=0.0, task="all"),
        by_temperature.assign(**{K_COLUMN: main_k}, task="all"),
    ]
    keep = [K_COLUMN, "temperature", "task", vllm_names.TAU, TAU_CI_LOW, TAU_CI_HIGH]
    df = pd.concat([f[[c for c in keep if c in f.columns]] for f in frames], ignore_index=True)
    df[K_COLUMN] = df[K_COLUMN].astype(int)
    df["temperature"] = df.temperature.astype(float)
    return df.drop_duplicates([K_COLUMN, "temperature", "task"], keep="last")


def _acceptance_state(table: pd.DataFrame, k: int, temperature: float, task: str) -> _ExplorerState:
    """τ of one (k, temperature, task) of the run, if it was measured, with the tasks beside it."""
    hit = table[(table[K_COLUMN] == k) & (table.temperature == temperature) & (table.task == task)]
    values: dict[str, Any] = {
        "k": k,
        "temperature": temperature,
        "task": task,
        "measured": bool(len(hit)),
    }
    if len(hit):
        row = hit.iloc[0]
        values.update(
            tau=float(row[vllm_names.TAU]), low=row.get(TAU_CI_LOW), high=row.get(TAU_CI_HIGH)
        )
        summary = (
            f"k={k}, T={temperature}, {task}: τ {row[vllm_names.TAU]:.2f} "
            f"[{row.get(TAU_CI_LOW, float('nan')):.2f}, "
            f"{row.get(TAU_CI_HIGH, float('nan')):.2f}] (ceiling {k + 1})"
        )
    else:
        summary = (
            f"k={k}, T={temperature}, {task}: not measured in this run (tasks were run at "
            f"T = 0, temperatures at the main k over all tasks)"
        )
    fig, (ax,) = new_figure(width=6.0, height=3.0)
    same = table[(table.temperature == temperature) & (table.task == task)].sort_values(K_COLUMN)
    if len(same):
        ax.errorbar(
            same[K_COLUMN],
            same[vllm_names.TAU],
            yerr=interval_yerr(same, vllm_names.TAU, TAU_CI_LOW, TAU_CI_HIGH),
            fmt="o-",
            capsize=3,
            color=PALETTE["spec"],
            label=f"{task}, T={temperature}",
        )
        ax.plot(
            same[K_COLUMN], same[K_COLUMN] + 1, "--", color=PALETTE["plain"], label="ceiling k + 1"
        )
    if len(hit):
        ax.scatter([k], [values["tau"]], color="black", zorder=4, label="your selection")
    ax.set(xlabel="k", ylabel="τ (95 % interval)", title="τ against k, from this run")
    ax.legend(fontsize=7)
    return _ExplorerState(values, summary, fig)


def acceptance_explorer(table: pd.DataFrame, k: int, temperature: float = 0.0) -> _Explorer:
    """Browse the run's τ by k, temperature and task (no engine restarts: the run's own table)."""
    import ipywidgets as w

    ks = sorted(table[K_COLUMN].unique().tolist())
    temps = sorted(table.temperature.unique().tolist())
    tasks = sorted(table.task.unique().tolist(), key=lambda t: (t != "all", t))
    controls = {
        "k": w.SelectionSlider(options=ks, value=k, description="k"),
        "temperature": w.SelectionSlider(options=temps, value=temperature, description="T"),
        "task": w.Dropdown(options=tasks, value="all", description="task"),
    }
    return _Explorer("Acceptance of this run", controls, lambda **v: _acceptance_state(table, **v))


# --------------------------------------------------------------------------- your own prompt


def _prompt_state(pair: ReferencePair, prompt: str, k: int, max_tokens: int) -> _ExplorerState:
    """Greedy draft-and-verify from scratch on the learner's prompt, tokens coloured by origin."""
    out = speculative_generate(pair, chat_prompt_ids(pair.tokenizer, prompt), k, max_tokens)
    counters = out.counters()
    tau = acceptance_stats(counters)[vllm_names.TAU] if counters.num_drafts else float("nan")
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
    return _ExplorerState(values, summary, None, view)


def prompt_explorer(
    pair: ReferencePair, prompt: str, k: int = 3, max_tokens: int = 48
) -> _Explorer:
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
    return _Explorer("Try your own prompt", controls, lambda **v: _prompt_state(pair, **v))
