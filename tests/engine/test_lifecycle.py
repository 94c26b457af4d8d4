"""helpers.engine: engine arguments, the validator gate, and one engine at a time."""

from __future__ import annotations

import json
import os

import psutil
import pytest

from helpers.common.envinfo import has_gpu
from helpers.common.profiles import load_profile
from helpers.engine import lifecycle as engine
from helpers.engine.lifecycle import (
    engine_kwargs,
    engine_processes,
    engines_left,
    open_engine,
    shutdown_engine,
    start_engine,
)
from helpers.engine.pairing import PairingError
from helpers.tiny.recipe import local_profile


def test_cpu_defaults_plain_and_speculative() -> None:
    profile = load_profile("tiny")
    plain = engine_kwargs(profile, k=None, gpu=False)
    assert "speculative_config" not in plain
    assert plain["dtype"] == "float32" and plain["enforce_eager"] is True
    assert plain["model"] == profile.verifier_path() and plain["max_model_len"] == 1024
    spec = engine_kwargs(profile, k=3, gpu=False)
    assert spec["speculative_config"] == {
        "model": profile.drafter_path(),
        "method": "eagle3",
        "num_speculative_tokens": 3,
    }
    # Speculative engines keep per-request acceptance (what the bootstrap intervals resample).
    assert spec["per_request_spec_decode_metrics"] == "summary"
    assert "per_request_spec_decode_metrics" not in plain


def test_gpu_defaults_by_model_size_and_overrides_win() -> None:
    kwargs = engine_kwargs(load_profile("tiny"), k=2, gpu=True, max_model_len=512)
    # The tiny pair on a GPU: eager and a small fixed KV cache (starts in seconds, leaves the GPU free).
    assert kwargs["dtype"] == "float32" and kwargs["enforce_eager"] is True
    assert kwargs["kv_cache_memory_bytes"] == 512 * 1024**2 and kwargs["max_model_len"] == 512
    real = engine_kwargs(load_profile("qwen3-30b-a3b"), k=3, gpu=True, dtype="bfloat16")
    assert "enforce_eager" not in real and real["gpu_memory_utilization"] == 0.85
    assert real["dtype"] == "bfloat16"


def test_broken_pair_fails_before_vllm_starts(tiny_pair, monkeypatch) -> None:
    config = json.loads((tiny_pair.drafter / "config.json").read_text())
    config["target_hidden_size"] = 2 * config["target_hidden_size"]
    (tiny_pair.drafter / "config.json").write_text(json.dumps(config))
    monkeypatch.setattr(
        engine, "shutdown_engine", lambda *a: pytest.fail("engine touched before validation")
    )
    kwargs = engine_kwargs(
        local_profile(tiny_pair.verifier.parent),
        k=3,
        gpu=False,
        model=str(tiny_pair.verifier),
        speculative_config={
            "model": str(tiny_pair.drafter),
            "method": "eagle3",
            "num_speculative_tokens": 3,
        },
    )
    with pytest.raises(PairingError, match="target_hidden_size_mismatch"):
        start_engine(**kwargs)


@pytest.mark.vllm
def test_starting_three_times_leaves_one_engine() -> None:
    kwargs = engine_kwargs(load_profile("tiny"), k=3)
    # In-process on a CPU: no engine process, the engine object itself is the one to count.
    expected = 1 if has_gpu() else 0
    engines = []
    try:
        for _ in range(3):
            engines.append(start_engine(**kwargs))
            assert len(engine_processes()) == expected
            assert engines_left() and engine._current is engines[-1]
    finally:
        shutdown_engine()
    psutil.wait_procs(engine_processes(), timeout=10)
    assert engines_left() == []


@pytest.mark.vllm
def test_cpu_engine_runs_in_process_and_leaves_torch_threads_settable() -> None:
    if has_gpu():
        pytest.skip("the in-process engine is the CPU path; a GPU engine keeps its processes")
    import torch

    before = torch.get_num_threads()
    with open_engine(**engine_kwargs(load_profile("tiny"), k=None)) as llm:
        assert type(llm.llm_engine.engine_core).__name__ == "InprocClient"
        assert os.environ[engine.IN_PROCESS_ENV] == "0"
        # vLLM's CPU worker swaps torch.set_num_threads for a no-op; start_engine puts it back.
        torch.set_num_threads(1)
        assert torch.get_num_threads() == 1
        torch.set_num_threads(before)
    assert torch.get_num_threads() == before
