"""helpers.profiles: default, env override, unknown names, the shipped profiles."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from helpers.common import profiles
from helpers.common.configs import read_config
from helpers.common.paths import REPO_ROOT
from helpers.engine.pairing import _layer_config, validate_pair


@pytest.fixture(autouse=True)
def no_profile_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start every test without WORKBOOK_PROFILE (make exports it)."""
    monkeypatch.delenv(profiles._PROFILE_ENV_VAR, raising=False)


def test_shipped_profiles() -> None:
    assert {"tiny", "qwen3-30b-a3b"} <= set(profiles._available_profiles())


def test_default_is_tiny() -> None:
    profile = profiles.load_profile()
    assert profile.name == "tiny" and profile.is_local
    assert profile.num_speculative_tokens >= 1
    assert profile.verifier.startswith("data/") and profile.drafter.startswith("data/")


def test_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(profiles._PROFILE_ENV_VAR, "qwen3-30b-a3b")
    profile = profiles.load_profile()
    assert profile.name == "qwen3-30b-a3b" and not profile.is_local
    assert profile.verifier_path() == profile.verifier, "hub ids pass through unchanged"
    assert profiles.load_profile("tiny").name == "tiny", "an explicit name beats the env var"


def test_unknown_profile_lists_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="unknown profile 'nope'") as info:
        profiles.load_profile("nope")
    for name in profiles._available_profiles():
        assert name in str(info.value)
    monkeypatch.setenv(profiles._PROFILE_ENV_VAR, "also-nope")
    with pytest.raises(ValueError, match="also-nope"):
        profiles.load_profile()


@pytest.mark.parametrize("name", profiles._available_profiles())
def test_every_profile_loads(name: str) -> None:
    profile = profiles.load_profile(name)
    assert profile.name == name
    assert profile.engine.get("max_model_len", 0) > 0
    assert "temperature" in profile.sampling


# --------------------------------------------------------------------------- the real pairings

HUB_PROFILES = [
    name for name in profiles._available_profiles() if not profiles.load_profile(name).is_local
]
#: What torch reports for an "80 GB" A100/H100 (85.0e9 bytes): the class of card the hub profiles target.
GIB_OF_80GB_CARD = 79.1
#: Total parameters and bytes per weight of each hub profile's verifier (model cards).
VERIFIER_WEIGHTS = {"qwen3-30b-a3b": (30.5e9, 2), "qwen3-235b-a22b": (235e9, 1)}
#: Qwen3-MoE attention: 4 KV heads of 128 dims, bf16 KV cache.
KV_HEADS, HEAD_DIM, KV_BYTES = 4, 128, 2
#: Activations, CUDA graphs and workspaces vLLM needs besides weights and KV (GiB per GPU), plus a 1 GiB drafter.
OVERHEAD_GIB, DRAFTER_GIB = 3.0, 1.0
GPU_MEMORY_UTILIZATION = 0.85  # helpers.engine.device_defaults(gpu=True)


def test_all_three_pairings_ship() -> None:
    assert {"tiny", "qwen3-30b-a3b", "qwen3-235b-a22b"} <= set(profiles._available_profiles())
    assert set(HUB_PROFILES) == {"qwen3-30b-a3b", "qwen3-235b-a22b"}


def test_qwen3_30b_a3b_is_the_documented_pairing() -> None:
    p = profiles.load_profile("qwen3-30b-a3b")
    assert (p.verifier, p.drafter) == (
        "Qwen/Qwen3-30B-A3B-Instruct-2507",
        "RedHatAI/Qwen3-30B-A3B-Instruct-2507-speculator.eagle3",
    )
    assert p.num_speculative_tokens == 3
    assert p.engine == {"tensor_parallel_size": 1, "max_model_len": 16384}
    assert (p.verifier_layers, p.verifier_hidden_size) == (48, 2048)
    assert p.needs["hub"] is True and p.gpus_needed == 1


def test_qwen3_235b_a22b_uses_the_published_speculator() -> None:
    p = profiles.load_profile("qwen3-235b-a22b")
    assert p.verifier == "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"
    assert p.drafter == "RedHatAI/Qwen3-235B-A22B-Instruct-2507-speculator.eagle3"
    assert p.tensor_parallel_size == 4 and p.gpus_needed == 4
    assert p.engine["max_model_len"] == 16384
    assert (p.verifier_layers, p.verifier_hidden_size) == (94, 4096)


@pytest.mark.parametrize("name", profiles._available_profiles())
def test_no_test_only_checkpoint(name: str) -> None:
    p = profiles.load_profile(name)
    assert not p.drafter.startswith("nm-testing/") and not p.verifier.startswith("nm-testing/")


@pytest.mark.parametrize("name", profiles._available_profiles())
def test_every_profile_records_its_verifier(name: str) -> None:
    p = profiles.load_profile(name)
    assert p.verifier_architecture and p.verifier_architecture.endswith("ForCausalLM")
    assert p.verifier_layers and p.verifier_hidden_size


LOCAL_PROFILES = [n for n in profiles._available_profiles() if profiles.load_profile(n).is_local]


@pytest.mark.parametrize("name", LOCAL_PROFILES)
def test_local_shape_matches_shipped_config(name: str) -> None:
    p = profiles.load_profile(name)
    path = REPO_ROOT / p.verifier / "config.json"
    if not path.is_file():
        pytest.skip(f"{p.verifier} not built yet (make tiny-models)")
    config = json.loads(path.read_text())
    assert (config["architectures"][0], config["num_hidden_layers"], config["hidden_size"]) == (
        p.verifier_architecture,
        p.verifier_layers,
        p.verifier_hidden_size,
    )


def test_adding_a_profile_is_one_json_file(added_profile: str) -> None:
    """One more JSON file: listed, loaded, and loadable beside the others."""
    assert added_profile in profiles._available_profiles()
    p = profiles.load_profile(added_profile)
    assert p.verifier_architecture == "Qwen3NextForCausalLM" and p.verifier_layers == 48
    assert added_profile in {p.name for p in profiles.loadable_profiles()}


@pytest.mark.parametrize("name", [n for n in profiles._available_profiles() if n != "tiny"])
def test_every_profile_has_its_readme_row(name: str) -> None:
    rows = (REPO_ROOT / "README.md").read_text().splitlines()
    assert any(line.startswith(f"| `{name}` |") for line in rows), (
        f"README.md: add a row for profile {name} to the profile table"
    )


@pytest.mark.parametrize("name", HUB_PROFILES)
def test_hub_profile_needs_are_justified(name: str) -> None:
    """The memory each GPU must have covers weights + one full-length sequence of KV + overhead, and an 80 GB card has it."""
    p = profiles.load_profile(name)
    assert p.needs["hub"] is True
    assert p.gpus_needed == p.tensor_parallel_size >= 1
    assert 0 < p.gpu_memory_gib <= GIB_OF_80GB_CARD, "an 80 GB A100/H100 must pass the preflight"
    assert name in VERIFIER_WEIGHTS, (
        f"add {name}'s verifier (parameters, bytes per weight) to VERIFIER_WEIGHTS from its model card"
    )
    params, bytes_per = VERIFIER_WEIGHTS[name]
    weights = params * bytes_per / 1024**3 / p.tensor_parallel_size
    kv_per_token = p.verifier_layers * 2 * KV_HEADS * HEAD_DIM * KV_BYTES / p.tensor_parallel_size
    kv = kv_per_token * p.engine["max_model_len"] / 1024**3
    needed = weights + kv + DRAFTER_GIB + OVERHEAD_GIB
    assert p.gpu_memory_gib * GPU_MEMORY_UTILIZATION >= needed, (
        f"{name}: {p.gpu_memory_gib} GiB x {GPU_MEMORY_UTILIZATION} < {needed:.1f} GiB needed per GPU"
    )
    assert any("GiB" in note for note in p.notes), (
        "the notes must say where the memory number comes from"
    )


def test_resolve_k_none_is_the_profiles_k_and_zero_is_plain() -> None:
    p = dataclasses.replace(profiles.load_profile("tiny"), num_speculative_tokens=4)
    assert profiles.resolve_k(p) == profiles.resolve_k(p, None) == 4
    assert profiles.resolve_k(p, 0) == 0
    assert profiles.resolve_k(p, 2) == 2
    numpy_k = profiles.resolve_k(p, np.int64(5))  # a k read from a table
    assert numpy_k == 5 and type(numpy_k) is int


@pytest.mark.parametrize("bad", [-1, 2.0, "3", True, 129, 1_000_000])
def test_resolve_k_refuses_what_is_not_a_k_in_one_line(bad: object) -> None:
    with pytest.raises(ValueError) as err:
        profiles.resolve_k(profiles.load_profile("tiny"), bad)  # type: ignore[arg-type]
    assert repr(bad) in str(err.value) and "\n" not in str(err.value)
    assert f"at most {profiles.MAX_DRAFT_TOKENS}" in str(err.value)


def test_the_largest_k_is_the_one_vllms_rejection_sampler_takes() -> None:
    """k = 1,000,000 stopped at the first verify step with a bare AssertionError
    (`metadata.max_spec_len <= MAX_SPEC_LEN` in vllm/v1/sample/rejection_sampler.py)."""
    pytest.importorskip("vllm")
    from vllm.v1.sample.rejection_sampler import MAX_SPEC_LEN

    assert profiles.MAX_DRAFT_TOKENS == MAX_SPEC_LEN
    p = profiles.load_profile("tiny")
    assert profiles.resolve_k(p, MAX_SPEC_LEN) == MAX_SPEC_LEN


def test_unknown_field_fails_in_one_line() -> None:
    raw = {
        "name": "x",
        "description": "",
        "verifier": "a/b",
        "drafter": "c/d",
        "num_speculative_tokens": 3,
        "gpu_count": 2,
    }
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['gpu_count'\]") as info:
        profiles._profile_from_dict(raw, source="x.json")
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="x.json: .*num_speculative_tokens"):
        profiles._profile_from_dict(
            {k: v for k, v in raw.items() if k not in ("gpu_count", "num_speculative_tokens")},
            source="x.json",
        )


def test_keyword_construction_still_works() -> None:
    """helpers.tiny_pair builds Profiles by keyword with the original fields only."""
    p = profiles.Profile(
        name="t",
        description="",
        verifier="data/x",
        drafter="data/y",
        num_speculative_tokens=2,
        engine={"max_model_len": 1024},
        needs={"hub": False},
    )
    assert p.is_local and p.notes == () and p.verifier_layers is None
    assert p.gpus_needed == 0 and p.gpu_memory_gib == 0 and p.tensor_parallel_size == 1


# --------------------------------------------------------------------------- shape profiles


def test_shape_profile_is_local_with_random_weights() -> None:
    shape = profiles.load_profile("qwen3-30b-a3b-shape")
    assert shape.is_local and not shape.has_weights and shape.gpus_needed == 1
    assert profiles.load_profile("tiny").has_weights
    assert profiles.load_profile("qwen3-30b-a3b").has_weights
    # It is the published 30B-A3B architecture, the same numbers as the hub profile records.
    real = profiles.load_profile("qwen3-30b-a3b")
    assert (shape.verifier_layers, shape.verifier_hidden_size) == (
        real.verifier_layers,
        real.verifier_hidden_size,
    )


def test_tokenizer_path_is_the_verifiers_unless_the_profile_names_one() -> None:
    tiny = profiles.load_profile("tiny")
    assert tiny.tokenizer is None and tiny.tokenizer_path() == tiny.verifier_path()
    hub = profiles.load_profile("qwen3-30b-a3b")
    assert hub.tokenizer_path() == hub.verifier
    shape = profiles.load_profile("qwen3-30b-a3b-shape")
    assert shape.tokenizer == "build/qwen3-tokenizer-151936"
    missing = dataclasses.replace(shape, tokenizer="build/qwen3-tokenizer-nowhere")
    with pytest.raises(FileNotFoundError) as info:
        missing.tokenizer_path()
    message = str(info.value)
    assert "\n" not in message and message.startswith("profile qwen3-30b-a3b-shape's tokenizer:")
    assert "`make venv` builds it" in message


@pytest.mark.usefixtures("qwen3_built")
def test_shape_profile_tokenizer_is_qwens_built_folder() -> None:
    shape = profiles.load_profile("qwen3-30b-a3b-shape")
    assert shape.tokenizer_path() == str(REPO_ROOT / "build" / "qwen3-tokenizer-151936")


def test_trained_or_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    tiny, hub = profiles.load_profile("tiny"), profiles.load_profile("qwen3-30b-a3b")
    assert profiles.trained_or_tiny(tiny, "x") is tiny
    assert profiles.trained_or_tiny(hub, "x") is hub, "a hub pair is trained"
    assert capsys.readouterr().out == "", "nothing said when the profile stays"
    assert profiles.trained_or_tiny(hub, "training", local=True).name == "tiny"
    shape = profiles.load_profile("qwen3-30b-a3b-shape")
    assert profiles.trained_or_tiny(shape, "acceptance analytics").name == "tiny"
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and "is a hub profile: training runs on the tiny pair" in lines[0]
    assert "random weights" in lines[1] and "acceptance analytics" in lines[1]


# --------------------------------------------------------------------------- the 235B shape

SHAPE_235B = "qwen3-235b-a22b-shape"
#: What torch reports for a 141 GB H200 (nvidia-smi: 143,771 MiB).
GIB_OF_H200 = 139.8
#: CUDA graphs, activations and NCCL buffers per GPU besides weights and KV (GiB), a generous bound.
SHAPE_OVERHEAD_GIB = 8.0


def test_235b_shape_profile_is_the_published_architecture_on_four_gpus() -> None:
    shape, hub = profiles.load_profile(SHAPE_235B), profiles.load_profile("qwen3-235b-a22b")
    assert shape.is_local and not shape.has_weights
    assert shape.gpus_needed == shape.tensor_parallel_size == 4 == hub.tensor_parallel_size
    assert (shape.verifier_architecture, shape.verifier_layers, shape.verifier_hidden_size) == (
        hub.verifier_architecture,
        hub.verifier_layers,
        hub.verifier_hidden_size,
    )
    assert shape.tokenizer == profiles.load_profile("qwen3-30b-a3b-shape").tokenizer
    assert not {"draft_tensor_parallel_size", "enable_expert_parallel"} & set(shape.engine)
    config = read_config(REPO_ROOT / shape.verifier)
    published = {  # Qwen3-235B-A22B-Instruct-2507: model card and config.json (data/shapes/README.md)
        "num_hidden_layers": 94,
        "hidden_size": 4096,
        "num_attention_heads": 64,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 1536,
        "vocab_size": 151936,
        "max_position_embeddings": 262144,
        "rope_theta": 5000000,
    }
    assert {key: config[key] for key in published} == published


def test_235b_shape_memory_per_gpu_fits_an_h200() -> None:
    """Weights from the shape's own config.json, split 4 ways, plus the drafter, the fixed KV cache
    and overhead: within the GiB the profile asks of each GPU, which an H200 has and 80 GB lacks."""
    shape = profiles.load_profile(SHAPE_235B)
    c = read_config(REPO_ROOT / shape.verifier)
    hidden, vocab, head = c["hidden_size"], c["vocab_size"], c["head_dim"]
    attention = hidden * head * 2 * (c["num_attention_heads"] + c["num_key_value_heads"])
    experts = c["num_experts"] * 3 * hidden * c["moe_intermediate_size"]
    params = c["num_hidden_layers"] * (attention + experts) + 2 * vocab * hidden
    assert 234e9 < params < 236e9, "Qwen3-235B-A22B: 235 B parameters"
    weights = params * 2 / 1024**3 / shape.tensor_parallel_size
    drafter = 2 * vocab * hidden * 2 / 1024**3  # lm_head + embedding dominate, split 4 ways below
    kv = shape.engine["kv_cache_memory_bytes"] / 1024**3  # per GPU in vLLM
    needed = weights + drafter / shape.tensor_parallel_size + kv + SHAPE_OVERHEAD_GIB
    assert needed <= shape.gpu_memory_gib <= GIB_OF_H200, (needed, shape.gpu_memory_gib)
    assert shape.gpu_memory_gib > GIB_OF_80GB_CARD
    kv_per_token = c["num_hidden_layers"] * 2 * c["num_key_value_heads"] * head * 2
    per_gpu_tokens = shape.engine["kv_cache_memory_bytes"] / (
        kv_per_token / shape.tensor_parallel_size
    )
    lab_tokens = 64 * (128 + 256)  # the MoE lab at concurrency 64
    assert per_gpu_tokens > lab_tokens and shape.engine["max_num_seqs"] >= 64
    assert any(f"{weights:.1f} GiB per GPU" in note for note in shape.notes), "notes show the sum"


def test_235b_drafter_validates_against_its_verifier() -> None:
    shape = profiles.load_profile(SHAPE_235B)
    report = validate_pair(
        shape.verifier_path(),
        shape.drafter_path(),
        "eagle3",
        shape.engine["max_model_len"],
        verifier_name=shape.verifier,
        gpu=True,
    )
    assert report.ok, report.summary()
    assert report.codes() == ["weights_unreadable"], "a shape has configs and no weights"
    layers = shape.verifier_layers
    assert report.aux_layers == (2, layers // 2, layers - 3) == (2, 47, 91), "vLLM's default taps"
    drafter = read_config(REPO_ROOT / shape.drafter)
    assert drafter["target_hidden_size"] == _layer_config(drafter)["hidden_size"] == 4096
    assert drafter["draft_vocab_size"] == read_config(REPO_ROOT / shape.verifier)["vocab_size"]


def test_profiles_for_gpus() -> None:
    assert profiles.profiles_for_gpus(0) == ["tiny"]
    one = profiles.profiles_for_gpus(1)
    assert "qwen3-30b-a3b-shape" in one and SHAPE_235B not in one
    assert SHAPE_235B in profiles.profiles_for_gpus(4)
