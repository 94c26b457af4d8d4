"""helpers.engine.vllm_stream_records: merged stream outputs keep the request's acceptance record."""

from __future__ import annotations

import pytest

from helpers.engine import compat
from helpers.engine.vllm_stream_records import _FIX_MARK, _merge_keeps_records, patch_stream_records


def outputs(record: object | None, text: str, finish: str | None) -> object:
    """A RequestOutput with one completion (index 0)."""
    from vllm.outputs import CompletionOutput, RequestOutput

    completion = CompletionOutput(0, text, [1], None, None, finish_reason=finish)
    if record is not None:
        completion.spec_decode_metrics = record
    return RequestOutput("r", None, [1], None, [completion], finished=finish is not None)


def test_a_merged_stream_keeps_the_last_outputs_record() -> None:
    pytest.importorskip("vllm")
    if not compat.supports("per_request_spec_decode_metrics"):
        pytest.skip(compat.FEATURES["per_request_spec_decode_metrics"].lost)
    from vllm.outputs import RequestOutput
    from vllm.v1.metrics.stats import RequestSpecDecodeMetrics

    record = RequestSpecDecodeMetrics(3, [1, 0, 1, 2], 12)
    patch_stream_records()  # what the plugin does in every vLLM process
    assert getattr(RequestOutput.add, _FIX_MARK) and _merge_keeps_records(RequestOutput.add)
    pending = outputs(None, "Hel", None)  # the handler has not taken this one yet
    pending.add(outputs(record, "lo", "stop"), aggregate=True)  # the engine's last output arrives
    merged = pending.outputs[0]
    assert merged.text == "Hello" and merged.finish_reason == "stop"
    assert merged.spec_decode_metrics is record
    # without aggregation the newer completion replaces the older one, record and all
    plain = outputs(None, "Hel", None)
    plain.add(outputs(record, "Hello", "stop"), aggregate=False)
    assert plain.outputs[0].spec_decode_metrics is record
    assert patch_stream_records() is False  # idempotent


def test_the_quirk_names_the_fix() -> None:
    assert "vllm_stream_records" in compat.QUIRKS["stream_record_dropped"].instead
