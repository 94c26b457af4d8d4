"""helpers.engine: engine arguments, the validator gate, and one engine at a time."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from transformers import AutoTokenizer

from helpers.common import qwen_tokenizer
from helpers.common.configs import read_config
from helpers.common.counters import acceptance_stats
from helpers.common.envinfo import has_gpu
from helpers.common.paths import REPO_ROOT
from helpers.common.profiles import Profile, load_profile
from helpers.common.prompts import as_messages, load_prompts
from helpers.engine import lifecycle as engine
from helpers.engine.lifecycle import (
    _SMALL_GPU_SHARE,
    _engine_processes,
    engine_kwargs,
    engines_left,
    open_engine,
    shutdown_engine,
    start_engine,
)
from helpers.engine.pairing import PairingError
from helpers.engine.runs import NEAR_TIE_MARGIN, lossless_check, pooled, run_categories, sampling
from kit.qwen_tokenizer import _MODEL_VOCAB_SIZE, PADDED_DIR
from kit.tiny_recipe import local_profile


def test_cpu_defaults_plain_and_speculative() -> None:
    profile = load_profile("tiny")
    plain = engine_kwargs(profile, k=0, gpu=False)
    assert "speculative_config" not in plain
    assert plain["dtype"] == "float32" and plain["enforce_eager"] is True
    assert plain["model"] == profile.verifier_path() and plain["max_model_len"] == 1024
    spec = engine_kwargs(profile, k=3, gpu=False)
    assert spec["speculative_config"] == {
        "model": profile.drafter_path(),
        "method": "eagle3",
        "num_speculative_tokens": 3,
    }
    # Speculative engines keep per-request acceptance (what the intervals over requests rest on).
    assert spec["per_request_spec_decode_metrics"] == "summary"
    assert "per_request_spec_decode_metrics" not in plain


def test_gpu_defaults_by_model_size_and_overrides_win() -> None:
    kwargs = engine_kwargs(load_profile("tiny"), k=2, gpu=True, max_model_len=512)
    # The tiny pair on a GPU: CUDA graphs without torch.compile and a small fixed KV cache (starts
    # in seconds, replays whole decode steps, leaves the GPU free).
    assert kwargs["dtype"] == "float32" and kwargs["enforce_eager"] is False
    graphs = kwargs["compilation_config"]
    assert graphs["mode"] == 0 and graphs["cudagraph_mode"] == "FULL_DECODE_ONLY"
    assert kwargs["kv_cache_memory_bytes"] == 512 * 1024**2 and kwargs["max_model_len"] == 512
    # ...and it needs only a small share of the GPU free to start, so it starts beside others.
    assert kwargs["gpu_memory_utilization"] == _SMALL_GPU_SHARE
    assert "gpu_memory_utilization" not in engine_kwargs(load_profile("tiny"), gpu=False)
    real = engine_kwargs(load_profile("qwen3-30b-a3b"), k=3, gpu=True, dtype="bfloat16")
    assert "enforce_eager" not in real and real["gpu_memory_utilization"] == 0.85
    assert real["dtype"] == "bfloat16"


@pytest.mark.usefixtures("qwen3_built")
def test_shape_profile_gets_real_model_defaults_and_random_weights() -> None:
    shape = engine_kwargs(load_profile("qwen3-30b-a3b-shape"), k=3, gpu=True)
    assert shape["tokenizer"] == str(PADDED_DIR), "Qwen3's own, padded"
    assert shape["load_format"] == "dummy" and shape["dtype"] == "auto"
    assert "enforce_eager" not in shape, "a real shape keeps CUDA graphs"
    # A fixed KV cache and a start-up share that lets two such engines share one 141 GB GPU.
    assert shape["kv_cache_memory_bytes"] == 2 * 1024**3
    assert shape["gpu_memory_utilization"] < 0.5
    assert shape["speculative_config"]["model"].endswith("data/shapes/qwen3-30b-a3b-eagle3")


def test_a_missing_tokenizer_folder_fails_in_one_line() -> None:
    shape = dataclasses.replace(load_profile("qwen3-30b-a3b-shape"), tokenizer="build/nowhere")
    with pytest.raises(
        FileNotFoundError, match="build/nowhere is not built: `make venv` builds it"
    ):
        engine_kwargs(shape, k=3, gpu=True)
    assert "tokenizer" not in engine_kwargs(load_profile("tiny"), k=3, gpu=False)


def edited_pair_kwargs(tiny_pair, monkeypatch, **drafter_changes) -> dict:
    """Engine arguments for the tiny pair with its drafter's config.json edited, and an engine
    that fails the test if anything starts one before the pairing check."""
    config = json.loads((tiny_pair.drafter / "config.json").read_text())
    (tiny_pair.drafter / "config.json").write_text(json.dumps({**config, **drafter_changes}))
    monkeypatch.setattr(
        engine, "shutdown_engine", lambda *a: pytest.fail("engine touched before validation")
    )
    return engine_kwargs(
        local_profile(tiny_pair.verifier.parent),
        k=3,
        gpu=False,
        model=str(tiny_pair.verifier),
        speculative_config={"model": str(tiny_pair.drafter), "method": "eagle3"},
    )


def test_broken_pair_fails_before_vllm_starts(tiny_pair, monkeypatch) -> None:
    hidden = json.loads((tiny_pair.drafter / "config.json").read_text())["target_hidden_size"]
    kwargs = edited_pair_kwargs(tiny_pair, monkeypatch, target_hidden_size=2 * hidden)
    with pytest.raises(PairingError, match="target_hidden_size_mismatch"):
        start_engine(**kwargs)


def test_a_mistyped_drafter_key_stops_start_engine_in_one_named_line(
    tiny_pair, monkeypatch
) -> None:
    kwargs = edited_pair_kwargs(tiny_pair, monkeypatch, draft_vocab_size="2048")
    with pytest.raises(PairingError) as err:
        start_engine(**kwargs)
    assert str(err.value) == (
        f"config_field_invalid: drafter {tiny_pair.drafter / 'config.json'}: draft_vocab_size "
        'is "2048" (a string), expected a positive integer or null'
    )


def test_an_in_process_start_that_fails_half_way_releases_what_it_built(monkeypatch) -> None:
    import vllm

    released = []

    def half_built(**kwargs):
        raise AssertionError  # vLLM #48494's capture assert has no message either

    monkeypatch.setattr(vllm, "LLM", half_built)
    monkeypatch.setattr(engine, "_release_gpu", lambda: released.append(True))
    monkeypatch.setattr(engine, "_validate_speculative_pair", lambda kwargs: None)
    with pytest.raises(AssertionError):
        start_engine(model="m", dtype="float32")
    assert released == [True] and engine._current is None
    monkeypatch.setenv(engine.ENGINE_PROCESS_ENV, "separate")
    with pytest.raises(AssertionError):
        start_engine(model="m", dtype="float32")
    assert released == [True], "an engine in its own processes took its state with it"


def test_a_hand_built_k_out_of_range_stops_start_engine(tiny_pair) -> None:
    spec = {"model": str(tiny_pair.drafter), "method": "eagle3", "num_speculative_tokens": 10**6}
    with pytest.raises(PairingError, match="k_out_of_range"):
        start_engine(model=str(tiny_pair.verifier), speculative_config=spec)


@pytest.mark.vllm
def test_starting_three_times_leaves_one_engine() -> None:
    kwargs = engine_kwargs(load_profile("tiny"), k=3)
    # In-process on one device: no engine process, the engine object itself is the one to count.
    expected = 0 if engine._runs_in_process(kwargs) else 1
    engines = []
    try:
        for _ in range(3):
            engines.append(start_engine(**kwargs))
            assert len(_engine_processes()) == expected
            assert engines_left() and engine._current is engines[-1]
    finally:
        shutdown_engine()
    psutil.wait_procs(_engine_processes(), timeout=10)
    assert engines_left() == []


@pytest.mark.vllm
def test_one_device_engine_runs_in_process_and_leaves_torch_threads_settable() -> None:
    import torch

    before = torch.get_num_threads()
    with open_engine(**engine_kwargs(load_profile("tiny"), k=0)) as llm:
        assert type(llm.llm_engine.engine_core).__name__ == "InprocClient"
        assert os.environ[engine.IN_PROCESS_ENV] == "0"
        # vLLM's CPU worker swaps torch.set_num_threads for a no-op; start_engine puts it back.
        torch.set_num_threads(1)
        assert torch.get_num_threads() == 1
        torch.set_num_threads(before)
    assert torch.get_num_threads() == before
    # The handle outlives its block; using it says what happened, in one line.
    with pytest.raises(engine._EngineShutDownError) as err:
        llm.generate(["Hello"], sampling(4))
    assert str(err.value).startswith("this engine was shut down (at the end of its `with")
    assert "\n" not in str(err.value) and engine._is_shut_down(llm)


#: Run in a fresh interpreter (numba reads NUMBA_NUM_THREADS once, when vLLM's n-gram proposer
#: first imports it): torch's threads while an n-gram engine runs, then after it ended.
_NGRAM_THREADS = """
import torch
from helpers.common.notebook import setup_notebook
from helpers.common.profiles import load_profile
from helpers.engine.lifecycle import engine_kwargs, open_engine
from helpers.engine.runs import sampling

setup_notebook(verbose=False)
torch.set_num_threads(1)
ngram = {"model": None, "method": "ngram", "num_speculative_tokens": 3}
ngram |= {"prompt_lookup_min": 2, "prompt_lookup_max": 4}
with open_engine(**engine_kwargs(load_profile("tiny"), k=3, speculative_config=ngram)) as llm:
    llm.generate(["one two three, one two three, one two"], sampling(8), use_tqdm=False)
    print("threads", torch.get_num_threads(), end=" ")
print(torch.get_num_threads())
"""


@pytest.mark.vllm
def test_an_ngram_engine_in_a_notebook_keeps_torchs_one_thread() -> None:
    """vLLM's n-gram proposer hands torch numba's default thread count (every core, 2 here, unset);
    setup_notebook's default follows OMP_NUM_THREADS, so torch keeps its one thread throughout."""
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS")}
    paths = [str(REPO_ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    env |= {"OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(paths)}
    run = subprocess.run(
        [sys.executable, "-c", _NGRAM_THREADS], env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[-3:] == ["threads", "1", "1"], run.stdout[-500:]


@pytest.mark.vllm
def test_the_end_of_an_engine_gives_torchs_threads_back() -> None:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with open_engine(**engine_kwargs(load_profile("tiny"), k=0)):
            torch.set_num_threads(2)  # as vLLM's n-gram proposer does under numba's default of 2
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


class FakeCore:
    """Stands in for vLLM's engine-core client: counts shutdowns."""

    def __init__(self) -> None:
        self.shutdowns = 0

    def shutdown(self) -> None:
        self.shutdowns += 1


def test_a_shut_down_engine_says_so_when_used() -> None:
    from types import SimpleNamespace

    core = FakeCore()
    llm = SimpleNamespace(llm_engine=SimpleNamespace(engine_core=core), model_config="kept")
    shutdown_engine(llm)
    assert core.shutdowns == 1 and engine._is_shut_down(llm)
    for use in (lambda: llm.llm_engine.add_request, lambda: llm.llm_engine.step()):
        with pytest.raises(engine._EngineShutDownError, match=r"^this engine was shut down \(by "):
            use()
    assert "shut down" in repr(llm.llm_engine) and llm.model_config == "kept"
    shutdown_engine(llm)  # a second shutdown is a no-op, not an error
    assert core.shutdowns == 1


def test_the_sigterm_hook_ends_engine_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    monkeypatch.setattr(engine, "_engine_processes", lambda: [psutil.Process(child.pid)])
    ended = engine._end_engine_processes(grace=5)
    assert len(ended) == 1 and f"pid {child.pid}" in ended[0]
    assert child.wait(timeout=10) is not None and child.poll() is not None
    from helpers.common import notebook

    assert engine._end_engine_processes in notebook._terminate_hooks


def test_one_device_runs_in_process_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(engine.ENGINE_PROCESS_ENV, raising=False)
    assert engine._runs_in_process({"model": "m"})
    assert engine._runs_in_process(
        {"tensor_parallel_size": 1, "distributed_executor_backend": "uni"}
    )
    assert not engine._runs_in_process({"tensor_parallel_size": 4})
    assert not engine._runs_in_process({"distributed_executor_backend": "mp"})
    monkeypatch.setenv(engine.ENGINE_PROCESS_ENV, "separate")
    assert not engine._runs_in_process({"model": "m"})


@pytest.fixture
def mini_shape(tmp_path: Path, qwen3_built: None) -> Profile:
    """A shape profile at the tiny's size with Qwen3's full vocabulary: config.json files, no
    weights, and the shape profile's own tokenizer (Qwen3's, padded to 151,936 ids)."""
    verifier, drafter = tmp_path / "verifier", tmp_path / "drafter"
    tiny, vocab = load_profile("tiny"), _MODEL_VOCAB_SIZE
    for source, folder in ((tiny.verifier_path(), verifier), (tiny.drafter_path(), drafter)):
        config = read_config(source)
        if "transformer_layer_config" in config:  # the speculators drafter
            config["transformer_layer_config"]["vocab_size"] = config["draft_vocab_size"] = vocab
            config["speculators_config"]["verifier"]["name_or_path"] = str(verifier)
        else:
            config["vocab_size"] = vocab
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(config))
    return dataclasses.replace(
        tiny, name="mini-shape", verifier=str(verifier), drafter=str(drafter),
        engine={**tiny.engine, "load_format": "dummy"},
        tokenizer=load_profile("qwen3-30b-a3b-shape").tokenizer,
    )  # fmt: skip


@pytest.mark.vllm
def test_random_weights_run_with_qwens_padded_tokenizer(mini_shape: Profile) -> None:
    """The shape profiles' path at the tiny's size: no weights, real Qwen3 prompts, every id decodes."""
    assert not mini_shape.has_weights
    prompts = load_prompts(1)
    with open_engine(**engine_kwargs(mini_shape, k=3)) as llm:
        spec = run_categories(llm, prompts, sampling(24))
        tok = llm.get_tokenizer()
        assert tok.convert_tokens_to_ids("<|im_start|>") == 151_644
        assert tok.decode([151_935]) == "<x151935>", "the engine's tokenizer is padded"
        prompt = as_messages(prompts["code"][0])
        sent = llm.chat([prompt], sampling(1), use_tqdm=False)[0].prompt_token_ids
        qwen = AutoTokenizer.from_pretrained(qwen_tokenizer.TOKENIZER_DIR)
        assert sent == list(
            qwen.apply_chat_template(prompt, add_generation_prompt=True)["input_ids"]
        )
        assert sent[0] == 151_644, "a real Qwen3 token sequence"
    with open_engine(**engine_kwargs(mini_shape, k=0)) as llm:
        plain = run_categories(llm, prompts, sampling(24, logprobs=2))
    assert all(text for run in spec.values() for text in run.texts), "every answer decodes"
    # Two random models rarely agree: the drafter's guesses are (almost) never accepted.
    assert acceptance_stats(pooled(spec))["spec_decode_acceptance_length"] < 1.1
    for cat in prompts:
        report = lossless_check(plain[cat].token_ids, spec[cat].token_ids, plain[cat].margins)
        assert (
            report.all_identical
            if not has_gpu()
            else report.all_at_near_ties(NEAR_TIE_MARGIN["float32"])
        ), report


def test_a_gpu_sized_profile_on_a_cpu_fails_in_one_line() -> None:
    for name, need in (
        ("qwen3-30b-a3b-shape", 1),
        ("qwen3-30b-a3b", 1),
        ("qwen3-235b-a22b-shape", 4),
    ):
        with pytest.raises(RuntimeError, match=f"profile {name} needs {need} CUDA GPU") as info:
            engine_kwargs(load_profile(name), k=3, gpu=False)
        assert "\n" not in str(info.value) and "PROFILE=tiny" in str(info.value)


@pytest.mark.parametrize("name", ["qwen3-235b-a22b-shape", "qwen3-235b-a22b"])
def test_a_four_gpu_profile_on_one_gpu_fails_in_one_line(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Before vLLM starts: tensor parallel 4 on a one-GPU machine would fail deep in its workers."""
    monkeypatch.setattr(engine, "gpu_count", lambda: 1)
    with pytest.raises(RuntimeError) as info:
        engine_kwargs(load_profile(name), k=3, gpu=True)
    message = str(info.value)
    assert message.startswith(f"profile {name} needs 4 CUDA GPUs and this machine has 1: ")
    assert "\n" not in message and "qwen3-30b-a3b-shape" in message and "tiny" in message


@pytest.mark.usefixtures("qwen3_built")
def test_235b_shape_engine_arguments_on_four_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "gpu_count", lambda: 4)
    kwargs = engine_kwargs(load_profile("qwen3-235b-a22b-shape"), k=3, gpu=True)
    assert kwargs["tensor_parallel_size"] == 4 and kwargs["load_format"] == "dummy"
    assert kwargs["dtype"] == "auto" and "enforce_eager" not in kwargs, "bf16, CUDA graphs"
    assert kwargs["kv_cache_memory_bytes"] == 4 * 1024**3, "per GPU in vLLM"
    assert kwargs["tokenizer"] == str(PADDED_DIR)
    spec = kwargs["speculative_config"]
    assert (
        spec["model"].endswith("data/shapes/qwen3-235b-a22b-eagle3") and spec["method"] == "eagle3"
    )
    assert "draft_tensor_parallel_size" not in spec, "the EAGLE-3 head follows the verifier's tp"
    assert not kwargs.get("enable_expert_parallel"), "no expert parallelism"


def test_engine_process_puts_a_one_device_engine_in_this_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(engine.ENGINE_PROCESS_ENV, raising=False)
    monkeypatch.delenv(engine.IN_PROCESS_ENV, raising=False)
    for name in engine.ENGINE_ENV:
        monkeypatch.delenv(name, raising=False)
    with engine.engine_process({"dtype": "float32"}) as settings:
        assert settings == {"distributed_executor_backend": "uni", "dtype": "float32"}
        assert os.environ[engine.IN_PROCESS_ENV] == "0"
        assert all(os.environ[name] == value for name, value in engine.ENGINE_ENV.items())
    monkeypatch.setenv(engine.ENGINE_PROCESS_ENV, "separate")
    with engine.engine_process({"dtype": "float32"}) as settings:
        assert settings == {"dtype": "float32"}
        assert engine.IN_PROCESS_ENV not in os.environ


def test_engine_process_releases_a_half_built_engine_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    released: list[bool] = []
    monkeypatch.delenv(engine.ENGINE_PROCESS_ENV, raising=False)
    monkeypatch.setattr(engine, "_release_gpu", lambda: released.append(True))
    with pytest.raises(RuntimeError, match="capture failed"):
        with engine.engine_process({}):
            raise RuntimeError("capture failed")
    assert released == [True]
