"""chapters.ch02_engine.diagrams: the draft-and-verify schematic, the profiles' verifier stacks and
the taps figure."""

from __future__ import annotations

import pytest

from chapters.ch02_engine.diagrams import draft_verify_round, known_stacks, plot_aux_layers
from helpers.common import profiles


def test_plot_aux_layers_marks_taps_and_collisions() -> None:
    stacks = {"tiny-qwen3-moe": 8, "Qwen3-30B-A3B": 48, "Qwen3-235B-A22B": 94, "too-shallow": 6}
    fig = plot_aux_layers(stacks)
    labels = {t.get_text() for t in fig.axes[0].texts}
    assert {"hidden_states[2]", "hidden_states[24]", "hidden_states[91]"} <= labels
    assert "hidden_states[3] ×2: collides" in labels


def test_plot_aux_layers_defaults_to_the_profiles_stacks() -> None:
    stacks = known_stacks()
    fig = plot_aux_layers()
    rows = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert sorted(rows) == sorted(f"{name}\nL={n}" for name, n in stacks.items())


def test_draft_verify_round_draws_one_box_per_emitted_token() -> None:
    fig = draft_verify_round(3, accepted=2)
    labels = {t.get_text() for t in fig.axes[0].texts}
    assert {"d1=v1", "d2=v2", "v3"} <= labels and "v4" in labels
    with pytest.raises(ValueError, match="accepted must be between 0 and k=3"):
        draft_verify_round(3, accepted=4)


def test_dataflow_names_the_installed_functions_and_the_draft_vocab() -> None:
    from chapters.ch02_engine.diagrams import _DATAFLOW_NAMES, plot_eagle3_dataflow

    fig = plot_eagle3_dataflow(8, (2, 4, 5), 128, 2048, 512)
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert set(_DATAFLOW_NAMES.values()) <= texts
    assert any("d2t" in t for t in texts) and any("384" in t for t in texts)
    full = plot_eagle3_dataflow(8, (2, 4, 5), 128, 2048, 2048)
    assert not any("d2t →" in t.get_text() for t in full.axes[0].texts)


def test_dataflow_names_the_verifiers_own_model_class() -> None:
    from chapters.ch02_engine.diagrams import _DATAFLOW_NAMES, plot_eagle3_dataflow

    name = "Qwen3NextModel.forward → _maybe_add_hidden_state"
    fig = plot_eagle3_dataflow(48, (2, 24, 45), 2048, 151936, 32000, names={"taps": name})
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert name in texts and _DATAFLOW_NAMES["taps"] not in texts
    assert _DATAFLOW_NAMES["fc"] in texts


def test_known_stacks_has_one_row_per_distinct_verifier() -> None:
    stacks = known_stacks()
    loaded = [profiles.load_profile(n) for n in profiles._available_profiles()]
    distinct = {
        (p.verifier_architecture, p.verifier_layers, p.verifier_hidden_size) for p in loaded
    }
    assert len(stacks) == len(distinct) < len(loaded), (
        "the 30B hub and shape profiles are one stack"
    )
    assert set(stacks) <= {p.name for p in loaded}
    assert all(stacks[p.name] == p.verifier_layers for p in loaded if p.name in stacks)
    assert list(stacks.values()) == sorted(stacks.values()), "shallowest first"
    assert "qwen3-30b-a3b" in stacks and "qwen3-30b-a3b-shape" not in stacks
    shape = known_stacks("qwen3-30b-a3b-shape")
    assert shape["qwen3-30b-a3b-shape"] == 48 and "qwen3-30b-a3b" not in shape
    assert len(shape) == len(stacks), "naming a row after a profile keeps one row per verifier"


def test_known_stacks_names_the_235b_row_after_the_shape_when_asked() -> None:
    assert "qwen3-235b-a22b" in known_stacks() and "qwen3-235b-a22b-shape" not in known_stacks()
    named = known_stacks("qwen3-235b-a22b-shape")
    assert named["qwen3-235b-a22b-shape"] == 94 and "qwen3-235b-a22b" not in named
    assert len(named) == len(known_stacks())


def test_an_added_profiles_verifier_is_a_stack_of_its_own(added_profile: str) -> None:
    """It has the depth and width of Qwen3-30B-A3B but another architecture; the figure draws it."""
    stacks = known_stacks()
    assert stacks[added_profile] == 48 and stacks["qwen3-30b-a3b"] == 48
    rows = [t.get_text() for t in plot_aux_layers().axes[0].get_yticklabels()]
    assert f"{added_profile}\nL=48" in rows
