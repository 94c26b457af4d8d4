"""Is sampling with a drafter distributed like sampling without one? Total variation distance and a
permutation test (notebook 07).

At T > 0 speculative decoding is lossless in distribution, not token for token: the random stream
differs. The check compares two samples of tokens drawn at the same position with and without the
drafter. TVD = ½ Σ |p − q| of the two empirical distributions; the permutation test pools both
samples, reshuffles which draw belongs to which side many times, and reports how often a
reshuffled TVD is at least the observed one. A small p-value says the samples differ by more than
sampling noise would explain; a test that cannot reject a known difference has no power, so the
notebook also runs it on a deliberately different sampler.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["tvd", "TestResult", "permutation_test"]


def tvd(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Total variation distance between the empirical distributions of two samples."""
    ca, cb = Counter(a), Counter(b)
    return 0.5 * sum(abs(ca[x] / len(a) - cb[x] / len(b)) for x in set(ca) | set(cb))


@dataclass(frozen=True)
class TestResult:
    """The observed TVD, the permutation p-value, and the sample sizes."""

    tvd: float
    p_value: float
    n_a: int
    n_b: int

    def rejects(self, alpha: float = 0.05) -> bool:
        """True when the samples differ beyond noise at level alpha."""
        return self.p_value < alpha

    def __str__(self) -> str:
        p = f"= {self.p_value:.3f}" if self.p_value >= 0.001 else "< 0.001"
        return f"TVD {self.tvd:.3f}, p {p} (n = {self.n_a} vs {self.n_b})"


def permutation_test(
    a: Sequence[Hashable], b: Sequence[Hashable], permutations: int = 2000, seed: int = 0
) -> TestResult:
    """TVD of a vs b and its permutation p-value (with the +1 correction, never exactly 0)."""
    labels = {x: i for i, x in enumerate(sorted(set(a) | set(b), key=repr))}
    pooled = np.array([labels[x] for x in (*a, *b)])
    k, n_a = len(labels), len(a)

    def distance(idx: np.ndarray) -> float:
        pa = np.bincount(idx[:n_a], minlength=k) / n_a
        pb = np.bincount(idx[n_a:], minlength=k) / (len(idx) - n_a)
        return 0.5 * float(np.abs(pa - pb).sum())

    observed = distance(pooled)
    rng = np.random.default_rng(seed)
    hits = sum(distance(rng.permutation(pooled)) >= observed - 1e-12 for _ in range(permutations))
    return TestResult(observed, (hits + 1) / (permutations + 1), n_a, len(b))
