"""Two samples, one distribution? The total variation distance (TVD) of their empirical
distributions and its permutation p-value.

The test pools both samples, reshuffles which draw belongs to which side many times, and reports
how often a reshuffled TVD is at least the observed one, with the +1 correction: (hits + 1) /
(permutations + 1), never exactly 0. Notebook 07 tests speculative sampling's losslessness with it
(its chapter's distribution module), and the grader compares notebook 03's rejection-sampling
exercise with vLLM's sampler by it (kit.grader), so either stands without the other's notebook.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

__all__ = [
    "permutation_test",
]


def permutation_test(
    a: Sequence[Hashable], b: Sequence[Hashable], permutations: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """TVD of samples a vs b and its permutation p-value (+1 correction, never exactly 0)."""
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
    return observed, (hits + 1) / (permutations + 1)
