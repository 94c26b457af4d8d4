"""helpers.eagle3.taps: vLLM's default EAGLE-3 taps, drafter overrides, one-line errors."""

from __future__ import annotations

import pytest

from helpers.eagle3.taps import aux_layers_for, default_aux_layers


@pytest.mark.parametrize(("layers", "taps"), [(8, (2, 4, 5)), (48, (2, 24, 45)), (94, (2, 47, 91))])
def test_default_aux_layers(layers: int, taps: tuple[int, ...]) -> None:
    assert default_aux_layers(layers) == taps
    assert aux_layers_for({"num_hidden_layers": layers}) == taps


@pytest.mark.parametrize("layers", [4, 5, 6])
def test_default_collides_for_shallow_verifiers(layers: int) -> None:
    with pytest.raises(ValueError, match="repeat a layer.*eagle_aux_hidden_state_layer_ids"):
        aux_layers_for({"num_hidden_layers": layers})


def test_default_out_of_range_for_two_layers() -> None:
    with pytest.raises(ValueError, match=r"outside 0\.\.1"):
        aux_layers_for({"num_hidden_layers": 2})


def test_drafter_override_wins() -> None:
    drafter = {"eagle_aux_hidden_state_layer_ids": [1, 3, 5]}
    assert aux_layers_for({"num_hidden_layers": 6}, drafter) == (1, 3, 5)
    assert aux_layers_for({"num_hidden_layers": 8}, drafter) == (1, 3, 5)
    nested = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 2]}}
    assert aux_layers_for({"num_hidden_layers": 8}, nested) == (0, 2)


def test_override_out_of_range_raises() -> None:
    with pytest.raises(ValueError, match=r"include \[8\]"):
        aux_layers_for({"num_hidden_layers": 8}, {"eagle_aux_hidden_state_layer_ids": [2, 4, 8]})
