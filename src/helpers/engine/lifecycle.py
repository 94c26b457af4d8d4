"""Start and stop a `vllm.LLM` engine for a profile, with or without an EAGLE-3 drafter.

One engine lives at a time, visibly: starting a new one while another runs prints one line and
shuts the old one down first, so re-running a notebook cell never leaves a second engine
holding memory; the last one is shut down at interpreter exit too.

An engine on one device (a CPU, or one GPU) runs inside the calling Python process (see
`start_engine`); across several GPUs vLLM starts its engine-core and worker processes as usual.
`ENGINE_PROCESS_ENV=separate` gives one device vLLM's own processes too (for measuring both).

A shut-down engine says so: any use of its `LLM` object afterwards raises EngineShutDownError
in one line instead of an AttributeError from deep inside vLLM. When the kernel gets SIGTERM
(see helpers.common.notebook.setup_notebook), engine processes of this process are ended too.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import time
from collections.abc import Iterator
from typing import Any

from helpers.common import vllm_names
from helpers.common.envinfo import gpu_count, has_gpu
from helpers.common.notebook import at_terminate
from helpers.common.paths import LOGS_DIR
from helpers.common.profiles import Profile, profiles_for_gpus, resolve_k
from helpers.engine import compat
from helpers.engine.in_process import building_in_process
from helpers.engine.pairing import check_pair

__all__ = [
    "IN_PROCESS_ENV",
    "ENGINE_PROCESS_ENV",
    "ENGINE_ENV",
    "SMALL_GPU_GRAPHS",
    "device_defaults",
    "speculative_config",
    "engine_kwargs",
    "journal_start",
    "engines_left",
    "shutdown_engine",
    "engine_process",
    "start_engine",
    "open_engine",
]

#: KV cache for the tiny pair: 4 KiB per token, so 512 MiB holds ~130k tokens.
_SMALL_KV_CACHE_BYTES = 512 * 1024**2
#: Share of the GPU that must be free when a tiny engine starts (vLLM's start-up check; with a
#: fixed KV cache nothing is sized from it): 5 % of an H200 is 7 GiB, so it starts beside others.
_SMALL_GPU_SHARE = 0.05
#: CUDA graphs without torch.compile (compilation mode NONE): whole uniform decode steps captured
#: (vLLM's FULL_DECODE_ONLY; a k-draft verify step is a uniform batch of k + 1 tokens a request),
#: prefill and mixed steps eager. vLLM rounds capture sizes to multiples of k + 1 under
#: speculation (config/compilation.py), so 128 tokens cover 32 requests verifying 3 drafts.
SMALL_GPU_GRAPHS: dict[str, Any] = {
    "enforce_eager": False,
    "compilation_config": {
        "mode": 0,
        "cudagraph_mode": "FULL_DECODE_ONLY",
        "cudagraph_capture_sizes": [1, 2, 4, 8, 16, 32, 64, 128],
    },
}
#: How vLLM starts engine processes on a GPU: a fresh interpreter, so CUDA state never crosses a
#: fork.
_GPU_MULTIPROC_METHOD = "spawn"
#: Set to "0", vLLM runs the engine core in the calling process instead of a child process.
IN_PROCESS_ENV = "VLLM_ENABLE_V1_MULTIPROCESSING"
#: The workbook's switch: "separate" starts even a one-device engine in vLLM's own processes.
ENGINE_PROCESS_ENV = "WORKBOOK_ENGINE_PROCESS"
#: Environment every engine and server of the workbook starts with (values already set are kept).
#: flashinfer's top-k/top-p sampler is compiled by ninja the first time a machine uses it: on a
#: fresh H200 that was 118 s of the first engine's 187 s start (scripts/gpu_engine_lab.py's
#: profile); vLLM's PyTorch sampler needs no compilation.
ENGINE_ENV = {"VLLM_USE_FLASHINFER_SAMPLER": "0"}

#: Per-request acceptance histograms: what the intervals over requests rest on (a vLLM without them
#: drops the argument at start, see `compat.dropped_args`).
_PER_REQUEST_METRICS = {vllm_names.PER_REQUEST.arg: vllm_names.PER_REQUEST.summary}

#: One JSON line per engine or server start: when, which model and k, seconds, the model runner.
_JOURNAL_NAME = "engine-starts.jsonl"

_current: Any = None
#: torch's intra-op threads when the current engine started, put back when it is shut down. vLLM's
#: n-gram proposer sets the process's OpenMP threads through numba, back to numba's default of
#: every core after each proposal (vllm/v1/spec_decode/ngram_proposer.py), and torch reads that
#: count: every later torch op in the process ran on every core (measured: notebook 07 on 2 cores
#: under OMP_NUM_THREADS=1 used 240 CPU-seconds in 159 s, a second OpenMP thread spinning).
_threads_at_start: int | None = None


def device_defaults(gpu: bool, small_model: bool = False) -> dict[str, Any]:
    """Engine arguments that depend on the device and the model's size, chosen from measurements.

    CPU: float32 (greedy outputs then match plain decoding token for token), eager mode
    (compilation adds start-up time for little gain on a 4 M-parameter model), and a fixed 512 MiB
    KV cache instead of a share of host RAM.
    GPU, a small local model (the tiny pair): float32, the same 512 MiB KV cache, and CUDA graphs
    without torch.compile (`SMALL_GPU_GRAPHS`): a 4 M-parameter step is kernel launches, not
    arithmetic, so replaying whole decode steps is what makes it fast, and skipping compilation
    keeps an engine start to seconds (scripts/gpu_engine_lab.py measures both, eager beside
    graphs); it only needs SMALL_GPU_SHARE of the GPU free to start, not vLLM's default 90 %.
    GPU, a real model: the checkpoint's dtype, vLLM's compiled CUDA graphs, 85 % of GPU memory
    (a profile's own engine arguments override these).
    """
    if gpu and not small_model:
        return {"dtype": "auto", "gpu_memory_utilization": 0.85}
    if gpu:
        graphs = SMALL_GPU_GRAPHS | {"gpu_memory_utilization": _SMALL_GPU_SHARE}
        return {"dtype": "float32", "kv_cache_memory_bytes": _SMALL_KV_CACHE_BYTES} | graphs
    return {
        "dtype": "float32",
        "enforce_eager": True,
        "kv_cache_memory_bytes": _SMALL_KV_CACHE_BYTES,
    }


def _profile_engine_args(profile: Profile, gpu: bool) -> dict[str, Any]:
    """The device defaults for the profile's size, then its own engine arguments; a profile sized
    for GPUs fails in one line on a CPU, and one sized for several GPUs on a machine with fewer
    (nvidia-smi counts them). In-process engines and servers share it."""
    need = profile.gpus_needed
    if need and not gpu:
        raise RuntimeError(
            f"profile {profile.name} needs {need} CUDA GPU(s) and this machine has "
            f"none: run it on a GPU, or use PROFILE=tiny"
        )
    if need > 1 and (have := gpu_count()) < need:
        raise RuntimeError(
            f"profile {profile.name} needs {need} CUDA GPUs and this machine has {have}: run it "
            f"on a machine with {need}, or a profile for {have}: "
            f"{', '.join(profiles_for_gpus(have))}"
        )
    return {**device_defaults(gpu, small_model=need == 0), **profile.engine}


def speculative_config(drafter: str, k: int, method: str = "eagle3") -> dict[str, Any]:
    """The `speculative_config` dict vLLM takes (and `vllm serve --speculative-config` as JSON)."""
    return {"model": drafter, "num_speculative_tokens": k, "method": method}


def engine_kwargs(
    profile: Profile,
    k: int | None = None,
    drafter: str | None = None,
    gpu: bool | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """Keyword arguments for `vllm.LLM`: device defaults < profile engine args < overrides.

    `k` as `profiles.resolve_k` reads it (None: the profile's k, 0: plain decoding); a speculative
    engine's drafter is the profile's (or `drafter`). A profile with its own tokenizer folder
    passes it as `tokenizer`.
    """
    k = resolve_k(profile, k)
    gpu = has_gpu() if gpu is None else gpu
    kwargs: dict[str, Any] = {
        "model": profile.verifier_path(),
        "seed": 0,
        "disable_log_stats": False,
        **_profile_engine_args(profile, gpu),
    }
    if profile.tokenizer is not None:  # a shape profile: Qwen3's tokenizer, built by make venv
        kwargs["tokenizer"] = profile.tokenizer_path()
    if k:
        kwargs["speculative_config"] = speculative_config(drafter or profile.drafter_path(), k)
        kwargs.update(_PER_REQUEST_METRICS)
    kwargs.update(overrides)
    return kwargs


def journal_start(record: dict[str, Any]) -> None:
    """Append one engine or server start to build/logs/engine-starts.jsonl (with the time and
    this process's pid): what a run's table of engine starts and model runners is read from."""
    LOGS_DIR.mkdir(parents=True, exist_ok=True)
    line = {"time": round(time.time(), 1), "pid": os.getpid(), **record}
    with (LOGS_DIR / _JOURNAL_NAME).open("a", encoding="utf-8") as journal:
        journal.write(json.dumps(line) + "\n")


def _model_runner(llm: Any) -> str | None:
    """ "V2" or "V1": the model runner vLLM chose for this engine's config (the property its GPU
    worker reads, config/vllm.py), None where vLLM does not say."""
    try:
        v2 = llm.llm_engine.vllm_config.use_v2_model_runner
    except Exception:
        return None
    return "V2" if v2 else "V1"


def _engine_processes() -> list[Any]:
    """Live vLLM engine-core processes started from this Python process."""
    import psutil

    return [
        p
        for p in psutil.Process().children(recursive=True)
        if p.is_running() and p.status() != psutil.STATUS_ZOMBIE and "EngineCore" in p.name()
    ]


def engines_left() -> list[str]:
    """What is still running of the engines this process started: engine processes, and an
    engine that `start_engine` started and nothing has shut down."""
    left = [f"{p.name()} (pid {p.pid})" for p in _engine_processes()]
    if _current is not None:
        left.append("an engine from start_engine, not shut down")
    return left


class _EngineShutDownError(RuntimeError):
    """An engine was used after `shutdown_engine` (or the end of its `open_engine` block) stopped
    it."""


class _ShutDownEngine:
    """What a shut-down `LLM` holds instead of its vLLM engine: every use raises one clear line."""

    def __init__(self, how: str) -> None:
        self._how = how

    def __getattr__(self, name: str) -> Any:
        raise _EngineShutDownError(
            f"this engine was shut down ({self._how}): start a new one, e.g. "
            f"`with lifecycle.open_engine(**lifecycle.engine_kwargs(profile, k=...)) as llm:`, "
            f"and use it inside that block"
        )

    def __repr__(self) -> str:
        return f"<vLLM engine, shut down ({self._how})>"


def _is_shut_down(llm: Any) -> bool:
    """True for an `LLM` that shutdown_engine stopped."""
    return isinstance(getattr(llm, "__dict__", {}).get("llm_engine"), _ShutDownEngine)


def shutdown_engine(llm: Any | None = None, how: str = "by lifecycle.shutdown_engine") -> None:
    """Shut an engine down (default: the current one) and free its process and memory; the `LLM`
    object then raises EngineShutDownError when used (`how` says what stopped it). The current
    engine also gives torch's threads back as it found them (`_threads_at_start`)."""
    global _current
    llm = llm if llm is not None else _current
    if llm is None or _is_shut_down(llm):
        return
    with contextlib.suppress(Exception):
        llm.llm_engine.engine_core.shutdown()
    in_process = type(getattr(llm.llm_engine, "engine_core", None)).__name__ == "InprocClient"
    if llm is _current:
        _current = None
        _put_back_threads()
    # Drop the engine (and with it the model) from the object the caller still holds.
    with contextlib.suppress(AttributeError, TypeError):
        llm.llm_engine = _ShutDownEngine(how)
    del llm
    gc.collect()
    if in_process and has_gpu():
        _release_gpu()


def _put_back_threads() -> None:
    """torch's intra-op threads as they were when the engine that just ended started."""
    global _threads_at_start
    if _threads_at_start is None:
        return
    import torch

    if torch.get_num_threads() != _threads_at_start:
        torch.set_num_threads(_threads_at_start)
    _threads_at_start = None


def _end_engine_processes(grace: float = 1.0) -> list[str]:
    """SIGTERM the engine-core processes this process started, SIGKILL them after `grace` s
    (what the SIGTERM handler runs: an in-process engine ends with the process itself)."""
    import psutil

    procs = _engine_processes()
    ended = [f"{p.name()} (pid {p.pid})" for p in procs]
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, alive = psutil.wait_procs(procs, timeout=grace)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(alive, timeout=5)
    return ended


def _release_gpu() -> None:
    """After an in-process engine (shut down, or one whose start failed half-way): tear down
    vLLM's process groups and return its GPU memory (an engine in this process holds both until
    then; the next engine builds them anew)."""
    from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

    with contextlib.suppress(Exception):
        cleanup_dist_env_and_memory()


def _validate_speculative_pair(kwargs: dict[str, Any]) -> None:
    """Run the pairing validator on an eagle3 speculative_config before any weights load.

    Errors raise PairingError (one line each); warnings are printed, one line each.
    """
    spec = kwargs.get("speculative_config") or {}
    if not spec.get("model") or spec.get("method") not in (None, "eagle", "eagle3"):
        return
    report = check_pair(
        kwargs["model"],
        spec["model"],
        spec.get("method"),
        kwargs.get("max_model_len"),
        verifier_name=kwargs["model"],
        k=spec.get("num_speculative_tokens"),
    )
    for problem in report.warnings:
        print(f"pairing warning: {problem.code}: {problem.message}")


def _runs_in_process(kwargs: dict[str, Any]) -> bool:
    """Whether `start_engine` builds this engine inside the calling process: one device (no tensor
    or pipeline parallelism, no executor named) unless ENGINE_PROCESS_ENV says "separate"."""
    if os.environ.get(ENGINE_PROCESS_ENV, "") == "separate":
        return False
    if kwargs.get("distributed_executor_backend") not in (None, "uni"):
        return False
    parallel = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")
    return all(int(kwargs.get(name) or 1) == 1 for name in parallel)


@contextlib.contextmanager
def engine_process(settings: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Around a `vllm.LLM(...)` call: what every engine of the workbook starts in; yields the
    settings to pass, plus the executor chosen.

    The environment of ENGINE_ENV, one engine at a time, and on one device (`_runs_in_process`)
    the engine core inside this process: the `uni` executor with IN_PROCESS_ENV=0 and the guards
    of `in_process.building_in_process`. A start that fails half-way in this process releases its
    process groups and GPU memory before the error goes on.
    """
    for name, value in ENGINE_ENV.items():
        os.environ.setdefault(name, value)
    if _current is not None:
        print("start_engine: shutting down the running engine first (one engine at a time)")
        shutdown_engine()
    in_process = _runs_in_process(settings)
    if in_process:
        settings = {"distributed_executor_backend": "uni", **settings}
        # Read when the engine is built, and cached by vLLM for this process afterwards; servers
        # this process starts drop it again (the serving chapter's server module).
        os.environ[IN_PROCESS_ENV] = "0"
    else:
        os.environ.pop(IN_PROCESS_ENV, None)
        if has_gpu():
            os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", _GPU_MULTIPROC_METHOD)
    with building_in_process() if in_process else contextlib.nullcontext():
        try:
            yield settings
        except BaseException:
            if in_process:  # a half-built engine in this process: its process groups and memory
                gc.collect()
                _release_gpu()
            raise


def start_engine(**kwargs: Any) -> Any:
    """Validate the pair, then start `vllm.LLM(**kwargs)` in `engine_process`.

    On one device the engine runs inside this process (the `uni` executor with IN_PROCESS_ENV=0):
    measured on 2 CPU cores, it starts in about 1 s instead of 10-13 s of spawning an engine-core
    and a worker process that each import vLLM, and decodes 25-35 % faster on this process's two
    torch threads; on a GPU it skips the same two interpreter starts (the README has the table).
    """
    global _current, _threads_at_start
    _validate_speculative_pair(kwargs)
    import torch
    from vllm import LLM

    kwargs, notes = compat.dropped_args(kwargs)
    for note in notes:
        print(f"start_engine: {note}")
    t0 = time.perf_counter()
    with engine_process(kwargs) as kwargs:
        threads = torch.get_num_threads()  # after engine_process ended any earlier engine
        _current = LLM(**kwargs)
    _threads_at_start = threads
    in_process = kwargs.get("distributed_executor_backend") == "uni"
    spec = kwargs.get("speculative_config") or {}
    journal_start(
        {
            "engine": "in-process" if in_process else "separate processes",
            "model": str(kwargs.get("model")),
            "method": spec.get("method"),
            "k": spec.get("num_speculative_tokens", 0),
            "seconds": round(time.perf_counter() - t0, 2),
            "model_runner": _model_runner(_current),
        }
    )
    return _current


@contextlib.contextmanager
def open_engine(**kwargs: Any) -> Iterator[Any]:
    """`with open_engine(**engine_kwargs(...)) as llm:` — the engine is shut down on exit."""
    llm = start_engine(**kwargs)
    try:
        yield llm
    finally:
        shutdown_engine(llm, how="at the end of its `with lifecycle.open_engine(...)` block")


atexit.register(shutdown_engine)
at_terminate(_end_engine_processes)
