"""The tiny pair next to real ones: published τ of Qwen3-MoE verifiers with EAGLE-3 drafters
(data/published/real-pair-tau.json, each with its source, conditions and date), and one computed
sentence on how far the toy's τ is from them and why (notebooks 02 and 03).

The tiny pair was trained and is measured on four templated synthetic tasks with a 2,048-token
vocabulary, where the next token is far easier to guess than in open chat: its τ says that the
mechanism works, not what a real pairing reaches. A chain's per-position rates (vLLM's definition:
accepted at position i / steps) do not depend on how many drafts follow, so 1 + the sum of a
published chain's first k rates is τ of that drafter at k drafts: the comparison at the toy's k.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.common.paths import DATA_DIR

__all__ = [
    "published_taus",
    "reference_record",
    "calibration_sentence",
]

_PUBLISHED_TAU_FILE: Path = DATA_DIR / "published" / "real-pair-tau.json"
#: The record the toy is compared with: a chain with per-position rates, the profiles' own pair
#: (Instruct-2507 + RedHat's speculator) in vLLM at T = 0 on chat prompts.
_REFERENCE = "moesd-ablation"


@dataclass(frozen=True)
class _PublishedTau:
    """One published τ with the conditions it was measured under."""

    id: str
    source: str
    url: str
    date: str
    verifier: str
    drafter: str
    engine: str
    hardware: str
    drafting: str
    k: int
    temperature: float | None
    sampling: str
    dataset: str
    subsets: int | None
    tau: float
    per_position: tuple[float, ...] | None = None
    tau_by_subset: dict[str, float] | None = None
    #: When the record was read in its source, the verifier's release, the batch it ran at, the
    #: values a summarised τ came from, and how a τ that is not the source's own number was made.
    read: str | None = None
    release: str | None = None
    batch: int | None = None
    tau_runs: tuple[float, ...] | None = None
    note: str | None = None

    def tau_at(self, k: int) -> float | None:
        """τ of this drafter at k drafts from its per-position rates (None without them, or k > its
        k)."""
        if self.per_position is None or not 1 <= k <= len(self.per_position):
            return None
        return 1.0 + sum(self.per_position[:k])


def published_taus(path: Path = _PUBLISHED_TAU_FILE) -> list[_PublishedTau]:
    """Every record of the published-τ file, in file order."""
    records: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["records"]
    return [
        _PublishedTau(
            **{
                **r,
                "per_position": tuple(r["per_position"]) if r["per_position"] else None,
                "tau_runs": tuple(r["tau_runs"]) if r.get("tau_runs") else None,
            }
        )
        for r in records
    ]


def reference_record() -> _PublishedTau:
    """The published chain the toy is compared with (REFERENCE)."""
    return next(r for r in published_taus() if r.id == _REFERENCE)


def calibration_sentence(
    tau: float,
    rates: Sequence[float],
    k: int,
    vocab_size: int,
    tasks: int,
    reference: _PublishedTau | None = None,
) -> str:
    """One sentence: this run's τ and first-draft acceptance against a published real chain's at
    the same k, and what differs (a narrow synthetic corpus at T = 0 vs open chat)."""
    ref = reference or reference_record()
    real_k = min(k, ref.k)
    at_k = ref.tau_at(real_k)
    if at_k is None or ref.per_position is None or not rates:
        raise ValueError(f"{ref.id}: a comparison at k={k} needs per-position rates on both sides")
    temperature = f"T = {ref.temperature}" if ref.temperature is not None else "T not stated"
    kinds = f": {', '.join(list(ref.tau_by_subset)[:4])}, …" if ref.tau_by_subset else ""
    return (
        f"The tiny pair's τ {tau:.2f} at k={k} (T = 0) is {tau / at_k:.1f}× the {at_k:.2f} a "
        f"{ref.verifier} EAGLE-3 chain reaches at k={real_k} ({ref.source}, {ref.date}, "
        f"{temperature}), and its first draft is accepted {rates[0]:.0%} of the time against "
        f"{ref.per_position[0]:.0%}: the toy was trained and tested on {tasks} templated "
        f"synthetic tasks with a {vocab_size:,}-token vocabulary, the real drafter on open-ended "
        f"requests ({ref.dataset}{kinds}) with Qwen3's vocabulary, so the toy's τ shows that the "
        f"mechanism works, not what a real pairing reaches."
    )
