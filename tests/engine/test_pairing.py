"""Pairing checks: a healthy tiny pair passes; each deliberately broken pair fails by name."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import huggingface_hub
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from helpers.common import configs
from helpers.common.configs import read_config
from helpers.engine.pairing import (
    _CPU_HEAD_SIZES,
    _EAGLE3_ARCHITECTURES,
    HeaderError,
    PairingError,
    _local_tensor,
    _weight_index,
    check_pair,
    safetensors_header,
    validate_pair,
)
from helpers.engine.vllm_source import model_class
from tests.conftest import drafter_tensor_shapes

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
    assert report.ok and report.problems == []  # no error and no warning either
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
    assert set(_weight_index(tiny_pair.drafter)) == set(names)
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
    assert _local_tensor(tiny_pair.drafter, "d2t").tolist() == d2t.tolist()
    assert _local_tensor(tiny_pair.drafter, "no-such-tensor") is None
    assert _local_tensor("RedHatAI/some-hub-drafter", "d2t") is None


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

    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):  # make test sets them for tiny
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(configs, "hub_reachable", lambda timeout: True)  # the probe answers
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", offline)
    with pytest.raises(FileNotFoundError, match="LocalEntryNotFoundError.*offline") as err:
        read_config("Qwen/Qwen3-30B-A3B")
    assert "\n" not in str(err.value)
    report = validate_pair(tiny_pair.verifier, "RedHatAI/some-speculator.eagle3")
    assert report.codes() == ["config_unavailable"]


# --------------------------------------------------------------------------- every tensor


def header_names(pair) -> list[str]:
    """The tensor names in the drafter's safetensors header."""
    return sorted(safetensors_header(pair.drafter / "model.safetensors"))


def sole_error(report, code: str):
    """The report's one and only problem, which must be the error `code`."""
    assert report.codes() == [code], report.summary()
    assert report.problems[0].severity == "error"
    return report.problems[0]


SHIPPED_TENSORS = [
    n for n in drafter_tensor_shapes() if n not in ("fc.weight", "lm_head.weight")
]  # fc and lm_head have their own checks (fc_in_features_mismatch, lm_head_rows_mismatch)


@pytest.mark.parametrize("name", SHIPPED_TENSORS)
def test_every_tensor_shape_is_checked(tiny_pair, name: str) -> None:
    shape = list(safetensors_header(tiny_pair.drafter / "model.safetensors")[name]["shape"])
    shape[-1] += 32  # one dimension off, as a hand-edited export would be
    edit_weights(tiny_pair.drafter, **{name: torch.zeros(shape)})
    problem = sole_error(
        validate_pair(tiny_pair.verifier, tiny_pair.drafter), "tensor_shape_mismatch"
    )
    assert problem.message.startswith(f"{name} has shape {shape} but the config implies")


@pytest.mark.parametrize("name", [n for n in drafter_tensor_shapes() if n != "lm_head.weight"])
def test_every_required_tensor_must_be_there(tiny_pair, name: str) -> None:
    edit_weights(tiny_pair.drafter, **{name: None})
    report = validate_pair(tiny_pair.verifier, tiny_pair.drafter)
    problem = sole_error(report, "fc_missing" if name == "fc.weight" else "tensor_missing")
    assert name in problem.message


def test_attention_shapes_follow_heads_times_head_dim(tiny_pair) -> None:
    hidden, _, _ = sizes(tiny_pair)
    layer = read_json(tiny_pair.drafter)["transformer_layer_config"]
    heads, hd = layer["num_attention_heads"], layer["head_dim"]
    # q_proj exported for one head too few: heads × head_dim rows are what vLLM builds
    edit_weights(
        tiny_pair.drafter,
        **{"layers.0.self_attn.q_proj.weight": torch.zeros((heads - 1) * hd, 2 * hidden)},
    )
    problem = sole_error(
        validate_pair(tiny_pair.verifier, tiny_pair.drafter), "tensor_shape_mismatch"
    )
    assert f"[{heads} heads × head_dim {hd}, 2 × hidden {hidden}]" in problem.message


def test_kv_heads_in_the_config_disagree_with_the_weights(tiny_pair) -> None:
    layer = read_json(tiny_pair.drafter)["transformer_layer_config"]
    edit_layer_config(tiny_pair.drafter, num_key_value_heads=2 * layer["num_key_value_heads"])
    report = validate_pair(tiny_pair.verifier, tiny_pair.drafter)
    assert set(report.codes()) == {"tensor_shape_mismatch"}
    named = sorted(p.message.split(" ")[0] for p in report.problems)
    assert named == ["layers.0.self_attn.k_proj.weight", "layers.0.self_attn.v_proj.weight"]


def test_a_tensor_vllm_has_no_parameter_for(tiny_pair) -> None:
    hidden, _, _ = sizes(tiny_pair)
    edit_weights(tiny_pair.drafter, **{"layers.1.mlp.up_proj.weight": torch.zeros(256, hidden)})
    problem = sole_error(validate_pair(tiny_pair.verifier, tiny_pair.drafter), "tensor_unexpected")
    assert (
        "layers.1.mlp.up_proj.weight" in problem.message
        and "no module or parameter" in problem.message
    )


def test_qwen3_norms_in_a_llama_drafter_are_unexpected(tiny_pair) -> None:
    edit_weights(tiny_pair.drafter, **{"layers.0.self_attn.q_norm.weight": torch.ones(32)})
    sole_error(validate_pair(tiny_pair.verifier, tiny_pair.drafter), "tensor_unexpected")


def test_a_qwen3_drafter_needs_its_q_and_k_norms(tiny_pair) -> None:
    edit_layer_config(tiny_pair.drafter, model_type="qwen3")
    report = validate_pair(tiny_pair.verifier, tiny_pair.drafter)
    assert report.codes() == ["tensor_missing", "tensor_missing"]
    assert "q_norm" in report.problems[0].message and "k_norm" in report.problems[1].message
    edit_weights(
        tiny_pair.drafter,
        **{f"layers.0.self_attn.{n}.weight": torch.ones(32) for n in ("q_norm", "k_norm")},
    )
    assert validate_pair(tiny_pair.verifier, tiny_pair.drafter).problems == []


def test_a_bias_vllm_ignores_is_a_warning(tiny_pair) -> None:
    hidden, _, _ = sizes(tiny_pair)
    edit_weights(tiny_pair.drafter, **{"fc.bias": torch.zeros(hidden)})
    report = validate_pair(tiny_pair.verifier, tiny_pair.drafter)
    assert report.codes() == ["tensor_ignored"] and report.ok


def test_input_norm_without_norm_before_fc_is_dropped_by_vllm(tiny_pair) -> None:
    hidden, _, _ = sizes(tiny_pair)
    edit_weights(tiny_pair.drafter, **{"input_norm.weight": torch.ones(3 * hidden)})
    problem = sole_error(validate_pair(tiny_pair.verifier, tiny_pair.drafter), "tensor_ignored")
    assert "norm_before_fc" in problem.message
    edit_config(tiny_pair.drafter, norm_before_fc=True)
    assert validate_pair(tiny_pair.verifier, tiny_pair.drafter).problems == []


def test_integer_weights_are_named(tiny_pair) -> None:
    hidden, _, _ = sizes(tiny_pair)
    edit_weights(tiny_pair.drafter, **{"norm.weight": torch.ones(hidden, dtype=torch.int32)})
    problem = sole_error(
        validate_pair(tiny_pair.verifier, tiny_pair.drafter), "tensor_dtype_mismatch"
    )
    assert "norm.weight is I32" in problem.message


def test_d2t_with_a_full_vocabulary(tiny_pair) -> None:
    _, vocab, _ = sizes(tiny_pair)
    edit_weights(tiny_pair.drafter, d2t=torch.zeros(vocab, dtype=torch.int64))
    problem = sole_error(validate_pair(tiny_pair.verifier, tiny_pair.drafter), "d2t_unexpected")
    assert "full_vocab_d2t" in problem.message


def test_lm_head_may_be_shared_only_for_a_full_vocabulary(tiny_pair) -> None:
    hidden, vocab, _ = sizes(tiny_pair)
    edit_weights(tiny_pair.drafter, **{"lm_head.weight": None})
    assert validate_pair(tiny_pair.verifier, tiny_pair.drafter).problems == []  # vLLM shares it
    draft = vocab // 4
    edit_config(tiny_pair.drafter, draft_vocab_size=draft)
    edit_weights(
        tiny_pair.drafter,
        d2t=torch.zeros(draft, dtype=torch.int64),
        t2d=torch.zeros(vocab, dtype=torch.bool),
    )
    sole_error(validate_pair(tiny_pair.verifier, tiny_pair.drafter), "lm_head_missing")


def test_embed_tokens_is_optional_but_checked(tiny_pair) -> None:
    hidden, vocab, _ = sizes(tiny_pair)
    edit_weights(tiny_pair.drafter, **{"embed_tokens.weight": torch.zeros(vocab, hidden)})
    assert validate_pair(tiny_pair.verifier, tiny_pair.drafter).problems == []
    edit_weights(tiny_pair.drafter, **{"embed_tokens.weight": torch.zeros(vocab // 2, hidden)})
    sole_error(validate_pair(tiny_pair.verifier, tiny_pair.drafter), "tensor_shape_mismatch")


def test_legacy_midlayer_names_are_accepted(tiny_pair) -> None:
    """vLLM renames the original EAGLE code's `midlayer.` to `layers.0.` on load."""
    weights = load_file(str(tiny_pair.drafter / "model.safetensors"))
    renamed = {n.replace("layers.0.", "midlayer."): t for n, t in weights.items()}
    save_file(renamed, str(tiny_pair.drafter / "model.safetensors"))
    assert validate_pair(tiny_pair.verifier, tiny_pair.drafter).problems == []


# --------------------------------------------------------------------------- speculators format


def test_layer_type_vllm_cannot_build(tiny_pair) -> None:
    edit_layer_config(tiny_pair.drafter, model_type="mistral")
    problem = sole_error(
        validate_pair(tiny_pair.verifier, tiny_pair.drafter), "drafter_arch_unsupported"
    )
    assert "'mistral'" in problem.message and "llama, qwen3" in problem.message


def test_a_non_speculators_drafter_is_checked_by_its_architecture(tiny_pair) -> None:
    config = read_json(tiny_pair.drafter)
    flat = {
        **config["transformer_layer_config"],
        "architectures": ["LlamaForCausalLMEagle3"],
        "draft_vocab_size": config["draft_vocab_size"],
        "target_hidden_size": config["target_hidden_size"],
        "eagle_aux_hidden_state_layer_ids": config["eagle_aux_hidden_state_layer_ids"],
    }
    (tiny_pair.drafter / "config.json").write_text(json.dumps(flat))
    assert validate_pair(tiny_pair.verifier, tiny_pair.drafter).problems == []
    edit_config(tiny_pair.drafter, architectures=["MistralForCausalLMEagle3"])
    problem = sole_error(
        validate_pair(tiny_pair.verifier, tiny_pair.drafter), "drafter_arch_unsupported"
    )
    assert "'MistralForCausalLMEagle3'" in problem.message


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        ({"proposal_methods": []}, "proposal_methods[0].speculative_tokens"),
        ({"proposal_methods": [{"proposal_type": "greedy"}]}, "speculative_tokens"),
        ({"verifier": {"architectures": ["Qwen3MoeForCausalLM"]}}, "verifier.name_or_path"),
    ],
)
def test_speculators_fields_vllm_reads(tiny_pair, edit: dict, path: str) -> None:
    config = read_json(tiny_pair.drafter)
    edit_config(tiny_pair.drafter, speculators_config={**config["speculators_config"], **edit})
    problem = sole_error(
        validate_pair(tiny_pair.verifier, tiny_pair.drafter), "speculators_field_missing"
    )
    assert path in problem.message


def test_speculators_type_without_speculators_config(tiny_pair) -> None:
    edit_config(tiny_pair.drafter, speculators_config=None)
    sole_error(validate_pair(tiny_pair.verifier, tiny_pair.drafter), "speculators_field_missing")


def test_missing_transformer_layer_config(tiny_pair) -> None:
    edit_config(tiny_pair.drafter, transformer_layer_config=None)
    problem = sole_error(
        validate_pair(tiny_pair.verifier, tiny_pair.drafter), "drafter_config_incomplete"
    )
    assert "transformer_layer_config" in problem.message


def test_a_layer_size_left_to_llamas_default(tiny_pair) -> None:
    config = read_json(tiny_pair.drafter)
    del config["transformer_layer_config"]["intermediate_size"]
    (tiny_pair.drafter / "config.json").write_text(json.dumps(config))
    problem = sole_error(
        validate_pair(tiny_pair.verifier, tiny_pair.drafter), "drafter_config_incomplete"
    )
    assert "intermediate_size 11008" in problem.message


def test_head_dim_the_cpu_cannot_run(tiny_pair) -> None:
    # 8 heads × 16 = 128 and 4 kv heads × 16 = 64: the same tensors, a head size CPU attention lacks
    edit_layer_config(tiny_pair.drafter, num_attention_heads=8, num_key_value_heads=4, head_dim=16)
    problem = sole_error(
        validate_pair(tiny_pair.verifier, tiny_pair.drafter, gpu=False),
        "head_dim_unsupported_on_cpu",
    )
    assert "head_dim 16" in problem.message
    assert validate_pair(tiny_pair.verifier, tiny_pair.drafter, gpu=True).problems == []


# --------------------------------------------------------------------------- bad input: a report, never a raise


def test_config_that_is_not_json(tiny_pair) -> None:
    (tiny_pair.drafter / "config.json").write_text('{"speculators_model_type": "eagle3",')
    problem = sole_error(validate_pair(tiny_pair.verifier, tiny_pair.drafter), "config_unreadable")
    assert str(tiny_pair.drafter / "config.json") in problem.message


def test_config_that_is_not_an_object(tiny_pair) -> None:
    (tiny_pair.verifier / "config.json").write_text("[1, 2, 3]")
    problem = sole_error(validate_pair(tiny_pair.verifier, tiny_pair.drafter), "config_not_object")
    path = tiny_pair.verifier / "config.json"
    assert problem.message.startswith(f"verifier {path} holds a JSON list")


def test_verifier_config_missing_keys(tiny_pair) -> None:
    edit_config(tiny_pair.verifier, hidden_size=None, vocab_size=None)
    problem = sole_error(
        validate_pair(tiny_pair.verifier, tiny_pair.drafter), "verifier_config_incomplete"
    )
    assert "no hidden_size, vocab_size:" in problem.message


def test_a_verifier_size_of_the_wrong_type_is_named_with_its_file(tiny_pair) -> None:
    edit_config(tiny_pair.verifier, hidden_size=None, vocab_size="2048")
    problem = sole_error(
        validate_pair(tiny_pair.verifier, tiny_pair.drafter), "config_field_invalid"
    )
    assert problem.message == (
        f'verifier {tiny_pair.verifier / "config.json"}: vocab_size is "2048" (a string), '
        "expected a positive integer or null"
    ), "the type comes first: the missing hidden_size is named once the types are right"


def test_swapped_roles(tiny_pair) -> None:
    sole_error(validate_pair(tiny_pair.drafter, tiny_pair.verifier), "roles_swapped")


def test_a_drafter_as_the_verifier(tiny_pair) -> None:
    sole_error(validate_pair(tiny_pair.drafter, tiny_pair.drafter), "verifier_is_a_drafter")


def test_a_local_path_that_does_not_exist_fails_at_once(tiny_pair) -> None:
    for missing in (tiny_pair.drafter.parent / "no-such-drafter", "data/no-such-drafter"):
        problem = sole_error(validate_pair(tiny_pair.verifier, missing), "path_missing")
        assert "does not exist" in problem.message


def test_a_bare_name_never_asks_the_hub(tiny_pair, monkeypatch) -> None:
    def no_hub(*args, **kwargs):
        raise AssertionError("the hub was asked")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", no_hub)
    for name in ("tiny-drafter", "a/b/c", "../nowhere/x y"):
        problem = sole_error(validate_pair(tiny_pair.verifier, name), "path_missing")
        assert (
            "neither a folder here nor a hub id" in problem.message
            or "does not exist" in problem.message
        )


def write_raw(path: Path, data: bytes) -> None:
    """Replace a file's bytes."""
    path.write_bytes(data)


def raw_header(path: Path) -> tuple[dict, bytes]:
    """(header JSON object, tensor data bytes) of a safetensors file."""
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    return json.loads(blob[8 : 8 + n]), blob[8 + n :]


def with_header(path: Path, header: dict, data: bytes) -> None:
    """Write a safetensors file from a header object and data bytes (nothing checked)."""
    text = json.dumps(header).encode()
    write_raw(path, struct.pack("<Q", len(text)) + text + data)


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda b: b[:5], "fewer than the 8"),
        (lambda b: b"", "fewer than the 8"),
        (lambda b: bytes(range(256)) * 4, "announce a"),
        (lambda b: struct.pack("<Q", 12) + b"not json at!" + b[8:], "not JSON"),
        (lambda b: struct.pack("<Q", 2) + b"[]", "not an object"),
        (lambda b: b[: len(b) // 2], "truncated"),
        (lambda b: b[:100], "announce a"),
        (lambda b: b + b"\0" * 16, "16 bytes too many"),
    ],
    ids=["5-bytes", "empty", "garbage", "not-json", "json-list", "half", "100-bytes", "padded"],
)
def test_a_damaged_safetensors_file_is_one_named_error(tiny_pair, damage, says: str) -> None:
    path = tiny_pair.drafter / "model.safetensors"
    write_raw(path, damage(path.read_bytes()))
    problem = sole_error(validate_pair(tiny_pair.verifier, tiny_pair.drafter), "weights_corrupt")
    assert str(path) in problem.message and says in problem.message


def test_a_header_whose_offsets_disagree_with_its_shapes(tiny_pair) -> None:
    path = tiny_pair.drafter / "model.safetensors"
    header, data = raw_header(path)
    header["norm.weight"]["shape"] = [header["norm.weight"]["shape"][0] * 2]
    with_header(path, header, data)
    problem = sole_error(validate_pair(tiny_pair.verifier, tiny_pair.drafter), "weights_corrupt")
    assert "'norm.weight'" in problem.message and "data_offsets span" in problem.message


def test_a_header_whose_offsets_leave_a_gap(tiny_pair) -> None:
    """Valid entries, but one tensor moved 4 bytes on: safetensors refuses such a file."""
    path = tiny_pair.drafter / "model.safetensors"
    header, data = raw_header(path)
    last = max(
        (e for e in header.values() if isinstance(e, dict) and "data_offsets" in e),
        key=lambda e: e["data_offsets"],
    )
    last["data_offsets"] = [o + 4 for o in last["data_offsets"]]
    with_header(path, header, data + b"\0" * 4)
    problem = sole_error(validate_pair(tiny_pair.verifier, tiny_pair.drafter), "weights_corrupt")
    assert "leave a gap or overlap" in problem.message


def test_a_shard_index_naming_a_missing_shard(tiny_pair) -> None:
    weights = load_file(str(tiny_pair.drafter / "model.safetensors"))
    (tiny_pair.drafter / "model.safetensors").unlink()
    save_file(weights, str(tiny_pair.drafter / "model-00001-of-00002.safetensors"))
    weight_map = {n: "model-00001-of-00002.safetensors" for n in weights}
    weight_map["norm.weight"] = "model-00002-of-00002.safetensors"
    (tiny_pair.drafter / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": weight_map})
    )
    problem = sole_error(validate_pair(tiny_pair.verifier, tiny_pair.drafter), "weights_corrupt")
    assert "model-00002-of-00002.safetensors, which is missing" in problem.message


def test_no_weights_at_all_is_only_a_warning(tiny_pair) -> None:
    (tiny_pair.drafter / "model.safetensors").unlink()  # a shape-only drafter (load_format dummy)
    report = validate_pair(tiny_pair.verifier, tiny_pair.drafter)
    assert report.codes() == ["weights_unreadable"] and report.ok


def test_header_errors_are_named_by_safetensors_header(tmp_path) -> None:
    path = tmp_path / "x.safetensors"
    write_raw(path, b"\x00" * 3)
    with pytest.raises(HeaderError, match="fewer than the 8"):
        safetensors_header(path)


# --------------------------------------------------------------------------- copies of vLLM's tables


def test_eagle3_architectures_match_the_installed_registry() -> None:
    pytest.importorskip("vllm")
    from vllm import ModelRegistry

    installed = {}
    for arch in ModelRegistry.get_supported_archs():
        module, _ = model_class(arch)
        if module.rsplit(".", 1)[-1].endswith("_eagle3"):
            installed[arch] = module.rsplit(".", 1)[-1]
    assert installed == _EAGLE3_ARCHITECTURES


def test_cpu_head_sizes_match_the_installed_backend() -> None:
    pytest.importorskip("vllm")
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    assert tuple(CPUAttentionBackend.get_supported_head_sizes()) == _CPU_HEAD_SIZES


def test_taps_left_to_vllms_default_are_a_warning(tiny_pair) -> None:
    edit_config(tiny_pair.drafter, eagle_aux_hidden_state_layer_ids=None)
    report = validate_pair(tiny_pair.verifier, tiny_pair.drafter)
    assert report.codes() == ["aux_layers_defaulted"] and report.ok
    assert "(2, 4, 5)" in report.problems[0].message and "50170" in report.problems[0].message


# --------------------------------------------------------------------------- round three: what vLLM reads

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def with_tokenizer(pair) -> Path:
    """The tiny verifier's tokenizer files (and generation_config.json) copied into the pair's
    verifier folder, as a model folder ships them; returns that folder."""
    from helpers.common.paths import DATA_DIR

    for name in (*TOKENIZER_FILES, "generation_config.json"):
        (pair.verifier / name).write_bytes((DATA_DIR / "tiny-qwen3-moe" / name).read_bytes())
    return pair.verifier


def tokenizer_of(folder: Path) -> dict:
    """A folder's tokenizer.json."""
    return json.loads((folder / "tokenizer.json").read_text())


def write_tokenizer(folder: Path, content: dict) -> None:
    """Replace a folder's tokenizer.json."""
    (folder / "tokenizer.json").write_text(json.dumps(content))


def run(pair, **kwargs):
    """validate_pair as preflight runs it on a laptop: the CPU checks, max_model_len 1024."""
    return validate_pair(pair.verifier, pair.drafter, max_model_len=1024, gpu=False, **kwargs)


def test_the_shipped_pair_with_its_tokenizer_and_k_passes(tiny_pair) -> None:
    with_tokenizer(tiny_pair)
    report = run(tiny_pair, k=3)
    assert report.problems == [], report.summary()


@pytest.mark.parametrize("k", [129, 1_000_000])
def test_k_past_what_vllm_verifies_is_an_error(tiny_pair, k: int) -> None:
    """k = 1,000,000 was "pairing valid", then vLLM's rejection sampler stopped with a bare
    AssertionError at the first step."""
    problem = only(run(tiny_pair, k=k), "k_out_of_range")
    assert f"k = {k:,}" in problem.message and "at most 128" in problem.message
    assert "AssertionError" in problem.message
    assert run(tiny_pair, k=128).ok


def test_k_past_the_context_is_an_error(tiny_pair) -> None:
    report = validate_pair(tiny_pair.verifier, tiny_pair.drafter, max_model_len=64, gpu=False, k=64)
    assert "max_model_len 64" in only(report, "k_out_of_range").message


@pytest.mark.parametrize(
    ("role", "path", "value", "says"),
    [
        (
            "verifier",
            "rms_norm_eps",
            "tiny",
            'rms_norm_eps is "tiny" (a string), expected a number > 0',
        ),
        ("verifier", "rms_norm_eps", 0, "rms_norm_eps is 0 (an integer), expected a number > 0"),
        ("verifier", "rope_parameters.rope_theta", "fast", 'rope_theta is "fast" (a string)'),
        ("verifier", "num_experts_per_tok", "2", 'num_experts_per_tok is "2" (a string)'),
        ("verifier", "eos_token_id", "2", 'eos_token_id is "2" (a string), expected a token id'),
        ("verifier", "hidden_act", 1, "hidden_act is 1 (an integer), expected a string"),
        ("drafter", "transformer_layer_config.rms_norm_eps", "tiny", 'rms_norm_eps is "tiny"'),
        ("drafter", "transformer_layer_config.rope_theta", "fast", 'rope_theta is "fast"'),
    ],
)
def test_a_key_vllm_reads_of_the_wrong_type_is_named(
    tiny_pair, role: str, path: str, value, says: str
) -> None:
    """rms_norm_eps "tiny" passed and stopped the first generate with a TypeError; rope_theta
    "fast" alike."""
    folder = getattr(tiny_pair, role)
    config = read_json(folder)
    *parents, last = path.split(".")
    node = config
    for step in parents:
        node = node[step]
    node[last] = value
    (folder / "config.json").write_text(json.dumps(config))
    report = run(tiny_pair)
    assert report.codes() == ["config_field_invalid"], report.summary()
    assert says in report.problems[0].message, report.problems[0].message


@pytest.mark.parametrize("role", ["verifier", "drafter"])
def test_an_activation_nobody_knows_is_an_error(tiny_pair, role: str) -> None:
    if role == "verifier":
        edit_config(tiny_pair.verifier, hidden_act="nonexistent_act")
    else:
        edit_layer_config(tiny_pair.drafter, hidden_act="nonexistent_act")
    problem = only(run(tiny_pair), "hidden_act_unsupported")
    assert f"{role}'s hidden_act 'nonexistent_act'" in problem.message, problem.message
    assert "silu" in problem.message


@pytest.mark.parametrize("role", ["verifier", "drafter"])
def test_an_activation_vllm_does_not_run_for_this_model_is_an_error(tiny_pair, role: str) -> None:
    """vLLM's Qwen3-MoE experts compute silu whatever the config says, and its dense MLPs (and
    the EAGLE-3 layer's) refuse anything else: 'Unsupported activation: gelu'."""
    if role == "verifier":
        edit_config(tiny_pair.verifier, hidden_act="gelu")
    else:
        edit_layer_config(tiny_pair.drafter, hidden_act="gelu")
    problem = only(run(tiny_pair), "hidden_act_unsupported")
    assert "'gelu'" in problem.message and "silu only" in problem.message, problem.message


def test_more_experts_per_token_than_experts_is_an_error(tiny_pair) -> None:
    edit_config(tiny_pair.verifier, num_experts_per_tok=9)
    assert "num_experts_per_tok 9" in only(run(tiny_pair), "verifier_config_invalid").message


def test_heads_that_do_not_group_are_an_error(tiny_pair) -> None:
    edit_config(tiny_pair.verifier, num_key_value_heads=3)
    message = only(run(tiny_pair), "verifier_config_invalid").message
    assert "num_attention_heads 4" in message and "num_key_value_heads 3" in message


def test_a_tokenizer_larger_than_the_model_is_an_error(tiny_pair) -> None:
    """A 151k-token tokenizer on the 2,048-token model passed, then indexed past the embedding
    (IndexError)."""
    folder = with_tokenizer(tiny_pair)
    tokenizer = tokenizer_of(folder)
    for n in range(2048, 151_669):
        tokenizer["model"]["vocab"][f"piece{n}"] = n
    write_tokenizer(folder, tokenizer)
    problem = only(run(tiny_pair), "tokenizer_vocab_mismatch")
    assert "151,669 ids" in problem.message and "vocab_size is 2,048" in problem.message
    assert str(folder / "tokenizer.json") in problem.message


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ({}, "has no model.vocab"),
        ({"model": {"vocab": {"a": 0}}}, "has no added_tokens list"),
        ([1, 2], "holds a JSON list"),
        ({"model": {"vocab": {"a": "0"}}, "added_tokens": []}, "id '0' of 'a'"),
    ],
    ids=["empty", "no-added-tokens", "list", "string-id"],
)
def test_a_tokenizer_without_its_content_is_an_error(tiny_pair, content, says: str) -> None:
    """A `{}` tokenizer.json passed and stopped the engine with KeyError: 'added_tokens'."""
    folder = with_tokenizer(tiny_pair)
    write_tokenizer(folder, content)
    problem = only(run(tiny_pair), "tokenizer_invalid")
    assert says in problem.message and str(folder / "tokenizer.json") in problem.message


def test_a_tokenizer_that_is_not_json_is_an_error(tiny_pair) -> None:
    folder = with_tokenizer(tiny_pair)
    (folder / "tokenizer.json").write_text('{"model": ')
    assert "is not valid JSON" in only(run(tiny_pair), "tokenizer_invalid").message


def shuffled(tokenizer: dict, seed: int = 0) -> dict:
    """The tokenizer with every id permuted (vocabulary and added tokens alike): the text splits
    the same, but each piece names another row of the model's embedding."""
    import random

    ids = sorted(tokenizer["model"]["vocab"].values())
    permuted = ids[:]
    random.Random(seed).shuffle(permuted)
    mapping = dict(zip(ids, permuted))
    tokenizer["model"]["vocab"] = {k: mapping[v] for k, v in tokenizer["model"]["vocab"].items()}
    for token in tokenizer["added_tokens"]:
        token["id"] = mapping[token["id"]]
    return tokenizer


def test_a_shuffled_vocabulary_is_caught_by_its_special_tokens(tiny_pair) -> None:
    """A permuted vocabulary generated garbage silently (1 of 15 drafts accepted)."""
    folder = with_tokenizer(tiny_pair)
    write_tokenizer(folder, shuffled(tokenizer_of(folder)))
    report = run(tiny_pair)
    problem = only(report, "special_token_mismatch")
    assert "eos_token_id is 2" in problem.message and "'<|im_end|>'" in problem.message
    assert not report.ok


def test_a_chat_template_marker_the_tokenizer_lacks_is_an_error(tiny_pair) -> None:
    folder = with_tokenizer(tiny_pair)
    tokenizer = tokenizer_of(folder)
    tokenizer["added_tokens"] = [
        t for t in tokenizer["added_tokens"] if t["content"] != "<|im_start|>"
    ]
    del tokenizer["model"]["vocab"]["<|im_start|>"]
    write_tokenizer(folder, tokenizer)
    problem = only(run(tiny_pair), "chat_template_token_missing")
    assert "'<|im_start|>'" in problem.message and "chat_template.jinja" in problem.message


def test_activations_match_the_installed_transformers() -> None:
    from transformers.activations import ACT2CLS

    from helpers.engine.pairing import _ACTIVATIONS

    assert set(_ACTIVATIONS) == set(ACT2CLS)
