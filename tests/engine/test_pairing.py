"""Pairing checks: a healthy tiny pair passes; each deliberately broken pair fails by name."""

from __future__ import annotations

import json
from pathlib import Path

import huggingface_hub
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from helpers.common.configs import read_config
from helpers.engine.pairing import (
    PairingError,
    check_pair,
    local_tensor,
    safetensors_header,
    validate_pair,
    weight_index,
)

# --------------------------------------------------------------------------- editing helpers


def read_json(folder: Path) -> dict:
    """A model folder's config.json."""
    return json.loads((folder / "config.json").read_text())


def edit_config(folder: Path, **changes) -> dict:
    """Update top-level keys of config.json (None deletes); returns the new config."""
    config = read_json(folder)
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return config


def edit_layer_config(folder: Path, **changes) -> None:
    """Update keys of the drafter's transformer_layer_config."""
    config = read_json(folder)
    config["transformer_layer_config"].update(changes)
    (folder / "config.json").write_text(json.dumps(config, indent=2))


def edit_weights(folder: Path, **tensors) -> None:
    """Replace/add (tensor) or drop (None) drafter weights in model.safetensors."""
    path = folder / "model.safetensors"
    weights = load_file(str(path))
    for name, tensor in tensors.items():
        if tensor is None:
            weights.pop(name, None)
        else:
            weights[name] = tensor
    save_file(weights, str(path))


def sizes(pair) -> tuple[int, int, int]:
    """(verifier hidden_size, vocab_size, num_hidden_layers)."""
    config = read_json(pair.verifier)
    return config["hidden_size"], config["vocab_size"], config["num_hidden_layers"]


def only(report, code: str):
    """The single problem with `code` (fails if absent)."""
    found = [p for p in report.problems if p.code == code]
    assert found, f"no {code} in {report.codes()}"
    return found[0]


# --------------------------------------------------------------------------- healthy


def test_healthy_pair_passes(tiny_pair) -> None:
    report = check_pair(
        tiny_pair.verifier,
        tiny_pair.drafter,
        "eagle3",
        max_model_len=1024,
        verifier_name="data/tiny-qwen3-moe",
    )
    assert report.ok and report.errors == []
    assert report.aux_layers is not None and len(set(report.aux_layers)) == len(report.aux_layers)


def test_header_parse_matches_safetensors(tiny_pair) -> None:
    path = tiny_pair.drafter / "model.safetensors"
    header = safetensors_header(path)
    with safe_open(str(path), "pt") as f:
        for name in f.keys():
            assert tuple(header[name]["shape"]) == tuple(f.get_slice(name).get_shape())


def test_sharded_drafter_is_read_through_its_index(tiny_pair) -> None:
    weights = load_file(str(tiny_pair.drafter / "model.safetensors"))
    names = sorted(weights)
    half = len(names) // 2
    shards = {
        "model-00001-of-00002.safetensors": names[:half],
        "model-00002-of-00002.safetensors": names[half:],
    }
    for shard, shard_names in shards.items():
        save_file({n: weights[n] for n in shard_names}, str(tiny_pair.drafter / shard))
    weight_map = {n: shard for shard, shard_names in shards.items() for n in shard_names}
    (tiny_pair.drafter / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": weight_map})
    )
    (tiny_pair.drafter / "model.safetensors").unlink()
    assert set(weight_index(tiny_pair.drafter)) == set(names)
    assert validate_pair(tiny_pair.verifier, tiny_pair.drafter).ok


# --------------------------------------------------------------------------- broken pairs


def test_method_must_be_eagle3(tiny_pair) -> None:
    report = validate_pair(tiny_pair.verifier, tiny_pair.drafter, method="eagle")
    assert "set method='eagle3'" in only(report, "method_not_eagle3").message


def test_target_hidden_size_from_another_verifier(tiny_pair) -> None:
    hidden, _, _ = sizes(tiny_pair)
    edit_config(tiny_pair.drafter, target_hidden_size=2 * hidden)
    with pytest.raises(PairingError, match="target_hidden_size_mismatch") as err:
        check_pair(tiny_pair.verifier, tiny_pair.drafter)
    assert f"target_hidden_size {2 * hidden} ≠ verifier hidden_size {hidden}" in str(err.value)
    assert "trained for another verifier" in str(err.value)


def test_drafter_hidden_size_mismatch(tiny_pair) -> None:
    hidden, _, _ = sizes(tiny_pair)
    edit_layer_config(tiny_pair.drafter, hidden_size=2 * hidden)
    report = validate_pair(tiny_pair.verifier, tiny_pair.drafter)
    assert (
        f"drafter hidden_size {2 * hidden} ≠ verifier hidden_size {hidden}"
        in only(report, "drafter_hidden_size_mismatch").message
    )


def test_fc_sized_for_two_taps(tiny_pair) -> None:
    hidden, _, _ = sizes(tiny_pair)
    edit_weights(tiny_pair.drafter, **{"fc.weight": torch.zeros(hidden, 2 * hidden)})
    report = validate_pair(tiny_pair.verifier, tiny_pair.drafter)
    message = only(report, "fc_in_features_mismatch").message
    assert f"takes {2 * hidden} inputs but 3 aux layers" in message
    assert "fc_aux_count_undeclared" in report.codes()  # vLLM's llama head would build 3 × hidden


def test_fc_missing(tiny_pair) -> None:
    edit_weights(tiny_pair.drafter, **{"fc.weight": None})
    assert (
        "no fc.weight"
        in only(validate_pair(tiny_pair.verifier, tiny_pair.drafter), "fc_missing").message
    )


def test_reduced_draft_vocab_without_d2t(tiny_pair) -> None:
    hidden, vocab, _ = sizes(tiny_pair)
    draft = vocab // 4
    edit_config(tiny_pair.drafter, draft_vocab_size=draft)
    edit_weights(
        tiny_pair.drafter,
        **{"lm_head.weight": torch.zeros(draft, hidden), "d2t": None, "t2d": None},
    )
    report = validate_pair(tiny_pair.verifier, tiny_pair.drafter)
    assert f"draft_vocab_size {draft} < vocab_size {vocab}" in only(report, "d2t_missing").message
    assert only(report, "t2d_missing").severity == "warning"


def test_d2t_and_t2d_with_wrong_shapes(tiny_pair) -> None:
    hidden, vocab, _ = sizes(tiny_pair)
    draft = vocab // 4
    edit_config(tiny_pair.drafter, draft_vocab_size=draft)
    edit_weights(
        tiny_pair.drafter,
        **{
            "lm_head.weight": torch.zeros(draft, hidden),
            "d2t": torch.zeros(draft + 1, dtype=torch.int64),
            "t2d": torch.zeros(vocab // 2, dtype=torch.bool),
        },
    )
    report = validate_pair(tiny_pair.verifier, tiny_pair.drafter)
    assert f"expected [{draft}]" in only(report, "d2t_shape_mismatch").message
    assert f"expected [{vocab}]" in only(report, "t2d_shape_mismatch").message


def test_reduced_draft_vocab_with_maps_passes(tiny_pair) -> None:
    hidden, vocab, _ = sizes(tiny_pair)
    draft = vocab // 4
    edit_config(tiny_pair.drafter, draft_vocab_size=draft)
    edit_weights(
        tiny_pair.drafter,
        **{
            "lm_head.weight": torch.zeros(draft, hidden),
            "d2t": torch.zeros(draft, dtype=torch.int64),
            "t2d": torch.zeros(vocab, dtype=torch.bool),
        },
    )
    assert check_pair(tiny_pair.verifier, tiny_pair.drafter).ok


def test_d2t_values_must_land_inside_the_verifier_vocab(tiny_pair) -> None:
    hidden, vocab, _ = sizes(tiny_pair)
    draft = vocab // 4
    edit_config(tiny_pair.drafter, draft_vocab_size=draft)
    # offsets: draft id i -> verifier id i + d2t[i]; the last id overshoots, two ids collide
    d2t = torch.zeros(draft, dtype=torch.int64)
    d2t[-1] = vocab
    d2t[1] = -1
    edit_weights(
        tiny_pair.drafter,
        **{
            "lm_head.weight": torch.zeros(draft, hidden),
            "d2t": d2t,
            "t2d": torch.zeros(vocab, dtype=torch.bool),
        },
    )
    report = validate_pair(tiny_pair.verifier, tiny_pair.drafter)
    assert f"1 of {draft} d2t entries" in only(report, "d2t_out_of_range").message
    assert only(report, "d2t_duplicate_targets").severity == "warning"
    assert local_tensor(tiny_pair.drafter, "d2t").tolist() == d2t.tolist()
    assert local_tensor(tiny_pair.drafter, "no-such-tensor") is None
    assert local_tensor("RedHatAI/some-hub-drafter", "d2t") is None


def test_lm_head_rows_disagree_with_draft_vocab(tiny_pair) -> None:
    hidden, vocab, _ = sizes(tiny_pair)
    edit_weights(tiny_pair.drafter, **{"lm_head.weight": torch.zeros(vocab // 2, hidden)})
    report = validate_pair(tiny_pair.verifier, tiny_pair.drafter)
    assert (
        f"has {vocab // 2} rows but draft_vocab_size is"
        in only(report, "lm_head_rows_mismatch").message
    )


def test_drafter_from_another_tokenizer(tiny_pair) -> None:
    _, vocab, _ = sizes(tiny_pair)
    edit_layer_config(tiny_pair.drafter, vocab_size=2 * vocab)
    report = validate_pair(tiny_pair.verifier, tiny_pair.drafter)
    assert (
        f"drafter vocab_size {2 * vocab} ≠ verifier vocab_size {vocab}"
        in only(report, "vocab_size_mismatch").message
    )


def test_shallow_verifier_default_taps_collide(tiny_pair) -> None:
    edit_config(tiny_pair.verifier, num_hidden_layers=6)
    edit_config(tiny_pair.drafter, eagle_aux_hidden_state_layer_ids=None)
    with pytest.raises(PairingError, match="aux_layers_invalid") as err:
        check_pair(tiny_pair.verifier, tiny_pair.drafter)
    assert "(2, 3, 3)" in str(err.value) and "eagle_aux_hidden_state_layer_ids" in str(err.value)


def test_aux_layer_id_out_of_range(tiny_pair) -> None:
    _, _, layers = sizes(tiny_pair)
    edit_config(tiny_pair.drafter, eagle_aux_hidden_state_layer_ids=[2, 4, layers])
    report = validate_pair(tiny_pair.verifier, tiny_pair.drafter)
    assert f"outside 0..{layers - 1}" in only(report, "aux_layers_invalid").message


def test_max_model_len_beyond_drafter_positions(tiny_pair) -> None:
    limit = read_json(tiny_pair.drafter)["transformer_layer_config"]["max_position_embeddings"]
    report = validate_pair(tiny_pair.verifier, tiny_pair.drafter, max_model_len=2 * limit)
    problem = only(report, "max_model_len_exceeds_drafter")
    assert f"max_model_len {2 * limit} > drafter max_position_embeddings {limit}" in problem.message
    assert problem.severity == "warning" and report.ok  # vLLM 0.31 stretches the drafter itself


def test_other_verifier_name_is_only_a_warning(tiny_pair) -> None:
    report = check_pair(tiny_pair.verifier, tiny_pair.drafter, verifier_name="Qwen/Qwen3-30B-A3B")
    problem = only(report, "verifier_name_mismatch")
    assert problem.severity == "warning" and "'Qwen/Qwen3-30B-A3B'" in problem.message


def test_relative_path_of_the_same_verifier_matches(tiny_pair) -> None:
    for name in ("data/tiny-qwen3-moe", "./data/tiny-qwen3-moe/", str(tiny_pair.verifier)):
        report = validate_pair(tiny_pair.verifier, tiny_pair.drafter, verifier_name=name)
        assert "verifier_name_mismatch" not in report.codes()


def test_check_pair_lists_every_error_one_per_line(tiny_pair) -> None:
    hidden, _, _ = sizes(tiny_pair)
    edit_config(tiny_pair.drafter, target_hidden_size=2 * hidden)
    with pytest.raises(PairingError) as err:
        check_pair(tiny_pair.verifier, tiny_pair.drafter, method="eagle", max_model_len=10**6)
    lines = str(err.value).splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "method_not_eagle3",
        "target_hidden_size_mismatch",
    ]


def test_hub_config_offline_is_one_line(tiny_pair, monkeypatch) -> None:
    def offline(*args, **kwargs):
        raise huggingface_hub.errors.LocalEntryNotFoundError("connection refused ... long trace")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline)
    with pytest.raises(FileNotFoundError, match="LocalEntryNotFoundError.*offline") as err:
        read_config("Qwen/Qwen3-30B-A3B")
    assert "\n" not in str(err.value)
    report = validate_pair(tiny_pair.verifier, "RedHatAI/some-speculator.eagle3")
    assert report.codes() == ["config_unavailable"]
