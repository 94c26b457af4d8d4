"""The workbook's `vllm.general_plugins` entry point: what every vLLM process it starts loads first.

vLLM calls `vllm.plugins.load_general_plugins()` once per process (front end, engine core, each
worker, and the registry's inspection subprocess): it loads every entry point of the group
`vllm.general_plugins` and calls it, so spawned engine processes and `vllm serve` get the same
fixes. `VLLM_PLUGINS` filters them: unset loads all; set (comma-separated names), it must include
`eagle3_workbook`. A plugin may run several times per process tree, so both steps are idempotent,
and errors are logged, never raised: a broken fix must not stop a run that does not need it.

1. the eagle3 backport (PR #26485) on a vLLM older than 0.11.1; a no-op on newer ones;
2. the vLLM issue #55005 fix for T > 0 speculative sampling on a CPU; a no-op with Triton (GPU).
"""

from __future__ import annotations

import logging

from helpers.common.envinfo import vllm_version
from helpers.engine.eagle3_backport import apply_eagle3_patch, eagle3_status, patch_needed
from helpers.engine.vllm_issue_55005 import patch_cpu_expand_kernel

__all__ = [
    "register",
]

logger = logging.getLogger(__name__)


def register() -> dict[str, str]:
    """Apply both fixes where needed; return what each did (one short phrase each)."""
    done = {}
    version = vllm_version()
    try:
        if version and patch_needed(version):
            apply_eagle3_patch()
        done["eagle3"] = eagle3_status(
            inspect_class=bool(version) and patch_needed(version)
        ).explanation
    except Exception as err:  # noqa: BLE001 - a plugin must not take the engine down
        done["eagle3"] = f"patch failed ({type(err).__name__}: {err})"
    try:
        done["vllm_issue_55005"] = "patched" if patch_cpu_expand_kernel() else "not needed here"
    except Exception as err:  # noqa: BLE001
        done["vllm_issue_55005"] = f"fix failed ({type(err).__name__}: {err})"
    logger.info("eagle3_workbook plugin: %s", done)
    return done
