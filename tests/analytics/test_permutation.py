"""helpers.analytics.permutation: the permutation test keeps its level, has power, and its p-value is
never 0."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.analytics.permutation import permutation_test


def test_identical_samples_have_no_distance_and_disjoint_ones_all_of_it() -> None:
    tvd, p = permutation_test([0, 1] * 50, [0, 1] * 50, permutations=99)
    assert tvd == 0.0 and p == 1.0
    tvd, p = permutation_test(["a"] * 50, ["b"] * 50, permutations=99)
    assert tvd == 1.0 and p == 1 / 100  # the +1 correction: never exactly 0


def test_the_false_rejection_rate_is_near_its_level() -> None:
    rng = np.random.default_rng(1)
    p = [0.6, 0.25, 0.1, 0.05]
    rejections = sum(
        permutation_test(
            rng.choice(4, 120, p=p).tolist(), rng.choice(4, 120, p=p).tolist(), 199, seed=s
        )[1]
        < 0.05
        for s in range(60)
    )
    assert rejections <= 9  # 5 % of 60 is 3; 9 would be very unlikely for a valid test


def test_a_different_distribution_is_rejected() -> None:
    rng = np.random.default_rng(0)
    a = rng.choice(3, 400, p=[0.5, 0.3, 0.2]).tolist()
    b = rng.choice(3, 400, p=[0.35, 0.35, 0.3]).tolist()
    assert permutation_test(a, b, permutations=500)[1] < 0.05


def test_tvd_of_known_distributions() -> None:
    assert permutation_test("aabb", "aabb", permutations=9)[0] == 0.0
    assert permutation_test("aaaa", "bbbb", permutations=9)[0] == 1.0
    assert permutation_test("aab", "abb", permutations=9)[0] == pytest.approx(1 / 3)
