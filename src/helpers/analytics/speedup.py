"""When does speculation pay? Step costs measured here, a speedup model, and a recorded H200
measurement (notebook 06).

Model (Leviathan et al. 2023, with EAGLE's per-token acceptance α assumed i.i.d.): a speculative
step emits E[tokens/step] = (1 − α^{k+1}) / (1 − α) tokens (k + 1 when α = 1) and costs c(k) plain
steps, so speedup(k, α) = E[tokens/step] / c(k). With vLLM's measured acceptance length τ in place
of E[tokens/step], speculation pays exactly when τ > c(k).

c(k) on this machine comes from timing the tiny pair in PyTorch (float32, transformers with a KV
cache): one verifier step over k + 1 tokens plus k drafter steps, relative to a 1-token verifier
step. The H200 costs of the real Qwen3-30B-A3B shape are *recorded* measurements from another
machine, never results of this run: the MoE lab (`LAB_FILE`, scripts/gpu_moe_lab.py: distinct
prompts, concurrency 1-64) and an earlier single-sequence record (`_H200_FILE`), whose batch runs
copied one prompt and are kept only as the contrast `one_prompt_batch` teaches from.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from helpers.common.paths import DATA_DIR
from helpers.common.tables import K_COLUMN
from helpers.common.threads import torch_threads
from helpers.eagle3.drafter import Eagle3Drafter, draft_chain, greedy_feedback

__all__ = [
    "published_points",
    "load_h200",
    "recorded_on",
    "one_prompt_batch",
    "LAB_FILE",
    "trusted_rows",
    "lab_step_costs",
    "literature",
    "expected_tokens_per_step",
    "AS_LOADED",
    "PEAK_HBM_TB_S",
    "peak_tb_s",
]

_H200_FILE: Path = DATA_DIR / "measurements" / "h200-vllm-step-costs.json"
_H200_SHAPE = "qwen3_30b_a3b_real_shape"


# --------------------------------------------------------------------------- the model


def expected_tokens_per_step(k: int, alpha: float) -> float:
    """E[tokens per speculative step] = 1 + α + … + α^k = (1 − α^{k+1}) / (1 − α)."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def _predicted_speedup(k: int, alpha: float, relative_cost: float) -> float:
    """Predicted speedup over plain decoding: E[tokens/step] / (spec step cost / plain step
    cost)."""
    return expected_tokens_per_step(k, alpha) / relative_cost


def _alpha_for_tau(tau: float, k: int, tol: float = 1e-10) -> float:
    """The i.i.d. acceptance α whose E[tokens/step] at this k equals a measured τ (bisection)."""
    if not 1.0 <= tau <= k + 1:
        raise ValueError(f"tau must be in [1, {k + 1}] for k={k}, got {tau}")
    lo, hi = 0.0, 1.0
    while hi - lo > tol:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_tokens_per_step(k, mid) < tau else (lo, mid)
    return (lo + hi) / 2


def _relative_step_cost(
    verifier_seconds: float, drafter_seconds: float, plain_seconds: float, k: int
) -> float:
    """c(k): (one verifier step over k + 1 tokens + k drafter steps) / one 1-token verifier step."""
    return (verifier_seconds + k * drafter_seconds) / plain_seconds


# --------------------------------------------------------------------------- timing here


def _median_seconds(fn: Callable[[], Any], repeats: int, warmup: int = 3) -> float:
    """Median wall time of fn() over `repeats` calls after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


@torch.no_grad()
def _verifier_step_seconds(verifier: Any, context: int, n_new: int, repeats: int = 20) -> float:
    """Median time of one verifier forward over n_new tokens after `context` cached tokens (HF KV
    cache)."""
    ids = torch.randint(3, verifier.config.vocab_size, (1, context + n_new))
    cache = verifier(input_ids=ids[:, :context], use_cache=True).past_key_values

    def step() -> None:
        cache.crop(context)
        verifier(input_ids=ids[:, context:], past_key_values=cache, use_cache=True)

    return _median_seconds(step, repeats)


@torch.no_grad()
def _drafter_step_seconds(
    drafter: Eagle3Drafter, embed: torch.nn.Module, repeats: int = 20
) -> float:
    """Median time of one drafter token step (fc, its layer, norm, lm_head, argmax) for one token.

    The attention over the drafter's cached context is left out: for one query against a few
    hundred 32-wide keys it is negligible next to the 128 x 2048 lm_head on this model.
    """
    s = drafter.shape
    aux = torch.randn(1, 1, s.num_aux_layers * (s.target_hidden_size or s.hidden_size))
    first = embed(torch.tensor([[5]]))

    def step() -> None:
        draft_chain(drafter, first, aux, 1, greedy_feedback(embed))[0].argmax(-1)

    return _median_seconds(step, repeats)


def _measure_step_costs(
    verifier: Any,
    drafter: Eagle3Drafter,
    ks: Sequence[int],
    context: int = 128,
    repeats: int = 15,
    threads: int = 1,
) -> pd.DataFrame:
    """Step costs on this machine: plain step, verifier over k + 1 tokens, k drafter steps, c(k).

    Timed on `threads` CPU threads (see reference.torch_threads); the table records how many.
    """
    with torch_threads(threads):
        plain = _verifier_step_seconds(verifier, context, 1, repeats)
        draft = _drafter_step_seconds(drafter, verifier.get_input_embeddings(), repeats)
        verify = {k: _verifier_step_seconds(verifier, context, k + 1, repeats) for k in ks}
    rows = [
        {
            K_COLUMN: k,
            "plain_step_ms": 1e3 * plain,
            "verifier_step_ms": 1e3 * verify[k],
            "drafter_step_ms": 1e3 * draft,
            "spec_step_ms": 1e3 * (verify[k] + k * draft),
            "relative_step_cost": _relative_step_cost(verify[k], draft, plain, k),
            "threads": threads,
        }
        for k in ks
    ]
    df = pd.DataFrame(rows)
    return df


def _model_curve(
    costs: pd.DataFrame, alphas: Sequence[float], cost_column: str = "relative_step_cost"
) -> pd.DataFrame:
    """speedup(k, α) for every k of a cost table and every α (long table)."""
    rows = [
        {
            K_COLUMN: int(r[K_COLUMN]),
            "alpha": a,
            "expected_tokens_per_step": expected_tokens_per_step(int(r[K_COLUMN]), a),
            "relative_step_cost": r[cost_column],
            "predicted_speedup": _predicted_speedup(int(r[K_COLUMN]), a, r[cost_column]),
        }
        for _, r in costs.iterrows()
        for a in alphas
    ]
    return pd.DataFrame(rows)


# ------------------------------------------------------------------- the recorded H200 measurement


def load_h200(path: Path = _H200_FILE) -> dict[str, Any]:
    """The recorded H200 step-rate measurement with its provenance ('what', 'how')."""
    record = json.loads(Path(path).read_text())
    missing = {"what", "how", _H200_SHAPE} - set(record)
    if missing:
        raise ValueError(f"{path} lacks {sorted(missing)}: keep the provenance when copying it")
    return record


def recorded_on(record: dict[str, Any]) -> str:
    """The date in a record's 'what' field (YYYY-MM-DD), or 'undated'."""
    found = re.search(r"\d{4}-\d{2}-\d{2}", record.get("what", ""))
    return found.group(0) if found else "undated"


def _h200_step_costs(record: dict[str, Any], batch: str = "bs1") -> pd.DataFrame:
    """c(k) on the H200 for the real Qwen3-30B-A3B shape: plain steps/s over spec steps/s."""
    rates = record[_H200_SHAPE]["steps_per_s"]
    plain = rates["plain"][batch]
    rows = [
        {
            K_COLUMN: int(name[1:]),
            "batch": batch,
            "plain_steps_per_s": plain,
            "spec_steps_per_s": r[batch],
            "relative_step_cost": plain / r[batch],
            "source": "recorded on an NVIDIA H200 (not this run)",
        }
        for name, r in rates.items()
        if name.startswith("k") and batch in r
    ]
    df = pd.DataFrame(rows).sort_values(K_COLUMN, ignore_index=True)
    return df


#: The block of the H200 record that batched copies of one prompt (its caveat says why it is kept).
_ONE_PROMPT = "one_prompt_batch"


def one_prompt_batch(record: dict[str, Any]) -> pd.DataFrame:
    """The recorded batch runs of ONE prompt copied B times, as steps/s and c(k, B) per batch
    size, with the bs1 run beside them: identical greedy sequences route to identical experts, so
    these batches read one sequence's experts and look cheap (the contrast, not a batch cost)."""
    block = record[_ONE_PROMPT]["steps_per_s"]
    single = record[_H200_SHAPE]["steps_per_s"]
    rows = []
    for name, rates in block.items():
        for batch, rate in {**{"bs1": single[name]["bs1"]}, **rates}.items():
            rows.append({"run": name, "batch_size": int(batch[2:]), "steps_per_s": rate})
    df = pd.DataFrame(rows)
    plain = df[df.run == "plain"].set_index("batch_size").steps_per_s
    df[K_COLUMN] = [0 if r == "plain" else int(r[1:]) for r in df.run]
    df["relative_step_cost"] = df.batch_size.map(plain) / df.steps_per_s
    return df.sort_values([K_COLUMN, "batch_size"], ignore_index=True)


#: The MoE lab's recorded H200 run (scripts/gpu_moe_lab.py), with its provenance.
LAB_FILE: Path = DATA_DIR / "measurements" / "h200-moe-lab.json"
#: The routing label of the lab's rows measured on the weights as loaded (random), and of old
#: records (chapters.ch06_moe.routing names its designs beside it).
AS_LOADED = "random weights (as loaded)"
#: Peak HBM bandwidth by GPU (TB/s), from the vendor's datasheet: NVIDIA H200 (HBM3e),
#: https://www.nvidia.com/en-us/data-center/h200/ ("4.8TB/s" memory bandwidth).
PEAK_HBM_TB_S: Mapping[str, float] = {"H200": 4.8}


def peak_tb_s(gpu: str) -> float | None:
    """The datasheet HBM bandwidth of a GPU named like 'NVIDIA H200' (None when not listed)."""
    for name, tb_s in PEAK_HBM_TB_S.items():
        if re.search(rf"\b{name}\b", gpu):
            return tb_s
    return None


def trusted_rows(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The lab's rows whose routing is known to be their label's.

    From format 3 on the lab writes a cell only after the worker read back the routing it labels
    (`routing_read_back`), so a row without that match is dropped. Format 2 never restored the
    weights as loaded after a design: its as-loaded cells after an engine's first routing block
    measured the last design's routing (the τ grid's tail at k = 3 and 5 carries the Zipf design's
    read-back signature). Of those records only the first block's as-loaded cells are kept: per
    engine, the first two τ it measured (the lab's `blocks` put them before any design).
    """
    rows = list(record["rows"])
    if record.get("format", 0) >= 3:
        return [r for r in rows if r.get("routing_read_back", r.get("routing")) == r.get("routing")]
    first: dict[int, list[Any]] = {}
    for r in rows:
        if r.get("routing", AS_LOADED) == AS_LOADED:
            taus = first.setdefault(r["k"], [])
            if r["tau_target"] not in taus and len(taus) < 2:
                taus.append(r["tau_target"])
    return [
        r
        for r in rows
        if r.get("routing", AS_LOADED) != AS_LOADED or r["tau_target"] in first[r["k"]]
    ]


def lab_step_costs(record: Mapping[str, Any]) -> pd.DataFrame:
    """The MoE lab's speculative rows with their speed-up and measured c(k, C) over plain decoding
    at the same concurrency (the median of plain's cells there), for the routing as loaded, over
    `trusted_rows` only (`chapters.ch06_moe.lab.routing_table` reads the designs)."""
    rows = pd.DataFrame(trusted_rows(record)).rename(columns={"k": K_COLUMN})
    if "routing" in rows:
        rows = rows[rows.routing == AS_LOADED]
    plain = rows[rows[K_COLUMN] == 0].groupby("concurrency")[["tok_s", "steps_per_s"]].median()
    lab = rows[rows[K_COLUMN] > 0].copy()
    lab["speedup"] = lab.tok_s / lab.concurrency.map(plain.tok_s)
    lab["measured_c"] = lab.concurrency.map(plain.steps_per_s) / lab.steps_per_s
    return lab.reset_index(drop=True)


def _break_even(costs: pd.DataFrame) -> pd.DataFrame:
    """Per k, the acceptance length τ above which speculation pays (= c(k)) and the matching α."""
    df = costs[[K_COLUMN, "relative_step_cost"]].copy()
    df["break_even_tau"] = df.relative_step_cost
    df["break_even_alpha"] = [
        _alpha_for_tau(max(t, 1.0), k) if t <= k + 1 else float("nan")
        for k, t in zip(df[K_COLUMN], df.break_even_tau)
    ]
    return df


_PUBLISHED_FILE: Path = DATA_DIR / "published" / "qwen3-30b-a3b-eagle3.json"


def published_points(path: Path = _PUBLISHED_FILE) -> pd.DataFrame:
    """Published Qwen3-30B-A3B + EAGLE-3 runs (recorded, another framework and GPU): one row per
    run with its batch, acceptance length, and speed-up over the same source's plain run."""
    record = json.loads(Path(path).read_text())
    rows = []
    for run in record["spec"]:
        plain = record["plain_tok_s"][run["source"]].get(str(run["batch"]))
        if plain is None:
            continue
        rows.append(
            {
                **run,
                "plain_tok_s": plain,
                "speedup_vs_plain": run["tok_s"] / plain,
                "date": record["sources"][run["source"]]["date"],
                "role": record["sources"][run["source"]].get("role", ""),
            }
        )
    return pd.DataFrame(rows)


#: Published work on speculation for MoE verifiers, and reported runs, with conditions and dates.
_LITERATURE_FILE: Path = DATA_DIR / "published" / "moe-speculation.json"


def literature(path: Path = _LITERATURE_FILE) -> pd.DataFrame:
    """One row per published number: source, date, role (MoE method, reported speed-up, reported
    slowdown, other drafter), conditions, the number, and whether it was read in the source."""
    record = json.loads(Path(path).read_text())
    return pd.DataFrame(record["records"])
