"""Profiles: which verifier/drafter pair the workbook runs on (data/profiles/*.json).

`tiny` (the default) ships in data/ and runs on a laptop CPU; the hub profiles name the real
Qwen3-MoE pairings and what they need (hub access, GPUs, GPU memory); a shape profile builds a
published architecture from config.json with random weights on a GPU, no download. Pick one with
`make run PROFILE=…`, $WORKBOOK_PROFILE, or the `PROFILE` parameter cell of a notebook.

Every fact about a model lives in its profile: adding a pairing is one JSON file in
data/profiles/ (plus its README row); the stack table of the figures (`known_stacks`) and the
quoted vLLM code path (keyed by `verifier_architecture`) follow from it with no code change.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers.common import qwen_tokenizer
from helpers.common.paths import DATA_DIR, local_dir, resolve_model_ref

__all__ = [
    "Profile",
    "profile_name",
    "load_profile",
    "known_stacks",
    "profiles_for_gpus",
    "trained_or_tiny",
]

_PROFILE_ENV_VAR = "WORKBOOK_PROFILE"
_DEFAULT_PROFILE = "tiny"
_PROFILES_DIR: Path = DATA_DIR / "profiles"


@dataclass(frozen=True)
class Profile:
    """One verifier + EAGLE-3 drafter pairing with its engine and sampling defaults.

    `needs` says what running it takes: `hub` (downloads from the Hugging Face hub), `gpus`
    (CUDA devices), `gpu_memory_gib` (total memory of EACH of those GPUs, in GiB as
    torch.cuda reports it: an "80 GB" H100 reports ~79.2 GiB) and optionally
    `min_compute_capability` (e.g. "8.9" for native FP8). `verifier_architecture` (its
    config.json's `architectures[0]`, the key of vLLM's model registry), `verifier_layers` and
    `verifier_hidden_size` record the verifier's shape so figures and checks need no download;
    `notes` are the reasons behind the numbers; `sources` where the model ids were confirmed.
    `tokenizer` names a tokenizer folder that `make venv` builds (helpers.common.qwen_tokenizer)
    for a verifier folder without one: a shape profile's random weights get Qwen3's tokenizer.
    """

    name: str
    description: str
    verifier: str
    drafter: str
    num_speculative_tokens: int
    engine: dict[str, Any] = field(default_factory=dict)
    sampling: dict[str, Any] = field(default_factory=dict)
    needs: dict[str, Any] = field(default_factory=dict)
    verifier_architecture: str | None = None
    verifier_layers: int | None = None
    verifier_hidden_size: int | None = None
    notes: tuple[str, ...] = ()
    sources: dict[str, str] = field(default_factory=dict)
    tokenizer: str | None = None

    @property
    def is_local(self) -> bool:
        """True when both models ship in this repo (no hub, no GPU needed)."""
        return self.needs.get("hub", True) is False

    @property
    def has_weights(self) -> bool:
        """False for a shape profile: vLLM builds it from config.json with random weights."""
        return self.engine.get("load_format") != "dummy"

    @property
    def gpus_needed(self) -> int:
        """CUDA devices the profile needs (0: runs on a CPU)."""
        return int(self.needs.get("gpus", 0))

    @property
    def gpu_memory_gib(self) -> float:
        """Memory each of those GPUs must have, in GiB as torch reports it (0: no requirement)."""
        return float(self.needs.get("gpu_memory_gib", 0))

    @property
    def tensor_parallel_size(self) -> int:
        """The engine's tensor parallelism (1 unless the profile says otherwise)."""
        return int(self.engine.get("tensor_parallel_size", 1))

    def verifier_path(self) -> str:
        """The verifier as vLLM/transformers should load it (local paths checked)."""
        return resolve_model_ref(self.verifier)

    def drafter_path(self) -> str:
        """The drafter as vLLM should load it (local paths checked)."""
        return resolve_model_ref(self.drafter)

    def tokenizer_path(self) -> str:
        """The tokenizer vLLM/transformers should load: the profile's `tokenizer` folder, checked
        as built and verified (one line saying what to do when not), else the verifier's own."""
        if self.tokenizer is None:
            return self.verifier_path()
        folder = local_dir(self.tokenizer)
        if folder is None:
            return self.tokenizer
        problem = qwen_tokenizer.status(folder)
        if problem is not None:
            raise FileNotFoundError(f"profile {self.name}'s tokenizer: {problem}")
        return str(folder.resolve())


_FIELD_NAMES: frozenset[str] = frozenset(f.name for f in dataclasses.fields(Profile))


def _available_profiles() -> list[str]:
    """Names of the profiles shipped in data/profiles/."""
    return sorted(p.stem for p in _PROFILES_DIR.glob("*.json"))


def profile_name(name: str | None = None) -> str:
    """The profile to use: the argument, else $WORKBOOK_PROFILE, else 'tiny'."""
    return name or os.environ.get(_PROFILE_ENV_VAR) or _DEFAULT_PROFILE


def _profile_from_dict(raw: dict[str, Any], source: str = "profile") -> Profile:
    """A Profile from parsed JSON; unknown or missing fields fail in one line."""
    unknown = sorted(set(raw) - _FIELD_NAMES)
    if unknown:
        raise ValueError(f"{source}: unknown field(s) {unknown}; known: {sorted(_FIELD_NAMES)}")
    raw = dict(raw)
    if "notes" in raw:
        raw["notes"] = tuple(raw["notes"])
    try:
        return Profile(**raw)
    except TypeError as err:  # a missing required field
        raise ValueError(f"{source}: {err}") from None


def load_profile(name: str | None = None) -> Profile:
    """Load a profile by name (see profile_name); unknown names fail in one line."""
    chosen = profile_name(name)
    path = _PROFILES_DIR / f"{chosen}.json"
    if not path.is_file():
        raise ValueError(f"unknown profile {chosen!r}: choose one of {_available_profiles()}")
    source = path.relative_to(DATA_DIR.parent) if path.is_relative_to(DATA_DIR.parent) else path
    return _profile_from_dict(json.loads(path.read_text()), source=str(source))


def known_stacks(named: str | None = None) -> dict[str, int]:
    """name -> num_hidden_layers, one row per distinct verifier of the profiles (architecture,
    layers, hidden size), shallowest first; a row is named after its first profile, or `named`."""
    names = _available_profiles()
    if named in names:
        names = [named, *(n for n in names if n != named)]
    stacks: dict[tuple[Any, ...], tuple[str, int]] = {}
    for name in names:
        p = load_profile(name)
        if p.verifier_layers is not None:
            key = (p.verifier_architecture, p.verifier_layers, p.verifier_hidden_size)
            stacks.setdefault(key, (name, p.verifier_layers))
    return dict(sorted(stacks.values(), key=lambda item: item[1]))


def profiles_for_gpus(count: int) -> list[str]:
    """Names of the shipped profiles that need at most `count` GPUs (memory per GPU aside)."""
    return [name for name in _available_profiles() if load_profile(name).gpus_needed <= count]


def trained_or_tiny(profile: Profile, purpose: str, local: bool = False) -> Profile:
    """`profile` when its weights are trained (and, with `local`, ship in data/), else the tiny
    pair, saying so in one line: acceptance and training mean nothing on random weights."""
    if profile.has_weights and (profile.is_local or not local):
        return profile
    why = "is a hub profile" if profile.has_weights else "has random weights (load_format dummy)"
    print(f"profile {profile.name} {why}: {purpose} runs on the tiny pair")
    return load_profile(_DEFAULT_PROFILE)
