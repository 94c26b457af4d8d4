"""helpers.eagle3.checkpoint: the config writer and loader round-trip."""

from __future__ import annotations

import pytest
import torch

from helpers.eagle3.checkpoint import (
    WEIGHTS_FILE,
    _shape_from_config,
    drafter_config,
    load_drafter,
    save_drafter,
)
from helpers.eagle3.drafter import DrafterShape, Eagle3Drafter
from helpers.eagle3.taps import drafter_aux_layer_ids

SHAPE = DrafterShape(
    hidden_size=32,
    vocab_size=50,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=16,
    intermediate_size=64,
    target_hidden_size=32,
)


def test_config_round_trips_through_disk(tmp_path) -> None:
    torch.manual_seed(0)
    d = Eagle3Drafter(SHAPE)
    config = drafter_config(SHAPE, [2, 4, 5], "data/tiny-qwen3-moe", num_speculative_tokens=3)
    save_drafter(d, tmp_path, config)
    loaded, config2 = load_drafter(tmp_path)
    assert config2 == config and _shape_from_config(config2) == SHAPE
    assert drafter_aux_layer_ids(config2) == (2, 4, 5)
    for name, tensor in d.state_dict().items():
        assert torch.equal(tensor, loaded.state_dict()[name])


def test_config_has_what_vllm_reads() -> None:
    config = drafter_config(SHAPE, [2, 4, 5], "v")
    assert config["speculators_model_type"] == "eagle3"
    assert config["transformer_layer_config"]["model_type"] == "llama"
    assert config["draft_vocab_size"] == 50 and config["target_hidden_size"] == 32
    assert config["speculators_config"]["verifier"]["name_or_path"] == "v"


def test_a_reduced_vocabulary_drafter_round_trips_with_its_maps(tmp_path) -> None:
    shape = DrafterShape(**{**SHAPE.to_dict(), "draft_vocab_size": 4})
    d = Eagle3Drafter(shape)
    d.d2t = torch.tensor([0, 1, 5, 40])
    d.t2d = torch.zeros(50, dtype=torch.bool)
    d.t2d[[0, 2, 7, 43]] = True
    config = drafter_config(shape, [2, 4, 5], "v")
    assert (
        config["draft_vocab_size"] == 4 and config["transformer_layer_config"]["vocab_size"] == 50
    )
    save_drafter(d, tmp_path, config)
    loaded, _ = load_drafter(tmp_path)
    assert loaded.shape == shape
    assert torch.equal(loaded.d2t, d.d2t) and torch.equal(loaded.t2d, d.t2d)


@pytest.mark.parametrize("keep", [100, 8, 0])
def test_a_damaged_weights_file_is_named(tmp_path, keep: int) -> None:
    save_drafter(Eagle3Drafter(SHAPE), tmp_path, drafter_config(SHAPE, [0, 1, 2], "v"))
    weights = tmp_path / WEIGHTS_FILE
    weights.write_bytes(weights.read_bytes()[:keep])
    with pytest.raises(ValueError, match="is not a readable safetensors file") as err:
        load_drafter(tmp_path)
    assert str(err.value).startswith(str(weights)) and "\n" not in str(err.value)
