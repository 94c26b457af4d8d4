"""The tests' tiny-pair fixtures come from the recipe, and the recipe still writes what data/ ships."""

from __future__ import annotations

import pytest

from helpers.common.configs import read_config
from helpers.common.paths import DATA_DIR
from helpers.engine.pairing import safetensors_header
from tests import conftest

#: Keys of the verifier config the trained tokenizer sets (its end-of-text and padding ids) or
#: save_pretrained adds (the architecture); every other key comes from the recipe's config.
_FROM_SAVING = {"architectures", "eos_token_id", "pad_token_id"}


def shipped(name: str) -> dict:
    """data/<name>/config.json, skipping where data/ does not ship the pair."""
    if not (DATA_DIR / name / "config.json").is_file():
        pytest.skip(f"data/{name} is not shipped here")
    return read_config(DATA_DIR / name)


def test_the_drafter_config_fixture_is_the_shipped_one() -> None:
    assert conftest.DRAFTER_CONFIG == shipped(conftest.DRAFTER_NAME)


def test_the_recipe_verifier_config_is_the_shipped_one() -> None:
    ours = conftest.recipe_configs()[0].to_dict()
    theirs = shipped(conftest.VERIFIER_NAME)
    differ = {k for k in theirs if ours.get(k) != theirs[k]}  # what saving leaves at a default
    assert differ <= _FROM_SAVING, {k: (ours.get(k), theirs.get(k)) for k in differ}


def test_the_drafter_tensor_shapes_are_the_shipped_checkpoints() -> None:
    shipped(conftest.DRAFTER_NAME)
    header = safetensors_header(DATA_DIR / conftest.DRAFTER_NAME / "model.safetensors")
    assert {n: tuple(h["shape"]) for n, h in header.items()} == conftest.drafter_tensor_shapes()


def test_the_stand_in_pair_pairs_like_the_shipped_one(tmp_path) -> None:
    from helpers.engine.pairing import validate_pair

    pair = conftest.build_stand_in_pair(tmp_path)
    assert read_config(pair.drafter) == conftest.DRAFTER_CONFIG
    report = validate_pair(pair.verifier, pair.drafter)
    assert report.ok, report.summary()


def test_only_the_recipes_names_are_computed_on_demand() -> None:
    assert getattr(conftest, "pytest_plugins", None) is None  # what pytest asks a conftest
    with pytest.raises(AttributeError, match="HIDDEN"):
        conftest.HIDDEN  # noqa: B018
