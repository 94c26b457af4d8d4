"""Measure decode on a GPU with a real Qwen3-MoE shape and no download: plain vs EAGLE-3.

A shape profile (`--profile`, default qwen3-30b-a3b-shape; qwen3-235b-a22b-shape runs on 4 GPUs)
names the verifier, drafter, tokenizer and tensor parallelism. The verifier and drafter are built
from data/shapes/*/config.json with random weights
(`load_format="dummy"`); vLLM's synthetic rejection sampling (`rejection_sample_method="synthetic"`,
`synthetic_acceptance_length=τ`) sets the acceptance, so each speculative engine emits τ tokens per
step on average while doing the full draft-and-verify work. Prompts are real Qwen3 token sequences,
`--prompt-tokens` long: the held-out prompts through Qwen3's chat template and tokenizer (built by
`make venv`; the recorded data/measurements/h200-moe-lab.json used random ids). For each (k, τ)
engine and concurrency C it times C requests of `--new-tokens` tokens (ignore_eos) and records
tokens/s, steps/s, the measured τ and the step cost relative to plain decoding at the same C.
Random weights route MoE tokens at random: the expert union, and so the cost of a verify step, is
an upper bound.

    python scripts/gpu_moe_lab.py --out data/measurements/h200-moe-lab.json   (on a CUDA GPU)
    python scripts/gpu_moe_lab.py --profile qwen3-235b-a22b-shape --kv-cache-gib 4 \
        --engines 1:1.5,3:2.5 --concurrency 1,16,64                              (on 4 GPUs)

Results are written after every engine, so an interrupted run keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from helpers.common.configs import read_config
from helpers.common.counters import snapshot
from helpers.common.envinfo import gpu_count, has_gpu, query_gpus, vllm_version
from helpers.common.paths import REPO_ROOT
from helpers.common.profiles import load_profile
from helpers.common.prompts import as_messages, interleaved, load_prompts

#: The shape profile measured unless --profile names another.
SHAPE_PROFILE = "qwen3-30b-a3b-shape"
#: (k, τ) engines of the full grid: every τ in TAUS that k can reach (τ ≤ k + 1).
KS, TAUS = (1, 3, 5), (1.5, 2.0, 2.5, 3.0, 3.5)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags; defaults are the full grid of the MoE-economics issue."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("build/gpu-moe-lab.json"))
    p.add_argument(
        "--engines", default="", help="'k:tau,...' subset, e.g. '1:1.5,3:2.5'; default all"
    )
    p.add_argument("--concurrency", default="1,4,16,64")
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=256)
    p.add_argument("--repeats", type=int, default=2, help="timed batches per concurrency (median)")
    p.add_argument(
        "--eager", action="store_true", help="no CUDA graphs (faster start, slower steps)"
    )
    p.add_argument(
        "--profile",
        default=SHAPE_PROFILE,
        help="shape profile: verifier, drafter, tokenizer, tensor parallelism",
    )
    p.add_argument("--verifier", type=Path, default=None, help="default: the profile's")
    p.add_argument("--drafter", type=Path, default=None, help="default: the profile's")
    p.add_argument(
        "--kv-cache-gib",
        type=float,
        default=None,
        help="a fixed KV cache per GPU (default: vLLM sizes it from 85 %% of GPU memory)",
    )
    p.add_argument(
        "--cpu", action="store_true", help="smoke-test the mechanics on a CPU (tiny pair)"
    )
    args = p.parse_args(argv)
    profile = load_profile(args.profile)
    args.verifier = args.verifier or REPO_ROOT / profile.verifier
    args.drafter = args.drafter or REPO_ROOT / profile.drafter
    args.tensor_parallel_size = profile.tensor_parallel_size
    args.gpus_needed = max(profile.gpus_needed, 1)
    return args


def engine_grid(spec: str) -> list[tuple[int, float]]:
    """The (k, τ) speculative engines to measure: the given subset, else every reachable pair."""
    if spec:
        return [(int(k), float(t)) for k, t in (item.split(":") for item in spec.split(","))]
    return [(k, t) for k in KS for t in TAUS if t <= k + 1]


def start(k: int, tau: float | None, args: argparse.Namespace, max_seqs: int) -> Any:
    """An engine on the dummy-weight shape; k=0 is plain decoding."""
    from vllm import LLM

    kwargs: dict[str, Any] = {
        "model": str(args.verifier),
        "load_format": "dummy",
        "skip_tokenizer_init": True,
        "dtype": "bfloat16",
        "max_model_len": 2048,
        "max_num_seqs": max_seqs,
        "gpu_memory_utilization": 0.85,
        "seed": 0,
        "enforce_eager": args.eager,
        "disable_log_stats": False,
        "tensor_parallel_size": args.tensor_parallel_size,
    }
    if args.kv_cache_gib:
        kwargs["kv_cache_memory_bytes"] = int(args.kv_cache_gib * 1024**3)
    if k:
        kwargs["speculative_config"] = {
            "model": str(args.drafter),
            "method": "eagle3",
            "num_speculative_tokens": k,
            "rejection_sample_method": "synthetic",
            "synthetic_acceptance_length": tau,
        }
    return LLM(**kwargs)


def prompt_stream(verifier: Path, profile: str = SHAPE_PROFILE) -> tuple[list[int], str]:
    """The held-out prompts as the shape profile's engine sees them, one token stream: each a
    one-message chat rendered by Qwen3's template and tokenized by Qwen3's tokenizer (built by
    `make venv`); and a line saying so. Without that tokenizer (or for a verifier with a smaller
    vocabulary), an empty stream and why: requests are then random ids."""
    from transformers import AutoTokenizer

    try:
        folder = load_profile(profile).tokenizer_path()
    except FileNotFoundError as err:
        return [], f"random ids ({err})"
    tok = AutoTokenizer.from_pretrained(folder)
    if read_config(verifier)["vocab_size"] < len(tok):
        return [], f"random ids ({verifier}'s vocabulary is smaller than Qwen3's)"
    ids = [
        i
        for prompt in interleaved(load_prompts(), 128)
        for i in tok.apply_chat_template(as_messages(prompt), add_generation_prompt=True)[
            "input_ids"
        ]
    ]
    return (
        ids,
        "held-out prompts rendered by Qwen3's chat template and tokenizer, cut to prompt_tokens",
    )


def measure(
    llm: Any, concurrency: int, args: argparse.Namespace, stream: list[int]
) -> dict[str, float]:
    """Median over `repeats` batches of C requests: tokens/s, steps/s per request, measured τ.
    Each prompt is `prompt_tokens` ids of `stream` from a random offset, else random ids."""
    from vllm import SamplingParams

    rng = random.Random(concurrency)
    vocab = read_config(args.verifier)["vocab_size"]
    params = SamplingParams(temperature=0.0, max_tokens=args.new_tokens, ignore_eos=True)

    def prompt() -> list[int]:
        if len(stream) <= args.prompt_tokens:
            return [rng.randrange(vocab) for _ in range(args.prompt_tokens)]
        start = rng.randrange(len(stream) - args.prompt_tokens)
        return stream[start : start + args.prompt_tokens]

    def batch() -> list[dict[str, list[int]]]:
        return [{"prompt_token_ids": prompt()} for _ in range(concurrency)]

    llm.generate(batch(), params, use_tqdm=False)  # warm-up at this batch size
    runs = []
    for _ in range(args.repeats):
        before = snapshot(llm)
        t0 = time.perf_counter()
        outs = llm.generate(batch(), params, use_tqdm=False)
        seconds = time.perf_counter() - t0
        delta = snapshot(llm) - before
        tokens = sum(len(o.outputs[0].token_ids) for o in outs)
        steps = delta.num_drafts / concurrency if delta.num_drafts else tokens / concurrency
        tau = 1 + delta.num_accepted_tokens / delta.num_drafts if delta.num_drafts else 1.0
        runs.append(
            {
                "tok_s": tokens / seconds,
                "steps_per_s": steps / seconds,
                "tau": tau,
                "seconds": seconds,
            }
        )
    runs.sort(key=lambda r: r["tok_s"])
    return runs[len(runs) // 2]


def stop(llm: Any) -> None:
    """Shut an engine down and free its GPU memory."""
    import gc

    llm.llm_engine.engine_core.shutdown()
    del llm
    gc.collect()


def provenance(args: argparse.Namespace, prompts: str) -> dict[str, Any]:
    """What ran where: GPU, versions, settings, and the caveats that travel with the numbers."""
    import torch

    gpus = query_gpus()
    return {
        "what": f"Decode with the published architecture of {args.verifier.name} (dummy weights, "
        f"tensor parallel {args.tensor_parallel_size}), plain vs EAGLE-3 with synthetic rejection "
        f"sampling, measured {time.strftime('%Y-%m-%d')}.",
        "gpu": gpus[0].name if isinstance(gpus, list) else str(gpus),
        "gpus": len(gpus) if isinstance(gpus, list) else 0,
        "profile": args.profile,
        "verifier": str(args.verifier),
        "drafter": str(args.drafter),
        "vllm": vllm_version(),
        "torch": torch.__version__,
        "settings": {
            "prompt_tokens": args.prompt_tokens,
            "prompts": prompts,
            "new_tokens": args.new_tokens,
            "repeats": args.repeats,
            "cuda_graphs": not args.eager,
            "dtype": "bfloat16",
            "tensor_parallel_size": args.tensor_parallel_size,
            "kv_cache_gib_per_gpu": args.kv_cache_gib,
        },
        "caveats": [
            "random weights route MoE tokens at random: the expert union of a verify step, and so "
            "its cost, is an upper bound on a trained model's",
            "acceptance is set by synthetic rejection sampling, not measured: the drafter's "
            "proposals are ignored, its full cost is paid",
            "the drafter has the full 151,936-token vocabulary: heavier than a 32k speculators "
            "drafter",
            "wall time includes each batch's prefill of prompt_tokens per request",
        ],
    }


def main(argv: list[str] | None = None) -> int:
    """Measure every engine of the grid and write the JSON after each one."""
    args = parse_args(argv)
    if not has_gpu():
        # vLLM's CPU sampler refuses: "Synthetic acceptance not supported with CPU sampling".
        print("gpu_moe_lab: no NVIDIA GPU here (nvidia-smi lists none): nothing measured")
        return 2
    if (have := gpu_count()) < args.gpus_needed:
        print(
            f"gpu_moe_lab: profile {args.profile} needs {args.gpus_needed} GPUs and nvidia-smi "
            f"lists {have}: nothing measured"
        )
        return 2
    levels = [int(c) for c in args.concurrency.split(",")]
    stream, prompts = prompt_stream(args.verifier, args.profile)
    print(f"gpu_moe_lab: prompts are {prompts}", flush=True)
    result: dict[str, Any] = {**provenance(args, prompts), "engine_start_s": {}, "rows": []}
    for k, tau in [(0, None), *engine_grid(args.engines)]:
        name = "plain" if k == 0 else f"k={k} tau={tau}"
        t0 = time.perf_counter()
        llm = start(k, tau, args, max(levels))
        result["engine_start_s"][name] = round(time.perf_counter() - t0, 1)
        for c in levels:
            row = {"k": k, "tau_target": tau, "concurrency": c, **measure(llm, c, args, stream)}
            result["rows"].append(row)
            print(
                f"{name} C={c}: {row['tok_s']:.0f} tok/s, {row['steps_per_s']:.1f} steps/s, "
                f"tau {row['tau']:.2f}",
                flush=True,
            )
        stop(llm)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
