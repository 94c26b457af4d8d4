"""helpers.analytics.figures: acceptance figures and the token-coloured view, from synthetic tables."""

from __future__ import annotations

from helpers.analytics import figures as ap
from helpers.analytics import sweeps as sw
from tests.analytics.test_sweeps import RUNS


def test_figures_are_drawn() -> None:
    fig = ap.plot_k_sweep(sw._acceptance_vs_k(RUNS), sw._per_position_vs_k(RUNS))
    assert [ax.get_title() for ax in fig.axes] == ["τ vs k", "conditional acceptance per position"]
    temps = sw._acceptance_vs_temperature({0.0: RUNS[3]["code"], 0.7: RUNS[3]["creative"]}, 3)
    fig = ap.plot_category_temperature(sw._acceptance_by_category(RUNS), temps, 3)
    assert len(fig.axes) == 2


def test_token_html_and_layout() -> None:
    pieces, labels = ["{", '\n  "a"', ": 1", "<b>"], ["prefill", "accepted", "correction", "bonus"]
    page = ap.token_html(pieces, labels)
    assert page.count("<span title=") == 4 and "&lt;b&gt;" in page
    assert "accepted draft (1)" in page and "bonus token (1)" in page
    runs = ap._layout(pieces, width=80)
    assert runs[0] == (0, 0, "{", 0) and runs[1] == (0, 1, "↵", 1) and runs[2] == (1, 0, '  "a"', 1)
    wrapped = ap._layout(["x" * 6] * 3, width=10)
    assert [r[0] for r in wrapped] == [0, 1, 2]


def test_token_figure() -> None:
    fig = ap.plot_token_colors(["a", "b\n", "c"], ["prefill", "accepted", "bonus"], "t")
    assert {t.get_text() for t in fig.axes[0].texts} >= {"a", "b", "c"}


def test_expert_union_figure_has_both_panels() -> None:
    import pandas as pd

    windows = pd.DataFrame(
        {
            "positions": [1, 2],
            "measured_union": [2.0, 3.0],
            "independent_union": [2.0, 3.5],
            "shared_bound": [2.0, 2.0],
        }
    )
    batches = pd.DataFrame(
        {
            "batch": [1, 2],
            "positions": [4, 4],
            "measured_union": [4.0, 5.0],
            "independent_union": [5.5, 7.2],
            "shared_union": [2.0, 3.5],
        }
    )
    fig = ap.plot_expert_union(windows, batches, experts=8)
    assert [ax.get_title() for ax in fig.axes] == ["one sequence", "B sequences x 4 positions"]
    assert all(len(ax.get_lines()) == 3 for ax in fig.axes)


def test_lab_heat_maps_from_the_shipped_h200_lab() -> None:
    import json

    import pandas as pd

    from helpers.common.paths import DATA_DIR

    lab = json.loads((DATA_DIR / "measurements" / "h200-moe-lab.json").read_text())
    # Provenance travels with the numbers: where, what stack, which command, which caveats.
    assert {"gpu", "vllm", "machine", "command", "workbook", "caveats"} <= set(lab)
    rows = pd.DataFrame(lab["rows"]).rename(columns={"k": "num_speculative_tokens"})
    spec = rows[rows.num_speculative_tokens > 0].assign(speedup=1.0, model_speedup=1.0)
    fig = ap._plot_lab_speedups(spec)
    assert [ax.get_title() for ax in fig.axes[:2]] == [
        "measured on the H200 (recorded)",
        "bytes model, independent routing",
    ]


def test_the_answer_figure_has_the_band_and_the_map() -> None:
    from chapters.ch06_moe import lab

    record = lab.load_lab()
    answer = lab.answer_table(record, lab.fit_step_model(lab.cells(record)), 0.4)
    fig = ap.plot_answer(answer, 3, "test")
    left, right = fig.axes[0], fig.axes[1]
    assert len(left.lines) == answer.num_speculative_tokens.nunique()
    assert len(left.collections) == answer.num_speculative_tokens.nunique()  # one band per k
    assert right.get_title().startswith("k = 3")
