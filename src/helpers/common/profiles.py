"""Profiles: which verifier/drafter pair the workbook runs on (data/profiles/*.json).

`tiny` (the default) ships in data/ and runs on a laptop CPU; the hub profiles name the real
Qwen3-MoE pairings and what they need (hub access, GPUs, GPU memory); a shape profile builds a
published architecture from config.json with random weights on a GPU, no download. Pick one with
`make run PROFILE=…`, $WORKBOOK_PROFILE, or the `PROFILE` parameter cell of a notebook.

Every fact about a model lives in its profile: adding a pairing is one JSON file in
data/profiles/ (plus its README row); the stack table of notebook 02's figures (from
`loadable_profiles`) and its quoted vLLM code path (keyed by `verifier_architecture`) follow from it
with no code change.
"""

from __future__ import annotations

import dataclasses
import operator
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers.common import qwen_tokenizer
from helpers.common.configs import field_problems, read_json
from helpers.common.paths import DATA_DIR, local_dir, resolve_model_ref, restore_hint

__all__ = [
    "MAX_DRAFT_TOKENS",
    "Profile",
    "profile_name",
    "load_profile",
    "profile_file_problems",
    "resolve_k",
    "loadable_profiles",
    "profiles_for_gpus",
    "trained_or_tiny",
]

_PROFILE_ENV_VAR = "WORKBOOK_PROFILE"
_DEFAULT_PROFILE = "tiny"
_PROFILES_DIR: Path = DATA_DIR / "profiles"
#: The most draft tokens per step vLLM verifies: its rejection sampler asserts
#: `max_spec_len <= MAX_SPEC_LEN` (128, vllm/v1/sample/rejection_sampler.py), a bare AssertionError
#: at the first step past it (tests/common/test_profiles.py checks the installed vLLM's value).
MAX_DRAFT_TOKENS = 128


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
#: Fields a profile must have (the dataclass's fields without a default).
_REQUIRED: tuple[str, ...] = tuple(
    f.name
    for f in dataclasses.fields(Profile)
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
)
#: What each field the workbook reads must hold (helpers.common.configs.field_problems); engine
#: and sampling keys not listed go to vLLM as they are, and vLLM checks them.
_SCHEMA: dict[str, str] = {
    "name": "non-empty string",
    "description": "string",
    "verifier": "non-empty string",
    "drafter": "non-empty string",
    "num_speculative_tokens": f"int in [1, {MAX_DRAFT_TOKENS}]",
    "engine": "object",
    "engine.tensor_parallel_size": "positive int",
    "engine.max_model_len": "positive int",
    "engine.max_num_seqs": "positive int",
    "engine.kv_cache_memory_bytes": "positive int",
    "engine.gpu_memory_utilization": "fraction",
    "engine.load_format": "string",
    "sampling": "object",
    "sampling.temperature": "number >= 0",
    "sampling.max_tokens": "positive int",
    "needs": "object",
    "needs.hub": "bool",
    "needs.gpus": "int >= 0",
    "needs.gpu_memory_gib": "number >= 0",
    "needs.min_compute_capability": "version",
    "verifier_architecture": "non-empty string or null",
    "verifier_layers": "positive int or null",
    "verifier_hidden_size": "positive int or null",
    "notes": "list of strings",
    "sources": "object of strings",
    "tokenizer": "non-empty string or null",
}


def _available_profiles() -> list[str]:
    """Names of the profiles shipped in data/profiles/."""
    return sorted(p.stem for p in _PROFILES_DIR.glob("*.json"))


def profile_name(name: str | None = None) -> str:
    """The profile to use: the argument, else $WORKBOOK_PROFILE, else 'tiny'."""
    return name or os.environ.get(_PROFILE_ENV_VAR) or _DEFAULT_PROFILE


def _raw_problems(raw: Any, source: str) -> list[str]:
    """One line per thing wrong with a parsed profile: not an object, unknown, missing or
    mistyped fields."""
    if not isinstance(raw, dict):
        return [f"{source} holds a JSON {type(raw).__name__}, not an object of profile fields"]
    problems = []
    unknown = sorted(set(raw) - _FIELD_NAMES)
    if unknown:
        problems.append(f"{source}: unknown field(s) {unknown}; known: {sorted(_FIELD_NAMES)}")
    missing = [k for k in _REQUIRED if k not in raw]
    if missing:
        problems.append(
            f"{source}: missing required field(s) {missing}: add them (see data/profiles/tiny.json)"
        )
    return problems + field_problems(raw, _SCHEMA, source)


def _profile_from_dict(raw: Any, source: str = "profile") -> Profile:
    """A Profile from parsed JSON; every bad field one line of one ValueError."""
    problems = _raw_problems(raw, source)
    if problems:
        raise ValueError("\n".join(problems))
    raw = dict(raw)
    if "notes" in raw:
        raw["notes"] = tuple(raw["notes"])
    return Profile(**raw)


def _profile_path(name: str) -> Path:
    """data/profiles/<name>.json; a ValueError listing the choices for an unknown name."""
    path = _PROFILES_DIR / f"{name}.json"
    if not path.is_file():
        raise ValueError(f"unknown profile {name!r}: choose one of {_available_profiles()}")
    return path


def _read_profile(path: Path) -> Profile:
    """The profile in one file; a ValueError naming the file (one line per bad field)."""
    source = path.relative_to(DATA_DIR.parent) if path.is_relative_to(DATA_DIR.parent) else path
    try:
        raw = read_json(path)
    except OSError as err:
        raise ValueError(f"{source} cannot be read ({err})") from None
    except ValueError as err:  # not JSON: read_json's line, with the path as the repo names it
        line, hint = str(err).replace(str(path), str(source)), restore_hint(path)
        if hint.startswith("restore it with `git checkout"):  # git has no profile you added
            line = line.replace(hint, f"{hint} if the repo ships it, else fix it or remove it")
        raise ValueError(line) from None
    return _profile_from_dict(raw, source=str(source))


def load_profile(name: str | None = None) -> Profile:
    """Load a profile by name (see profile_name); unknown names fail in one line, a damaged
    profile in one line per bad field, each naming the file."""
    return _read_profile(_profile_path(profile_name(name)))


def resolve_k(profile: Profile, k: int | None = None) -> int:
    """Draft tokens per step, the one rule of the workbook: None is the profile's k, 0 plain
    decoding, an int from 1 to MAX_DRAFT_TOKENS itself; anything else a one-line ValueError."""
    if k is None:
        return profile.num_speculative_tokens
    try:
        value = operator.index(k)  # an int, or numpy's; never a float or a string
    except TypeError:
        value = -1
    if isinstance(k, bool) or not 0 <= value <= MAX_DRAFT_TOKENS:
        raise ValueError(
            f"k={k!r}: use None (profile {profile.name}'s k = "
            f"{profile.num_speculative_tokens}), 0 (plain decoding) or a positive int of at most "
            f"{MAX_DRAFT_TOKENS} (vLLM verifies no more draft tokens per step)"
        )
    return value


def profile_file_problems(path: Path) -> list[str]:
    """One line per thing wrong with the profile in one file ([] when it loads); never raises."""
    try:
        _read_profile(Path(path))
    except ValueError as err:
        return str(err).splitlines()
    except Exception as err:  # unforeseen: still this profile's one line
        first = (str(err).splitlines() or [""])[0]
        return [f"{path} does not load ({type(err).__name__}: {first})"]
    return []


def _profile_problems(name: str) -> list[str]:
    """One line per thing wrong with profile `name` ([] when it loads); never raises."""
    try:
        path = _profile_path(name)
    except ValueError as err:
        return [str(err)]
    return profile_file_problems(path)


def loadable_profiles() -> list[Profile]:
    """Every profile in data/profiles/ that loads, in name order; a damaged one is left out,
    whatever it raises (loading it by name says what is wrong)."""
    loaded = []
    for name in _available_profiles():
        try:
            loaded.append(_read_profile(_PROFILES_DIR / f"{name}.json"))
        except Exception:  # one profile's problem is its own, never every profile's
            continue
    return loaded


def profiles_for_gpus(count: int) -> list[str]:
    """Names of the shipped profiles that need at most `count` GPUs (memory per GPU aside; a
    damaged profile is not offered)."""
    return [p.name for p in loadable_profiles() if p.gpus_needed <= count]


def trained_or_tiny(profile: Profile, purpose: str, local: bool = False) -> Profile:
    """`profile` when its weights are trained (and, with `local`, ship in data/), else the tiny
    pair, saying so in one line: acceptance and training mean nothing on random weights."""
    if profile.has_weights and (profile.is_local or not local):
        return profile
    why = "is a hub profile" if profile.has_weights else "has random weights (load_format dummy)"
    print(f"profile {profile.name} {why}: {purpose} runs on the tiny pair")
    return load_profile(_DEFAULT_PROFILE)
