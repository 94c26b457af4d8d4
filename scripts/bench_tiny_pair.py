"""Benchmark the shipped tiny pair in one run: acceptance by k and category, lossless check, throughput.

usage: python scripts/bench_tiny_pair.py [--prompts N] [--max-tokens N] [--write-cards]

Prints, side by side: τ and per-position acceptance for k=1..5 at T=0 per task category; whether
greedy outputs are token-identical with and without the drafter; output tokens/s spec (k=3) vs
plain at concurrency 1 and 16; whether the verifier's greedy text reads as text. With
--write-cards it also saves the numbers as data/tiny-pair-bench.json and renders the two model
cards from them. A measurement, not a test: it reports targets as met or missed and exits 0.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from datetime import date
from pathlib import Path
from typing import Any

from helpers.common import vllm_names
from helpers.common.counters import acceptance_stats
from helpers.common.envinfo import environment_report
from helpers.common.paths import DATA_DIR, build_path
from helpers.common.profiles import load_profile
from helpers.common.prompts import CATEGORIES, load_prompts
from helpers.engine.lifecycle import engine_kwargs, open_engine
from helpers.engine.runs import (
    CategoryRun,
    lossless_check,
    pooled,
    run_categories,
    sampling,
    throughput,
)
from kit.model_cards import TARGETS, check_targets, write_model_cards
from kit.text_quality import quality_summary
from kit.tiny_recipe import local_profile


def parse_args() -> argparse.Namespace:
    """Command-line flags (small defaults, like vLLM's examples)."""
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--prompts", type=int, default=32, help="held-out prompts per category")
    p.add_argument("--max-tokens", type=int, default=128, help="new tokens per answer")
    p.add_argument("--ks", default="1,2,3,4,5", help="numbers of speculative tokens to sweep")
    p.add_argument("--throughput-k", type=int, default=3)
    p.add_argument(
        "--write-cards", action="store_true", help="save data/tiny-pair-bench.json + model cards"
    )
    p.add_argument(
        "--pair-dir",
        type=Path,
        default=None,
        help="benchmark a pair built elsewhere (make_tiny_models.py --out DIR) instead of data/",
    )
    return p.parse_args()


def acceptance_row(k: int, runs: dict[str, CategoryRun]) -> dict[str, Any]:
    """τ and per-position rates per category and pooled, for one k."""
    row: dict[str, Any] = {"k": k}
    for cat, run in runs.items():
        row[cat] = {
            "tau": run.stats[vllm_names.STATS.tau],
            "per_position": run.stats[vllm_names.STATS.per_position_rates],
        }
    stats = acceptance_stats(pooled(runs))
    row["all"] = {
        "tau": stats[vllm_names.STATS.tau],
        "per_position": stats[vllm_names.STATS.per_position_rates],
    }
    return row


def measure_throughput(
    llm: Any, prompts: list[str], max_tokens: int
) -> dict[str, dict[str, float]]:
    """Output tokens/s at concurrency 1 (8 requests) and 16 (64 requests)."""
    return {
        "1": throughput(llm, prompts[:8], 1, max_tokens),
        "16": throughput(llm, prompts[:64], 16, max_tokens),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every measurement, one engine at a time."""
    pair_dir = args.pair_dir or DATA_DIR
    profile = local_profile(pair_dir) if args.pair_dir else load_profile("tiny")
    prompts = load_prompts(args.prompts, pair_dir / "prompts")
    mixed = [p for group in zip(*prompts.values()) for p in group]
    greedy = sampling(args.max_tokens)
    t0 = time.time()
    with open_engine(**engine_kwargs(profile, k=0)) as llm:
        plain = run_categories(llm, prompts, greedy)
        plain_tp = measure_throughput(llm, mixed, 256)
    out: dict[str, Any] = {"acceptance": [], "lossless": {}, "throughput": {"plain": plain_tp}}
    out["quality"] = {c: quality_summary(r.texts, r.token_ids) for c, r in plain.items()}
    for k in [int(x) for x in args.ks.split(",")]:
        with open_engine(**engine_kwargs(profile, k=k)) as llm:
            spec = run_categories(llm, prompts, greedy)
            if k == args.throughput_k:
                out["throughput"]["spec"] = measure_throughput(llm, mixed, 256)
        out["acceptance"].append(acceptance_row(k, spec))
        reports = [lossless_check(plain[c].token_ids, spec[c].token_ids) for c in CATEGORIES]
        out["lossless"][str(k)] = {
            "identical": sum(r.identical for r in reports),
            "total": sum(r.total for r in reports),
        }
        print(f"k={k} done ({time.time() - t0:.0f} s)", flush=True)
    out["seconds"] = round(time.time() - t0, 1)
    return out


def print_report(res: dict[str, Any]) -> None:
    """The side-by-side tables."""
    print(
        f"\nτ (mean acceptance length) at T=0, {res['settings']['prompts']} prompts/category, "
        f"{res['settings']['max_tokens']} tokens"
    )
    print(
        f"{'k':>2} " + " ".join(f"{c:>10}" for c in (*CATEGORIES, "all")) + "   per-position (all)"
    )
    for row in res["acceptance"]:
        print(
            f"{row['k']:>2} "
            + " ".join(f"{row[c]['tau']:>10.2f}" for c in (*CATEGORIES, "all"))
            + "   ["
            + ", ".join(f"{x:.2f}" for x in row["all"]["per_position"])
            + "]"
        )
    print(
        "\nlossless (greedy token-identical, spec vs plain): "
        + ", ".join(f"k={k} {v['identical']}/{v['total']}" for k, v in res["lossless"].items())
    )
    tp = res["throughput"]
    print(
        f"\noutput tokens/s (k={res['settings']['throughput_k']} vs plain, 256 tokens/request, ignore_eos)"
    )
    for conc in ("1", "16"):
        p, s = tp["plain"][conc]["output_tokens_per_s"], tp["spec"][conc]["output_tokens_per_s"]
        print(f"  concurrency {conc:>2}: plain {p:7.1f}  spec {s:7.1f}  ratio {s / p:.2f}x")
    print("\nverifier greedy text quality (plain decoding)")
    for cat, q in res["quality"].items():
        print(
            f"  {cat:10s} distinct-4gram {q['distinct_4gram_ratio']:.2f}  longest repeated-line run "
            f"{q['max_repeated_line_run']}  mean tokens {q['mean_tokens']:.0f}"
        )
    print("\ntargets")
    for name, (ok, detail) in res["targets"].items():
        print(f"  [{'met' if ok else 'MISSED'}] {TARGETS[name]}: {detail}")


def main(args: argparse.Namespace) -> dict[str, Any]:
    """Measure, print, and optionally record; returns the results."""
    res = run(args)
    env = environment_report("tiny")
    res["settings"] = {
        "prompts": args.prompts,
        "max_tokens": args.max_tokens,
        "throughput_k": args.throughput_k,
    }
    res["provenance"] = {
        "date": date.today().isoformat(),
        "command": "make bench (scripts/bench_tiny_pair.py)",
        "machine": env.get("device", platform.processor()),
        "vllm": env.get("vllm"),
        "torch": env.get("torch"),
        "transformers": env.get("transformers"),
    }
    res["targets"] = check_targets(res)
    print_report(res)
    build_path("bench", "tiny-pair.json").write_text(json.dumps(res, indent=2) + "\n")
    if args.write_cards and args.pair_dir is None:
        (DATA_DIR / "tiny-pair-bench.json").write_text(json.dumps(res, indent=2) + "\n")
        write_model_cards(res)
        print("wrote data/tiny-pair-bench.json and the model cards")
    return res


if __name__ == "__main__":
    main(parse_args())
