"""scripts/gpu_stack/: the GPU test stack's wheel list pins what the requirements pin, every wheel
with its hash, and what stays behind is named once with its reason."""

from __future__ import annotations

import re

from helpers.common.paths import REPO_ROOT
from tests.support import load_script

STACK = REPO_ROOT / "scripts" / "gpu_stack"


def _wheels() -> dict[str, str]:
    """name -> version of every line of wheels.txt (each checked for its sha256)."""
    out = {}
    for line in (STACK / "wheels.txt").read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+) --hash=sha256:([0-9a-f]{64})", line)
        assert m, f"not 'name==version --hash=sha256:HEX': {line}"
        out[m[1].lower().replace("_", "-")] = m[2]
    return out


def _pins(name: str) -> dict[str, str]:
    """name -> version of the == pins of requirements/<name>.txt."""
    text = (REPO_ROOT / "requirements" / f"{name}.txt").read_text()
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", text, re.M)
    return {n.lower().replace("_", "-"): v for n, v in pins}


def test_the_stack_is_the_pinned_vllm_with_the_workbooks_pins() -> None:
    wheels = _wheels()
    assert wheels["vllm"] == _pins("gpu")["vllm"]
    # what the CPU stack pins too: the same torch, and the notebook stack's own pins
    assert wheels["torch"] == _pins("cpu")["torch"]
    for name, version in _pins("common").items():
        if name in wheels:
            assert wheels[name] == version, name


def test_what_stays_behind_is_named_once_and_never_packed() -> None:
    resolve = load_script("gpu_stack/resolve")
    behind = set(resolve.IMAGE_HAS) | set(resolve.NOT_IMPORTED)
    assert not set(resolve.IMAGE_HAS) & set(resolve.NOT_IMPORTED)
    assert not behind & set(_wheels()), "a wheel both packed and left behind"
    # torch 2.13.0 imports NCCL symbols the image's 2.28.9 lacks: NCCL travels
    assert "nvidia-nccl-cu13" in _wheels() and "nvidia-nccl-cu13" not in behind
