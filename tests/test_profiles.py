"""helpers.profiles: default, env override, unknown names, the shipped profiles."""
from __future__ import annotations

import pytest

from helpers import profiles


@pytest.fixture(autouse=True)
def no_profile_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start every test without WORKBOOK_PROFILE (make exports it)."""
    monkeypatch.delenv(profiles.PROFILE_ENV_VAR, raising=False)


def test_shipped_profiles() -> None:
    assert {"tiny", "qwen3-30b-a3b"} <= set(profiles.available_profiles())


def test_default_is_tiny() -> None:
    profile = profiles.load_profile()
    assert profile.name == "tiny" and profile.is_local
    assert profile.num_speculative_tokens >= 1
    assert profile.verifier.startswith("data/") and profile.drafter.startswith("data/")


def test_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(profiles.PROFILE_ENV_VAR, "qwen3-30b-a3b")
    profile = profiles.load_profile()
    assert profile.name == "qwen3-30b-a3b" and not profile.is_local
    assert profile.verifier_path() == profile.verifier, "hub ids pass through unchanged"
    assert profiles.load_profile("tiny").name == "tiny", "an explicit name beats the env var"


def test_unknown_profile_lists_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="unknown profile 'nope'") as info:
        profiles.load_profile("nope")
    for name in profiles.available_profiles():
        assert name in str(info.value)
    monkeypatch.setenv(profiles.PROFILE_ENV_VAR, "also-nope")
    with pytest.raises(ValueError, match="also-nope"):
        profiles.load_profile()


@pytest.mark.parametrize("name", profiles.available_profiles())
def test_every_profile_loads(name: str) -> None:
    profile = profiles.load_profile(name)
    assert profile.name == name
    assert profile.engine.get("max_model_len", 0) > 0
    assert "temperature" in profile.sampling
