"""Notebook 03's runs read against references: this run's acceptance rates beside a published
chain's; the from-scratch decoder's counters summed, each counter side by side with vLLM's, and
its tokens and rounds by how they were produced (the decoder
itself is `helpers.eagle3.decode`, which the kit's grader and the twins test also use)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from helpers.analytics import calibration
from helpers.common import vllm_names
from helpers.common.counters import SpecCounters
from helpers.eagle3.decode import ReferenceOutput

__all__ = [
    "rates_side_by_side",
    "total_counters",
    "agreement_table",
    "label_table",
    "rounds_table",
]

#: How each output token was produced (the first one by the prefill step, before any draft).
_LABELS: tuple[str, ...] = ("prefill", "accepted", "correction", "bonus")


def rates_side_by_side(rates: Sequence[float]) -> pd.DataFrame:
    """Per draft position, this run's acceptance rate next to the published chain's (the one
    calibration compares the toy with), and the τ both give at this run's k (NaN past the
    published chain's k)."""
    ref = calibration.reference_record()
    published = list(ref.per_position or ())[: len(rates)]
    published += [math.nan] * (len(rates) - len(published))
    column = f"published: {ref.verifier}, T = {ref.temperature}"
    df = pd.DataFrame(
        {"this run": list(rates), column: published},
        index=pd.Index([str(i + 1) for i in range(len(rates))], name="draft position"),
    )
    df.loc[f"τ at k={len(rates)}"] = 1 + df.sum(skipna=False)
    return df.round(3)


def total_counters(outputs: Sequence[ReferenceOutput]) -> SpecCounters:
    """The reference's counters summed over requests (comparable to a vLLM counter delta)."""
    return sum((o.counters() for o in outputs), SpecCounters())


def agreement_table(
    outputs: Sequence[ReferenceOutput],
    vllm_token_ids: Sequence[Sequence[int]],
    vllm_counters: SpecCounters,
) -> pd.DataFrame:
    """Reference vs vLLM: identical requests and each counter side by side (a tidy table)."""
    ref = total_counters(outputs)
    same = sum(list(o.token_ids) == list(v) for o, v in zip(outputs, vllm_token_ids, strict=True))
    rows = [
        ("requests_token_identical", same, len(outputs)),
        (vllm_names.STATS.num_drafts, ref.num_drafts, vllm_counters.num_drafts),
        (vllm_names.STATS.draft_tokens, ref.num_draft_tokens, vllm_counters.num_draft_tokens),
        (
            vllm_names.STATS.accepted_tokens,
            ref.num_accepted_tokens,
            vllm_counters.num_accepted_tokens,
        ),
    ]
    rows += [
        (f"{vllm_names.STATS.accepted_tokens}_pos{i}", a, b)
        for i, (a, b) in enumerate(zip(ref.accepted_per_pos, vllm_counters.accepted_per_pos))
    ]
    df = pd.DataFrame(rows, columns=["quantity", "reference", "vllm"])
    df["difference"] = df.reference - df.vllm
    return df


def label_table(outputs: Sequence[ReferenceOutput]) -> pd.DataFrame:
    """How many output tokens of each kind the reference produced, per request (tidy)."""
    rows = [
        {"request": i, "label": lab, "tokens": o.labels.count(lab)}
        for i, o in enumerate(outputs)
        for lab in _LABELS
    ]
    return pd.DataFrame(rows)


def rounds_table(output: ReferenceOutput, tokenizer: Any) -> pd.DataFrame:
    """One request's rounds: drafted tokens (as text), accepted count, emitted tokens."""
    rows = [
        {
            "round": i,
            "drafted": [tokenizer.decode([t]) for t in r.drafted],
            "accepted": r.accepted,
            "emitted": [tokenizer.decode([t]) for t in r.emitted],
            "kind": r.labels[-1],
        }
        for i, r in enumerate(output.rounds)
    ]
    return pd.DataFrame(rows)
