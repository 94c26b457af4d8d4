"""helpers.analytics.calibration: the published real-pair τ file and the toy-vs-real sentence."""

from __future__ import annotations

import pytest

from helpers.analytics.calibration import _REFERENCE, calibration_sentence, published_taus


def test_every_record_has_a_source_conditions_and_a_date() -> None:
    records = published_taus()
    assert len({r.id for r in records}) == len(records) and _REFERENCE in {r.id for r in records}
    for r in records:
        assert r.url.startswith("https://") and r.date[:4].isdigit(), r.id
        assert r.verifier.startswith("Qwen") and r.k >= 1 and 1.0 < r.tau <= r.k + 1, r.id
        assert r.dataset and r.drafting and r.engine, r.id


def test_per_position_rates_add_up_to_the_published_tau() -> None:
    """A chain's τ is 1 + its per-position rates: the file's rates and τ agree (to rounding)."""
    for r in published_taus():
        if r.per_position is not None:
            assert r.tau_at(len(r.per_position)) == pytest.approx(r.tau, abs=0.002), r.id
            assert list(r.per_position) == sorted(r.per_position, reverse=True), r.id
    ref = next(r for r in published_taus() if r.id == _REFERENCE)
    assert ref.tau_at(3) == pytest.approx(1 + 0.5998 + 0.3769 + 0.2365)
    assert ref.release == "Instruct-2507" and "RedHatAI" in ref.drafter
    assert ref.tau_at(0) is None and ref.tau_at(ref.k + 1) is None


def test_the_sentence_is_computed_from_its_inputs() -> None:
    ref = next(r for r in published_taus() if r.id == _REFERENCE)
    text = calibration_sentence(3.6, [0.9, 0.85, 0.8], 3, 2048, 4)
    at3 = ref.tau_at(3)
    assert "τ 3.60 at k=3" in text and f"{3.6 / at3:.1f}×" in text and f"{at3:.2f}" in text
    assert "90%" in text and f"{ref.per_position[0]:.0%}" in text
    assert "4 templated synthetic tasks" in text and "2,048-token" in text
    assert "T = 0.0" in text and ref.source in text and ref.date in text
    # a k above the reference's own compares at the reference's k
    assert f"at k={ref.k} (" in calibration_sentence(5.0, [0.9], 7, 2048, 4)
    with pytest.raises(ValueError, match="per-position"):
        calibration_sentence(3.0, [], 3, 2048, 4)
