"""Explorers: small ipywidgets apps a learner moves to watch an answer change: the widget plumbing
every explorer uses, and the speed-up model's explorer (notebooks 01 and 06; notebook 03's own
explorers are in its chapter).

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

from helpers.common.plots import PALETTE, new_figure
from helpers.common.tables import COLUMNS

__all__ = [
    "Explorer",
    "ExplorerState",
    "speedup_explorer",
]

_CSS_EXPLORER, _CSS_CONTROL, _CSS_RESULT = (
    "workbook-explorer",
    "workbook-explorer-control",
    "workbook-explorer-result",
)


@dataclass
class ExplorerState:
    """What an explorer shows for one setting: its numbers, a one-line summary, a view."""

    values: dict[str, Any]
    summary: str
    figure: Figure | None = None
    html: str = ""


@dataclass
class Explorer:
    """Controls wired to a state function; the result line and view follow every move."""

    title: str
    controls: dict[str, Any]
    compute: Callable[..., ExplorerState]
    on_change: Callable[[Explorer, str], None] | None = None
    state: ExplorerState = field(init=False)

    def __post_init__(self) -> None:
        import ipywidgets as w

        self.result = w.HTML().add_class(_CSS_RESULT)
        self.view = w.Output()
        for name, control in self.controls.items():
            control.add_class(_CSS_CONTROL)
            control.observe(lambda change, name=name: self._changed(name), "value")
        self.widget = w.VBox(
            [w.HTML(f"<b>{html.escape(self.title)}</b>"), *self.controls.values(), self.result]
            + [self.view]
        ).add_class(_CSS_EXPLORER)
        self.refresh()

    def values(self) -> dict[str, Any]:
        """The controls' current values by name."""
        return {name: control.value for name, control in self.controls.items()}

    def _changed(self, name: str) -> None:
        """A control moved: let the explorer adjust the others, then recompute."""
        if self.on_change is not None:
            self.on_change(self, name)
        self.refresh()

    def refresh(self) -> ExplorerState:
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
    where: str = "recorded",
) -> ExplorerState:
    """Speed-up τ / c and break-even τ = c, beside the recorded c(k, batch) (`where` names the
    record, e.g. "recorded on an H200") and published runs."""
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
        at = lab[(lab[COLUMNS.k] == k) & (lab.concurrency == batch)]
        if len(at):
            rc = float(at.measured_c.median())
            values["recorded_c"] = rc
            ax.plot(
                taus,
                [t / rc for t in taus],
                "--",
                color=PALETTE["plain"],
                label=f"{where}: c = {rc:.2f} (k={k}, C={batch})",
            )
            recorded = f"; {where}: c(k={k}, C={batch}) {rc:.2f} → {tau / rc:.2f}×"
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
    return ExplorerState(values, summary, fig)


def speedup_explorer(
    lab: pd.DataFrame | None = None,
    published: pd.DataFrame | None = None,
    tau: float = 2.5,
    k: int = 3,
    batch: int = 1,
    c: float = 1.8,
    where: str = "recorded",
) -> Explorer:
    """Sliders for τ, k, batch (the record's concurrencies) and the step-cost ratio c over the
    speed-up model; `where` names the record the dashed line comes from."""
    import ipywidgets as w

    batches = (
        sorted(int(b) for b in lab.concurrency.unique()) if lab is not None else [1, 4, 16, 64]
    )
    controls = {
        "tau": w.FloatSlider(value=tau, min=1.0, max=k + 1.0, step=0.05, description="τ"),
        "k": w.IntSlider(value=k, min=1, max=7, description="k"),
        "batch": w.SelectionSlider(options=batches, value=batch, description="batch"),
        "c": w.FloatSlider(value=c, min=0.8, max=4.0, step=0.05, description="c(k, batch)"),
    }

    def clamp_tau(ex: Explorer, name: str) -> None:
        if name == "k":
            ex.controls["tau"].max = ex.controls["k"].value + 1.0

    return Explorer(
        "Speed-up model: does speculation pay?",
        controls,
        lambda **v: _speedup_state(**v, lab=lab, published=published, where=where),
        clamp_tau,
    )
