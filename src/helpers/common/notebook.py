"""`setup_notebook()`: the explicit first call of every notebook (quiet logs, said out loud, and
servers and engines stopped when the kernel is terminated)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from helpers.common import envinfo
from helpers.common.paths import LOGS_DIR

__all__ = [
    "at_terminate",
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
#: Where the in-process engines' vLLM log goes (every process the kernel starts appends to it).
_VLLM_LOG: Path = LOGS_DIR / "vllm.log"


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
    """Set NOTEBOOK_ENV for this kernel and its children (values already set are kept), send vLLM's
    log to build/logs/vllm.log (errors still show), stop this kernel's servers and engine processes
    on SIGTERM (`_handle_sigterm`); print what it set."""
    _handle_sigterm()
    applied = {}
    threads = {"OMP_NUM_THREADS": str(min(envinfo.cpu_cores(), _MAX_CPU_THREADS))}
    for name, value in (_NOTEBOOK_ENV | threads).items():
        applied[name] = os.environ.setdefault(name, value)
    if "VLLM_LOGGING_CONFIG_PATH" not in os.environ:
        LOGS_DIR.mkdir(parents=True, exist_ok=True)
        config = LOGS_DIR / "vllm-logging.json"
        config.write_text(json.dumps(_vllm_logging_config(), indent=2) + "\n")
        os.environ["VLLM_LOGGING_CONFIG_PATH"] = str(config)
    applied["VLLM_LOGGING_CONFIG_PATH"] = os.environ["VLLM_LOGGING_CONFIG_PATH"]
    if verbose:
        print("setup_notebook: " + ", ".join(f"{k}={v}" for k, v in applied.items()))
        if applied["VLLM_LOGGING_CONFIG_PATH"]:
            print(f"vLLM's log (start-up warnings included): {_VLLM_LOG}; errors still show here")
    return applied
