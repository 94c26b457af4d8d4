"""The workbook's `vllm.general_plugins` entry point: what every vLLM process it starts loads first.

vLLM calls `vllm.plugins.load_general_plugins()` once per process (front end, engine core, each
worker, and the registry's inspection subprocess): it loads every entry point of the group
`vllm.general_plugins` and calls it, so spawned engine processes and `vllm serve` get the same
fix. `VLLM_PLUGINS` filters them: unset loads all; set (comma-separated names), it must include
`eagle3_workbook`. A plugin may run several times per process tree, so the fix is idempotent,
and its errors are logged, never raised: a broken fix must not stop a run that does not need it.

It carries two fixes: vLLM issue #55005 (T > 0 speculative sampling on a CPU), a no-op with Triton
(GPU); and streamed responses that lose their request's acceptance record when the front end merges
outputs (`helpers.engine.vllm_stream_records`), a no-op on a vLLM without per-request records.
"""

from __future__ import annotations

import logging

from helpers.engine.vllm_issue_55005 import patch_cpu_expand_kernel
from helpers.engine.vllm_stream_records import patch_stream_records

__all__ = [
    "register",
]

logger = logging.getLogger(__name__)


def register() -> dict[str, str]:
    """Apply each fix where needed; return what each did (one short phrase)."""
    done = {}
    for name, fix in (
        ("vllm_issue_55005", patch_cpu_expand_kernel),
        ("stream_records", patch_stream_records),
    ):
        try:
            done[name] = "patched" if fix() else "not needed here"
        except Exception as err:
            done[name] = f"fix failed ({type(err).__name__}: {err})"
    logger.info("eagle3_workbook plugin: %s", done)
    return done
