"""A vLLM fix: a streamed response keeps its request's acceptance record when outputs are merged.

A server started with `--per-request-spec-decode-metrics` puts each finished request's acceptance
record on its last output (`CompletionOutput.spec_decode_metrics`), and the streaming handler
copies it into the final usage chunk. When the handler has not yet taken the previous output of a
stream (a busy front end, many concurrent streams), vLLM merges the next one into it
(`RequestOutput.add(..., aggregate=True)`): text, token ids, log-probs, finish reason and routed
experts are carried over, the acceptance record is not, so the stream ends without
`metrics.speculative_decoding` (compat.QUIRKS["stream_record_dropped"] says where it was seen).

The workbook's `vllm.general_plugins` entry point (`helpers.engine.plugin:register`) calls
`patch_stream_records()` in every vLLM process (the front end, which merges, among them); it does
nothing on a vLLM without per-request records or whose merge already carries them.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from helpers.common import vllm_names

__all__ = []  # used only inside helpers.engine

#: Attribute set on the patched `RequestOutput.add` (so a second call patches nothing).
_FIX_MARK = "_eagle3_workbook_keeps_records"


def _merge_keeps_records(add: Any) -> bool:
    """True when a `RequestOutput.add` already carries the acceptance record (fixed or patched)."""
    if getattr(add, _FIX_MARK, False):
        return True
    try:
        return vllm_names.PER_REQUEST.output_attr in inspect.getsource(add)
    except (OSError, TypeError):
        return False


def patch_stream_records() -> bool:
    """Make `RequestOutput.add` carry each completion's acceptance record; True when it patched.

    Not needed (False) where CompletionOutput has no record (a vLLM without per-request
    acceptance) or the merge already carries it.
    """
    from vllm.outputs import CompletionOutput, RequestOutput

    fields = inspect.signature(CompletionOutput).parameters
    if vllm_names.PER_REQUEST.output_attr not in fields or _merge_keeps_records(RequestOutput.add):
        return False
    original = RequestOutput.add

    @functools.wraps(original)
    def add(self: Any, next_output: Any, aggregate: bool) -> None:
        """vLLM's merge, then each completion's record from the newer output where it has one."""
        records = {
            c.index: getattr(c, vllm_names.PER_REQUEST.output_attr)
            for c in next_output.outputs
            if getattr(c, vllm_names.PER_REQUEST.output_attr, None) is not None
        }
        original(self, next_output, aggregate)
        for completion in self.outputs:
            if completion.index in records:
                setattr(completion, vllm_names.PER_REQUEST.output_attr, records[completion.index])

    setattr(add, _FIX_MARK, True)
    RequestOutput.add = add
    return True
