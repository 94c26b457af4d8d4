"""`setup_notebook()`: the explicit first call of every notebook (quiet logs, said out loud,
caches that can be written, and servers and engines stopped when the kernel is terminated)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from helpers.common import envinfo
from helpers.common.paths import BUILD_DIR, LOGS_DIR

__all__ = [
    "at_terminate",
    "cache_env",
    "setup_notebook",
]

#: What a notebook sets for itself and the vLLM processes it starts (setdefault: yours win).
_NOTEBOOK_ENV: dict[str, str] = {
    # vLLM's INFO lines (hundreds per engine start) drown the notebook's own output.
    "VLLM_LOGGING_LEVEL": "WARNING",
    # Library deprecation noise, inherited by vLLM's spawned engine processes.
    "PYTHONWARNINGS": "ignore::FutureWarning,ignore::DeprecationWarning",
    # tokenizers' fork warning when vLLM starts its engine process after a tokenizer ran.
    "TOKENIZERS_PARALLELISM": "false",
}
#: At most this many OpenMP threads for torch in the kernel (a GPU box's 16+ cores gain a tiny
#: model nothing, and notebooks or servers sharing the box would fight over them).
_MAX_CPU_THREADS = 8
#: numba's thread count (read when numba is first imported: vLLM's n-gram proposer imports it).
_NUMBA_THREADS = "NUMBA_NUM_THREADS"
#: Where the in-process engines' vLLM log goes (every process the kernel starts appends to it).
_VLLM_LOG: Path = LOGS_DIR / "vllm.log"
#: Where the caches go when HOME cannot be written.
_CACHE_DIR: Path = BUILD_DIR / "cache"
#: The caches vLLM, torch, matplotlib and IPython write under HOME by default, by environment
#: variable, with their folder under CACHE_DIR ("" for CACHE_DIR itself).
_CACHE_VARS: dict[str, str] = {
    "XDG_CACHE_HOME": "",
    "VLLM_CACHE_ROOT": "vllm",
    "VLLM_CONFIG_ROOT": "vllm-config",
    "TORCHINDUCTOR_CACHE_DIR": "torchinductor",
    "TRITON_CACHE_DIR": "triton",
    "MPLCONFIGDIR": "matplotlib",
    "IPYTHONDIR": "ipython",
}


def _writable(folder: Path) -> bool:
    """True when `folder` exists or can be made, and a file can be written in it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def cache_env(
    env: Mapping[str, str] | None = None, cache_dir: Path | None = None
) -> dict[str, str]:
    """When HOME's cache or config folder cannot be written (a read-only or missing HOME): the
    variables that send vLLM's, torch's, matplotlib's and IPython's caches under `cache_dir`
    (default build/cache) instead, those already set in `env` (default os.environ) left out;
    HF_HOME is pinned to where the hub cache was, so an offline hub model is still found. {} when
    HOME can be written."""
    env = os.environ if env is None else env
    cache_dir = _CACHE_DIR if cache_dir is None else cache_dir
    home = Path(env.get("HOME") or "/").expanduser()
    cache = Path(env.get("XDG_CACHE_HOME") or home / ".cache")
    config = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    if _writable(cache) and _writable(config):
        return {}
    moved = {
        name: str(cache_dir / folder) if folder else str(cache_dir)
        for name, folder in _CACHE_VARS.items()
        if name not in env
    }
    if "XDG_CACHE_HOME" in moved and "HF_HOME" not in env:
        moved["HF_HOME"] = str(cache / "huggingface")
    return moved


def _vllm_logging_config(log_file: Path = _VLLM_LOG) -> dict[str, Any]:
    """A logging dictConfig for vLLM: everything from INFO up to `log_file`, errors also on
    stdout."""
    formatter = {
        "()": "vllm.logging_utils.NewLineFormatter",
        "format": "%(levelname)s %(asctime)s [%(process)d %(filename)s:%(lineno)d] %(message)s",
        "datefmt": "%m-%d %H:%M:%S",
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"vllm": formatter},
        "handlers": {
            "file": {
                "class": "logging.FileHandler",
                "filename": str(log_file),
                "mode": "a",
                "formatter": "vllm",
                "level": "INFO",
            },
            "console": {
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stdout",
                "formatter": "vllm",
                "level": "ERROR",
            },
        },
        "loggers": {"vllm": {"handlers": ["file", "console"], "level": "INFO", "propagate": False}},
    }


_terminate_hooks: list[Callable[[], None]] = []
_previous_sigterm: Any = signal.SIG_DFL


def at_terminate(func: Callable[[], None]) -> Callable[[], None]:
    """Run `func` when this process gets SIGTERM (once setup_notebook handles it): the servers and
    engine processes it started, which its exit hooks would stop but SIGTERM skips. Last in, first
    run."""
    if func not in _terminate_hooks:
        _terminate_hooks.append(func)
    return func


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    """The SIGTERM handler: run the at_terminate hooks, then what SIGTERM did before (the
    previous handler, or the default: the process ends, killed by SIGTERM)."""
    for func in reversed(list(_terminate_hooks)):
        with contextlib.suppress(Exception):
            func()
    previous = _previous_sigterm
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:  # SIG_DFL, or a handler set outside Python
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def _handle_sigterm() -> bool:
    """Install `on_sigterm` for this process (once; it chains to the handler it replaces).
    Jupyter ends a kernel with SIGTERM when it does not stop within 2.5 s of a shutdown request,
    and SIGKILL 2.5 s later. False when it cannot be installed (not the main thread)."""
    global _previous_sigterm
    if threading.current_thread() is not threading.main_thread():
        return False
    current = signal.getsignal(signal.SIGTERM)
    if current is not _on_sigterm:
        _previous_sigterm = current
        signal.signal(signal.SIGTERM, _on_sigterm)
    return True


def setup_notebook(verbose: bool = True) -> dict[str, str]:
    """Set NOTEBOOK_ENV for this kernel and its children (values already set are kept), and the
    caches' folders when HOME cannot be written (`cache_env`); send vLLM's log to
    build/logs/vllm.log (errors still show), stop this kernel's servers and engine processes on
    SIGTERM (`_handle_sigterm`); print what it set."""
    _handle_sigterm()
    applied = {}
    threads = {"OMP_NUM_THREADS": str(min(envinfo.cpu_cores(), _MAX_CPU_THREADS))}
    for name, value in (_NOTEBOOK_ENV | threads | cache_env()).items():
        applied[name] = os.environ.setdefault(name, value)
    # vLLM's n-gram proposer sets OpenMP's threads back to numba's default after each proposal
    # (vllm/v1/spec_decode/ngram_proposer.py), every core unless NUMBA_NUM_THREADS says otherwise,
    # and torch then runs on that many: numba's default follows this kernel's OpenMP threads.
    applied[_NUMBA_THREADS] = os.environ.setdefault(_NUMBA_THREADS, applied["OMP_NUM_THREADS"])
    if "VLLM_LOGGING_CONFIG_PATH" not in os.environ:
        LOGS_DIR.mkdir(parents=True, exist_ok=True)
        config = LOGS_DIR / "vllm-logging.json"
        config.write_text(json.dumps(_vllm_logging_config(), indent=2) + "\n", encoding="utf-8")
        os.environ["VLLM_LOGGING_CONFIG_PATH"] = str(config)
    applied["VLLM_LOGGING_CONFIG_PATH"] = os.environ["VLLM_LOGGING_CONFIG_PATH"]
    if verbose:
        print("setup_notebook: " + ", ".join(f"{k}={v}" for k, v in applied.items()))
        if applied["VLLM_LOGGING_CONFIG_PATH"]:
            print(f"vLLM's log (start-up warnings included): {_VLLM_LOG}; errors still show here")
    return applied
