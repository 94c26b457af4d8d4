"""Start and stop an in-process vLLM engine for a profile, with or without an EAGLE-3 drafter (notebook 02).

Only one engine lives at a time: starting a new one shuts the previous one down, so re-running
a notebook cell never leaves a second engine process holding memory.
"""
from __future__ import annotations

import atexit
import contextlib
import gc
import os
from collections.abc import Iterator
from typing import Any

os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
# vLLM's spawned engine processes inherit this: keeps library deprecation noise out of notebooks.
os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning,ignore::DeprecationWarning")

from helpers.profiles import Profile, load_profile  # noqa: E402

#: KV cache for the tiny pair on a CPU: 4 KiB per token, so 512 MiB holds ~130k tokens.
CPU_KV_CACHE_BYTES = 512 * 1024**2

_current: Any = None


def has_gpu() -> bool:
    """True when torch sees a CUDA device."""
    import torch

    return torch.cuda.is_available()


def device_defaults(gpu: bool) -> dict[str, Any]:
    """Engine arguments that depend on the device, chosen from measurements on each.

    CPU: float32 (greedy outputs then match plain decoding token for token), eager mode
    (starts in ~17 s; compilation adds start-up time for little gain on a 4 M-parameter
    model), and a fixed 512 MiB KV cache instead of a share of host RAM.
    GPU: the checkpoint's dtype, CUDA graphs, 85 % of GPU memory.
    """
    if gpu:
        return {"dtype": "auto", "gpu_memory_utilization": 0.85}
    return {"dtype": "float32", "enforce_eager": True, "kv_cache_memory_bytes": CPU_KV_CACHE_BYTES}


def speculative_config(drafter: str, k: int, method: str = "eagle3") -> dict[str, Any]:
    """The `speculative_config` dict vLLM takes: drafter model, method, and k draft tokens."""
    return {"model": drafter, "method": method, "num_speculative_tokens": k}


def engine_kwargs(
    profile: Profile | None = None,
    k: int | None = None,
    drafter: str | None = None,
    gpu: bool | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """Keyword arguments for `vllm.LLM`: device defaults < profile engine args < overrides.

    `k=None` or `k=0` gives plain decoding; otherwise the profile's drafter (or `drafter`)
    proposes k tokens per step.
    """
    profile = profile or load_profile()
    gpu = has_gpu() if gpu is None else gpu
    kwargs: dict[str, Any] = {"model": profile.verifier_path(), "seed": 0, "disable_log_stats": False}
    kwargs.update(device_defaults(gpu))
    kwargs.update(profile.engine)
    if k:
        kwargs["speculative_config"] = speculative_config(drafter or profile.drafter_path(), k)
    kwargs.update(overrides)
    return kwargs


def engine_processes() -> list[Any]:
    """Live vLLM engine-core processes started from this Python process."""
    import psutil

    return [p for p in psutil.Process().children(recursive=True)
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE and "EngineCore" in p.name()]


def shutdown_engine(llm: Any | None = None) -> None:
    """Shut an engine down (default: the current one) and free its process and memory."""
    global _current
    llm = llm if llm is not None else _current
    if llm is None:
        return
    with contextlib.suppress(Exception):
        llm.llm_engine.engine_core.shutdown()
    if llm is _current:
        _current = None
    del llm
    gc.collect()


def validate_speculative_pair(kwargs: dict[str, Any]) -> None:
    """Run the pairing validator on an eagle3 speculative_config before any weights load.

    Errors raise PairingError (one line each); warnings are printed, one line each.
    """
    spec = kwargs.get("speculative_config") or {}
    if not spec.get("model") or spec.get("method") not in (None, "eagle", "eagle3"):
        return
    from helpers.pairing import check_pair

    report = check_pair(kwargs["model"], spec["model"], spec.get("method"), kwargs.get("max_model_len"),
                        verifier_name=kwargs["model"])
    for problem in report.warnings:
        print(f"pairing warning: {problem.code}: {problem.message}")


def start_engine(**kwargs: Any) -> Any:
    """Validate the pair, then start `vllm.LLM(**kwargs)` after shutting down any earlier engine."""
    global _current
    validate_speculative_pair(kwargs)
    shutdown_engine()
    from vllm import LLM

    _current = LLM(**kwargs)
    return _current


@contextlib.contextmanager
def open_engine(**kwargs: Any) -> Iterator[Any]:
    """`with open_engine(**engine_kwargs(...)) as llm:` — the engine is shut down on exit."""
    llm = start_engine(**kwargs)
    try:
        yield llm
    finally:
        shutdown_engine(llm)


atexit.register(shutdown_engine)
