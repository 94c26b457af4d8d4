"""02's aux-layer figure draws every profile, one added as a JSON file too."""

from __future__ import annotations

from chapters.ch02_engine.diagrams import plot_aux_layers


def test_an_added_profile_is_drawn(added_profile: str) -> None:
    """One more profile in data/profiles/ (tests/conftest.py's added_profile, 48 layers) gets its
    row in the figure."""
    rows = [t.get_text() for t in plot_aux_layers().axes[0].get_yticklabels()]
    assert f"{added_profile}\nL=48" in rows
