"""Notebook 08's exercises, each variant run at CI size by calling the same code its cells call
(what is not run here, and why, is listed in tests/test_exercises.py)."""

from __future__ import annotations

import pytest

from tests.support import needs_shipped

# ------------------------------------------------------------------------------------ notebook 08


@needs_shipped
def test_08_ex1_taps_one_layer_earlier_pass_the_validator(tiny, tmp_path) -> None:
    """AUX_SHIFT = -1: still inside the verifier, so the validator has nothing to say."""
    from helpers.engine.pairing import edited_copy, validate_pair

    taps = validate_pair(tiny.verifier_path(), tiny.drafter_path()).aux_layers
    earlier = edited_copy(
        tiny.drafter_path(),
        tmp_path / "earlier",
        eagle_aux_hidden_state_layer_ids=[t - 1 for t in taps],
    )
    report = validate_pair(tiny.verifier_path(), earlier)
    assert report.problems == [] and report.aux_layers == tuple(t - 1 for t in taps)


def test_08_ex4_a_schema_in_your_own_field_order() -> None:
    """The exercise's order builds a schema that requires every field, in that order."""
    pytest.importorskip("vllm")
    from chapters.ch08_low_acceptance import mismatch

    order = ("active", "name", "age", "city", "job", "pet", "id")
    schema = mismatch.with_field_order(mismatch.RECORDS_SCHEMA, order)
    params = mismatch.schema_sampling(32, schema)
    assert params.structured_outputs.json["items"]["required"] == list(order)
