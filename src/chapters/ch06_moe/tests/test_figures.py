"""chapters.ch06_moe.figures: the expert-union figure, the lab's heat maps and the answer figure."""

from __future__ import annotations

from chapters.ch06_moe import figures as ap


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


def test_the_answer_figure_has_the_band_and_the_map() -> None:
    from chapters.ch06_moe import answer, lab

    bands = answer.c_bands(lab.load_lab())
    fig = ap.plot_answer(bands, 3, "test")
    left, right = fig.axes[0], fig.axes[1]
    assert len(left.lines) == bands.num_speculative_tokens.nunique()
    assert len(left.collections) == bands.num_speculative_tokens.nunique()  # one band per k
    assert right.get_title().startswith("k = 3")
    assert bands.band_source.iloc[0] in left.get_title()
