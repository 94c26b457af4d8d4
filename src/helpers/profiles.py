"""Profiles: which verifier/drafter pair the workbook runs on (data/profiles/*.json)."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers.paths import DATA_DIR, resolve_model_ref

PROFILE_ENV_VAR = "WORKBOOK_PROFILE"
DEFAULT_PROFILE = "tiny"
PROFILES_DIR: Path = DATA_DIR / "profiles"


@dataclass(frozen=True)
class Profile:
    """One verifier + EAGLE-3 drafter pairing with its engine and sampling defaults."""

    name: str
    description: str
    verifier: str
    drafter: str
    num_speculative_tokens: int
    engine: dict[str, Any] = field(default_factory=dict)
    sampling: dict[str, Any] = field(default_factory=dict)
    needs: dict[str, Any] = field(default_factory=dict)

    @property
    def is_local(self) -> bool:
        """True when both models ship in this repo (no hub, no GPU needed)."""
        return self.needs.get("hub", True) is False

    def verifier_path(self) -> str:
        """The verifier as vLLM/transformers should load it (local paths checked)."""
        return resolve_model_ref(self.verifier)

    def drafter_path(self) -> str:
        """The drafter as vLLM should load it (local paths checked)."""
        return resolve_model_ref(self.drafter)


def available_profiles() -> list[str]:
    """Names of the profiles shipped in data/profiles/."""
    return sorted(p.stem for p in PROFILES_DIR.glob("*.json"))


def profile_name(name: str | None = None) -> str:
    """The profile to use: the argument, else $WORKBOOK_PROFILE, else 'tiny'."""
    return name or os.environ.get(PROFILE_ENV_VAR) or DEFAULT_PROFILE


def load_profile(name: str | None = None) -> Profile:
    """Load a profile by name (see profile_name); unknown names fail in one line."""
    chosen = profile_name(name)
    path = PROFILES_DIR / f"{chosen}.json"
    if not path.is_file():
        raise ValueError(f"unknown profile {chosen!r}: choose one of {available_profiles()}")
    raw = json.loads(path.read_text())
    return Profile(**raw)
