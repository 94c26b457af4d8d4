"""chapters.ch03_acceptance.figures: acceptance figures and the token-coloured view, from synthetic
tables."""

from __future__ import annotations

from chapters.ch03_acceptance import experiments as ex
from chapters.ch03_acceptance import figures as ap
from tests.analytics.test_sweeps import RUNS


def test_figures_are_drawn() -> None:
    fig = ap.plot_k_sweep(ex._acceptance_vs_k(RUNS), ex._per_position_vs_k(RUNS))
    assert [ax.get_title() for ax in fig.axes] == ["τ vs k", "conditional acceptance per position"]
    temps = ex._acceptance_vs_temperature({0.0: RUNS[3]["code"], 0.7: RUNS[3]["creative"]}, 3)
    fig = ap.plot_category_temperature(ex._acceptance_by_category(RUNS), temps, 3)
    assert len(fig.axes) == 2


def test_token_html() -> None:
    pieces, labels = ["{", '\n  "a"', ": 1", "<b>"], ["prefill", "accepted", "correction", "bonus"]
    page = ap.token_html(pieces, labels)
    assert page.count("<span title=") == 4 and "&lt;b&gt;" in page
    assert "accepted draft (1)" in page and "bonus token (1)" in page
