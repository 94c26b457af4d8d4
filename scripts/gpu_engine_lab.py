"""Engine starts and decode speed, per configuration: in-process or vLLM's own processes, eager or
CUDA graphs, float32 or bfloat16, for the tiny pair and (on a GPU) the Qwen3-30B-A3B shape.

Each configuration runs in a fresh Python process, so its first start is a first start in a
process; the first configuration on a fresh machine also pays the machine's cold caches. In it the
plain engine, the k=3 engine and the plain engine again are started one after another through
`helpers.engine.lifecycle` (the notebooks' own path), each start is timed, each engine decodes
`--prompts` held-out prompts x `--new-tokens` tokens greedily (ignore_eos), all at once and then
four of them one at a time (batch 1), with the model runner vLLM chose, GPU memory in use is
read after each start and each shutdown, and greedy outputs with and without the drafter are
compared token for token.

    python scripts/gpu_engine_lab.py --out build/gpu-engine-lab.json             (on a GPU)
    python scripts/gpu_engine_lab.py --configs tiny-inproc-eager-fp32 --cpu    (a CPU smoke test)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from helpers.common import envinfo, profiles, prompts, vllm_names
from helpers.common.counters import acceptance_stats, snapshot
from helpers.common.paths import LOGS_DIR
from helpers.engine import lifecycle, runs

#: CUDA graphs without torch.compile, the tiny pair's GPU default (lifecycle.SMALL_GPU_GRAPHS), and
#: eager mode beside it.
GRAPHS: dict[str, Any] = lifecycle.SMALL_GPU_GRAPHS
EAGER: dict[str, Any] = {"enforce_eager": True}
#: name -> (profile, WORKBOOK_ENGINE_PROCESS value, engine-argument overrides)
CONFIGS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "tiny-inproc-eager-fp32": ("tiny", "in-process", EAGER),
    "tiny-separate-eager-fp32": ("tiny", "separate", EAGER),
    "tiny-inproc-eager-bf16": ("tiny", "in-process", EAGER | {"dtype": "bfloat16"}),
    "tiny-inproc-graphs-fp32": ("tiny", "in-process", GRAPHS),
    "tiny-inproc-graphs-bf16": ("tiny", "in-process", GRAPHS | {"dtype": "bfloat16"}),
    "shape-inproc": ("qwen3-30b-a3b-shape", "in-process", {}),
    "shape-separate": ("qwen3-30b-a3b-shape", "separate", {}),
}
#: Prompts decoded one at a time (batch 1) per engine, after the batched pass.
BS1_PROMPTS = 4
#: Log lines of vLLM's start-up that say where the time went.
TIMING_WORDS = ("took", "seconds", "Graph capturing", "compil", "Loading weights", "init engine")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags."""
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--out", type=Path, default=Path("build/gpu-engine-lab.json"))
    p.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated names")
    p.add_argument("--prompts", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--cpu", action="store_true", help="allow a CPU (smoke test: tiny configs only)")
    p.add_argument(
        "--profile-first", action="store_true", help="cProfile each config's first start"
    )
    p.add_argument("--one", default="", help=argparse.SUPPRESS)  # the child process's config
    return p.parse_args(argv)


def gpu_used_mib() -> int | None:
    """Memory in use on the first GPU (nvidia-smi, all processes), or None without a GPU."""
    gpus = envinfo.query_gpus()
    if not isinstance(gpus, list):
        return None
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
    )
    return int(out.stdout.split()[0]) if out.returncode == 0 else None


def decode(llm: Any, chats: list[str], new_tokens: int) -> tuple[float, list[list[int]], dict]:
    """Greedy decode of every prompt at once (ignore_eos), timed on the second of two identical
    passes (the first compiles what a new batch shape needs): (tokens/s, token ids, acceptance)."""
    params = runs.sampling(new_tokens, ignore_eos=True)
    runs.run_prompts(llm, chats, params)  # warm-up at the timed batch size
    before = snapshot(llm)
    t0 = time.perf_counter()
    run = runs.run_prompts(llm, chats, params)
    seconds = time.perf_counter() - t0
    stats = acceptance_stats(snapshot(llm) - before)
    return sum(map(len, run.token_ids)) / seconds, run.token_ids, stats


def decode_one_at_a_time(llm: Any, chats: list[str], new_tokens: int) -> float:
    """Greedy decode of each prompt alone, one after another (concurrency 1, ignore_eos), timed
    after one untimed request: output tokens/s at batch 1."""
    params = runs.sampling(new_tokens, ignore_eos=True)
    runs.run_prompts(llm, chats[:1], params)
    t0, tokens = time.perf_counter(), 0
    for chat in chats:
        tokens += sum(map(len, runs.run_prompts(llm, [chat], params).token_ids))
    return tokens / (time.perf_counter() - t0)


def last_runner() -> str | None:
    """The model runner of the engine started last (lifecycle's engine-start journal)."""
    journal = LOGS_DIR / "engine-starts.jsonl"
    lines = journal.read_text().splitlines() if journal.is_file() else []
    return json.loads(lines[-1]).get("model_runner") if lines else None


def profiled(fn: Any, top: int = 25) -> tuple[Any, list[str]]:
    """fn() under cProfile: its result and the `top` functions by cumulative time, one line each
    (import machinery and builtins left out: what an import costs shows as its module's line)."""
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    result = prof.runcall(fn)
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(8 * top)
    noise = ("<frozen", "importlib", "{built-in", "{method")
    rows = [line.strip() for line in text.getvalue().splitlines() if line.strip()[:1].isdigit()]
    return result, [row for row in rows if not any(n in row for n in noise)][:top]


def measure(name: str, n_prompts: int, new_tokens: int, profile_first: bool) -> dict[str, Any]:
    """Inside the child process: start plain, k=3, plain; time, decode and compare each."""
    profile_name, process, overrides = CONFIGS[name]
    os.environ[lifecycle.ENGINE_PROCESS_ENV] = process
    t0 = time.perf_counter()
    import vllm  # noqa: F401 - timed: the first engine of a process pays for it

    import_s = time.perf_counter() - t0
    profile = profiles.load_profile(profile_name)
    chats = [p for items in prompts.load_prompts(n_prompts).values() for p in items][:n_prompts]
    engines, ids = [], {}
    hot: list[str] = []
    for k in (0, 3, 0):
        kwargs = lifecycle.engine_kwargs(profile, k=k, **overrides)
        t0 = time.perf_counter()
        if profile_first and not engines:
            llm, hot = profiled(lambda kw=kwargs: lifecycle.start_engine(**kw))
        else:
            llm = lifecycle.start_engine(**kwargs)
        start_s = time.perf_counter() - t0
        used = gpu_used_mib()
        tok_s, token_ids, stats = decode(llm, chats, new_tokens)
        bs1 = decode_one_at_a_time(llm, chats[:BS1_PROMPTS], new_tokens)
        lifecycle.shutdown_engine(llm)
        ids.setdefault(k, token_ids)
        engines.append(
            {
                "k": k,
                "start_s": round(start_s, 2),
                "output_tokens_per_s": round(tok_s, 1),
                "bs1_output_tokens_per_s": round(bs1, 1),
                "model_runner": last_runner(),
                "tau": round(stats[vllm_names.STATS.tau], 3) if k else None,
                "gpu_used_mib_after_start": used,
                "gpu_used_mib_after_shutdown": gpu_used_mib(),
            }
        )
    same = sum(a == b for a, b in zip(ids[0], ids[3]))
    return {
        "config": name,
        "profile": profile_name,
        "process": process,
        "overrides": overrides,
        "import_vllm_s": round(import_s, 2),
        "engines": engines,
        "greedy_identical": f"{same}/{len(ids[0])}",
        "first_start_profile": hot,
        "prompts": len(chats),
        "new_tokens": new_tokens,
    }


def run_child(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """One configuration in a fresh interpreter; its result, or its failure in one line."""
    argv = [sys.executable, __file__, "--one", name, "--prompts", str(args.prompts)]
    argv += ["--new-tokens", str(args.new_tokens)] + ["--profile-first"] * args.profile_first
    env = os.environ | {"VLLM_LOGGING_LEVEL": "INFO", "PYTHONUNBUFFERED": "1"}
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    wall = round(time.perf_counter() - t0, 1)
    lines = (done.stdout + done.stderr).splitlines()
    timing = [line[-200:] for line in lines if any(w in line for w in TIMING_WORDS)][:40]
    result = next((json.loads(x[7:]) for x in lines if x.startswith("RESULT ")), None)
    if done.returncode != 0 or result is None:
        tail = [line for line in lines if line.strip()][-1:] or ["no output"]
        return {
            "config": name,
            "failed": f"exit {done.returncode}: {tail[0][-300:]}",
            "wall_s": wall,
        }
    return result | {"wall_s": wall, "vllm_timing_lines": timing}


def main(argv: list[str] | None = None) -> int:
    """Measure every requested configuration, writing the file after each."""
    args = parse_args(argv)
    if args.one:
        result = measure(args.one, args.prompts, args.new_tokens, args.profile_first)
        print("RESULT " + json.dumps(result))
        return 0
    names = [n for n in args.configs.split(",") if n]
    unknown = sorted(set(names) - set(CONFIGS))
    if unknown:
        print(f"gpu_engine_lab: unknown configs {unknown}; known: {sorted(CONFIGS)}")
        return 2
    if not envinfo.has_gpu() and not args.cpu:
        print("gpu_engine_lab: no GPU here: run it on a GPU box, or pass --cpu for a smoke test")
        return 2
    record: dict[str, Any] = {
        "what": "engine start seconds and greedy decode tokens/s per engine configuration",
        "how": __doc__.split("\n\n")[1].replace("\n", " "),
        "device": envinfo.device_description(),
        "vllm": envinfo.vllm_version(),
        "date": time.strftime("%Y-%m-%d"),
        "runs": [],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for name in names:
        result = run_child(name, args)
        record["runs"].append(result)
        args.out.write_text(json.dumps(record, indent=2) + "\n")
        print(json.dumps({k: v for k, v in result.items() if k != "vllm_timing_lines"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
