"""Model cards of the tiny pair, rendered from the recipe's log and the benchmark's measurements."""

from __future__ import annotations

import json
from typing import Any

from helpers.common.paths import DATA_DIR, RECIPE_LOG
from helpers.common.prompts import CATEGORIES
from kit.tiny_recipe import DRAFTER_NAME, VERIFIER_NAME

__all__ = [
    "TARGETS",
    "check_targets",
    "write_model_cards",
]

#: The embedded default's targets (issue "Embedded default"), checked by the benchmark.
TARGETS: dict[str, str] = {
    "tau": "τ(k=3, T=0) ≥ 2.5 over all categories",
    "order": "τ(k=3) ordered structured ≥ code ≥ prose ≥ creative",
    "text": "greedy outputs read as text: distinct 4-gram ratio ≥ 0.5 per category, no line repeated > 3 times in a row",
    "lossless": "100 % token-identical greedy outputs with and without the drafter",
    "speedup": "spec/plain output tokens/s ≥ 1.5x at concurrency 1",
}


def _row(res: dict[str, Any], k: int) -> dict[str, Any]:
    """The acceptance row of one k."""
    return next(r for r in res["acceptance"] if r["k"] == k)


def _speedup(res: dict[str, Any], concurrency: str) -> float:
    """spec/plain output tokens/s at a concurrency."""
    tp = res["throughput"]
    return (
        tp["spec"][concurrency]["output_tokens_per_s"]
        / tp["plain"][concurrency]["output_tokens_per_s"]
    )


def check_targets(res: dict[str, Any]) -> dict[str, tuple[bool, str]]:
    """Each target: (met, the measured value that decided it)."""
    k3 = _row(res, 3)
    taus = [k3[c]["tau"] for c in CATEGORIES]
    quality = res["quality"]
    worst_ratio = min(q["distinct_4gram_ratio"] for q in quality.values())
    worst_run = max(q["max_repeated_line_run"] for q in quality.values())
    same = sum(v["identical"] for v in res["lossless"].values())
    total = sum(v["total"] for v in res["lossless"].values())
    return {
        "tau": (k3["all"]["tau"] >= 2.5, f"τ = {k3['all']['tau']:.2f}"),
        "order": (
            all(a >= b for a, b in zip(taus, taus[1:])),
            " ≥ ".join(f"{c} {t:.2f}" for c, t in zip(CATEGORIES, taus)),
        ),
        "text": (
            worst_ratio >= 0.5 and worst_run <= 3,
            f"lowest ratio {worst_ratio:.2f}, longest run {worst_run}",
        ),
        "lossless": (same == total, f"{same}/{total} outputs over k=1..5"),
        "speedup": (
            _speedup(res, "1") >= 1.5,
            f"{_speedup(res, '1'):.2f}x (16 concurrent: {_speedup(res, '16'):.2f}x)",
        ),
    }


def _results_table(res: dict[str, Any]) -> str:
    """Markdown table of τ per k and category."""
    head = (
        "| k | "
        + " | ".join((*CATEGORIES, "all"))
        + " | per-position (all) |\n|"
        + "---|" * (len(CATEGORIES) + 3)
    )
    rows = [
        f"| {r['k']} | "
        + " | ".join(f"{r[c]['tau']:.2f}" for c in (*CATEGORIES, "all"))
        + " | "
        + ", ".join(f"{x:.2f}" for x in r["all"]["per_position"])
        + " |"
        for r in res["acceptance"]
    ]
    return "\n".join([head, *rows])


def _targets_list(res: dict[str, Any]) -> str:
    """Markdown list of targets with met/missed and the measured value."""
    return "\n".join(
        f"- {'met' if ok else '**missed**'}: {TARGETS[name]} ({detail})"
        for name, (ok, detail) in res["targets"].items()
    )


def _provenance(res: dict[str, Any]) -> str:
    """One line saying where and how the numbers were measured."""
    p, s = res["provenance"], res["settings"]
    return (
        f"Measured {p['date']} by `{p['command']}` on {p['machine']} (vLLM {p['vllm']}, torch "
        f"{p['torch']}), "
        f"{s['prompts']} held-out prompts per category, temperature 0; τ on natural answers capped "
        f"at {s['max_tokens']} new tokens, tokens/s at forced length (ignore_eos)."
    )


def _verifier_card(res: dict[str, Any], log: dict[str, Any]) -> str:
    """README.md of the tiny verifier."""
    v, c = log["verifier"], log["config"]
    quality = "\n".join(
        f"| {cat} | {q['distinct_4gram_ratio']:.2f} | {q['max_repeated_line_run']} | "
        f"{q['mean_tokens']:.0f} |"
        for cat, q in res["quality"].items()
    )
    return f"""# {VERIFIER_NAME}: the workbook's tiny Qwen3-MoE verifier

A {v["params"] / 1e6:.1f} M-parameter `Qwen3MoeForCausalLM` (hidden 128, 8 layers, 4 heads × 32, 2 KV heads,
8 experts, top-2, vocabulary 2,048) trained from scratch by this repository so the workbook shows real
speculative decoding on a laptop CPU with no downloads. It is a teaching model: it only knows four
synthetic chat tasks (JSON records, small Python functions, city descriptions, short poems).

**Trained by** `make tiny-models` (`kit.tiny_recipe.build_tiny_pair`): tokenizer `../tiny-tokenizer`
(byte-level BPE built from CPython's own sources), {c["n_per_category"] * len(CATEGORIES):,} synthetic chat exchanges
({log["corpus_tokens"]:,} tokens), {c["verifier_steps"]} AdamW steps of {c["verifier_batch"]} × {c["seq_len"]} tokens,
seed {c["seed"]}: {v["seconds"]:.0f} s; loss {v["loss_first"]} → {v["loss_last10"]}
(held-out per category: {", ".join(f"{k} {x}" for k, x in v["eval_loss"].items())}).

**Greedy text quality** (plain decoding of held-out prompts; {_provenance(res)})

| category | distinct 4-gram ratio | longest repeated-line run | mean tokens |
|---|---|---|---|
{quality}

**Limits.** It is a toy: it often copies JSON fields wrongly and its greedy poems can repeat a line.
How predictable each task is for the drafter is in the drafter's card, as point estimates from
the benchmark (no intervals: the recorded run kept no per-request acceptance). A second corpus that drew poem and prose words without
replacement (to make the creative task harder) gave looping poems and the highest τ on them,
so it was not shipped.

Its drafter is `../{DRAFTER_NAME}`.
"""


def _drafter_card(res: dict[str, Any], log: dict[str, Any]) -> str:
    """README.md of the tiny EAGLE-3 drafter."""
    d, c, sd = log["drafter"], log["config"], log["self_distill"]
    tp = res["throughput"]
    return f"""# {DRAFTER_NAME}: an EAGLE-3 drafter for {VERIFIER_NAME}

A one-layer EAGLE-3 drafter ({d["params"] / 1e6:.2f} M trainable parameters: `fc` 3H→H, one Llama decoder
layer, final norm, lm_head over the full 2,048-token vocabulary; token embeddings shared with the verifier)
in the speculators format (`speculators_model_type: eagle3`, tensors `fc`, `layers.0.*`, `norm`,
`lm_head`): speculators 0.9.0's `Eagle3DraftModel` and vLLM load every tensor. It fuses the
verifier's hidden states after layers {list(c["aux_layers"])}.

**Trained by** `make tiny-models`: {sd["exchanges"]} verifier greedy answers generated with vLLM
({sd["tokens"]:,} tokens, {sd["seconds"]:.0f} s) mixed with {c["corpus_share"]:.0%} corpus rows; {c["drafter_steps"]}
AdamW steps of {c["drafter_batch"]} × {c["seq_len"]} tokens with a {c["ttt_steps"]}-step training-time test (soft
cross-entropy against the verifier's distribution, step weights 0.8^j): {d["seconds"]:.0f} s; top-1 agreement with the
verifier per draft step at the end of training {d["top1_agreement_last10"]}.

**Use**
```
vllm serve data/{VERIFIER_NAME} --speculative-config '{{"model": "data/{DRAFTER_NAME}", "num_speculative_tokens": 3, "method": "eagle3"}}'
```

**Measured** ({_provenance(res)})

τ (mean acceptance length = 1 + accepted / drafts):

{_results_table(res)}

Output tokens/s, k={res["settings"]["throughput_k"]} vs plain (256 tokens per request): concurrency 1
{tp["spec"]["1"]["output_tokens_per_s"]:.0f} vs {tp["plain"]["1"]["output_tokens_per_s"]:.0f}
({_speedup(res, "1"):.2f}x); 16 concurrent {tp["spec"]["16"]["output_tokens_per_s"]:.0f} vs
{tp["plain"]["16"]["output_tokens_per_s"]:.0f} ({_speedup(res, "16"):.2f}x).

**Targets**

{_targets_list(res)}
"""


def write_model_cards(res: dict[str, Any]) -> None:
    """Write README.md into the verifier and drafter folders of data/."""
    log = json.loads((DATA_DIR / RECIPE_LOG).read_text(encoding="utf-8"))
    (DATA_DIR / VERIFIER_NAME / "README.md").write_text(_verifier_card(res, log), encoding="utf-8")
    (DATA_DIR / DRAFTER_NAME / "README.md").write_text(_drafter_card(res, log), encoding="utf-8")
