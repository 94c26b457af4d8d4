"""`setup_notebook()`: the explicit first call of every notebook (quiet logs, said out loud)."""

from __future__ import annotations

import os

__all__ = [
    "NOTEBOOK_ENV",
    "setup_notebook",
]

#: What a notebook sets for itself and the vLLM processes it starts (setdefault: yours win).
NOTEBOOK_ENV: dict[str, str] = {
    # vLLM's INFO lines (hundreds per engine start) drown the notebook's own output.
    "VLLM_LOGGING_LEVEL": "WARNING",
    # Library deprecation noise, inherited by vLLM's spawned engine processes.
    "PYTHONWARNINGS": "ignore::FutureWarning,ignore::DeprecationWarning",
    # tokenizers' fork warning when vLLM starts its engine process after a tokenizer ran.
    "TOKENIZERS_PARALLELISM": "false",
}


def setup_notebook(verbose: bool = True) -> dict[str, str]:
    """Set NOTEBOOK_ENV for this kernel and its children (values already set are kept); print them."""
    applied = {}
    for name, value in NOTEBOOK_ENV.items():
        applied[name] = os.environ.setdefault(name, value)
    if verbose:
        print("setup_notebook: " + ", ".join(f"{k}={v}" for k, v in applied.items()))
    return applied
