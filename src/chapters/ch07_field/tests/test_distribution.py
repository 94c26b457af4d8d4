"""chapters.ch07_field.distribution: the permutation test keeps its level and has power."""

from __future__ import annotations

import numpy as np

from chapters.ch07_field.distribution import (
    _permutation_test,
    _tokens_at,
    lossless_test,
    position_tests,
    rejects_any,
)
from helpers.common.counters import SpecCounters


def test_same_distribution_is_not_rejected_and_a_different_one_is() -> None:
    rng = np.random.default_rng(0)
    p, q = [0.5, 0.3, 0.2], [0.35, 0.35, 0.3]
    a, b = rng.choice(3, 400, p=p).tolist(), rng.choice(3, 400, p=p).tolist()
    same = _permutation_test(a, b, permutations=500)
    assert not same.rejects() and 0 < same.p_value <= 1
    other = _permutation_test(a, rng.choice(3, 400, p=q).tolist(), permutations=500)
    assert other.rejects() and other.tvd > same.tvd
    assert str(other).startswith("TVD ")


def draws(rng: np.random.Generator, p: list[float], prompts: int, n: int, length: int) -> list:
    """[prompt][sample] token ids, every position drawn from p."""
    return [[rng.choice(len(p), length, p=p).tolist() for _ in range(n)] for _ in range(prompts)]


def test_every_position_is_tested_and_a_difference_late_in_the_step_is_caught() -> None:
    rng = np.random.default_rng(2)
    p, q = [0.5, 0.3, 0.2], [0.2, 0.3, 0.5]
    a, b = draws(rng, p, 2, 300, 5), draws(rng, p, 2, 300, 5)
    for side in b:  # b differs at position 4 only
        for ids in side:
            ids[4] = int(rng.choice(3, p=q))
    tests = position_tests(a, b, [1, 2, 3, 4], permutations=999)
    assert list(tests) == [1, 2, 3, 4] and tests[4].rejects(0.01 / 4)
    assert not any(tests[i].rejects(0.01 / 4) for i in (1, 2, 3))
    assert rejects_any(tests, 0.01) and not rejects_any({i: tests[i] for i in (1, 2, 3)}, 0.01)
    assert _tokens_at([[[7, 8], [9]]], 1) == [(0, 8)]  # draws that stopped early are skipped


def test_the_lossless_check_fails_on_a_run_with_no_drafts() -> None:
    rng = np.random.default_rng(3)
    p = [0.6, 0.3, 0.1]
    a, b = draws(rng, p, 2, 200, 4), draws(rng, p, 2, 200, 4)
    drafted = lossless_test(a, b, SpecCounters(400, 1200, 700), [1, 2, 3], 0.01, permutations=200)
    assert drafted.exercised and not drafted.rejects and drafted.passes
    # the same samples, but the engine scheduled no drafts (a plain engine's counter delta)
    none = lossless_test(a, b, SpecCounters(), [1, 2, 3], 0.01, permutations=200)
    assert not none.exercised and not none.passes
    # drafts scheduled, none accepted: drafting never changed a token, nothing was tested
    rejected = lossless_test(a, b, SpecCounters(400, 1200, 0), [1, 2, 3], 0.01, permutations=200)
    assert not rejected.passes
    assert str(drafted).startswith("400 drafts, 700 drafted tokens accepted")
