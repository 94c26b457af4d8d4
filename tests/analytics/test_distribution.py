"""helpers.analytics.distribution: TVD and the permutation test keep their level and have power."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.analytics.distribution import permutation_test, tvd


def test_tvd_of_known_distributions() -> None:
    assert tvd("aabb", "aabb") == 0.0
    assert tvd("aaaa", "bbbb") == 1.0
    assert tvd("aab", "abb") == pytest.approx(1 / 3)


def test_same_distribution_is_not_rejected_and_a_different_one_is() -> None:
    rng = np.random.default_rng(0)
    p, q = [0.5, 0.3, 0.2], [0.35, 0.35, 0.3]
    a, b = rng.choice(3, 400, p=p).tolist(), rng.choice(3, 400, p=p).tolist()
    same = permutation_test(a, b, permutations=500)
    assert not same.rejects() and 0 < same.p_value <= 1
    other = permutation_test(a, rng.choice(3, 400, p=q).tolist(), permutations=500)
    assert other.rejects() and other.tvd > same.tvd
    assert str(other).startswith("TVD ")


def test_the_false_rejection_rate_is_near_its_level() -> None:
    rng = np.random.default_rng(1)
    p = [0.6, 0.25, 0.1, 0.05]
    rejections = sum(
        permutation_test(
            rng.choice(4, 120, p=p).tolist(), rng.choice(4, 120, p=p).tolist(), 199, seed=s
        ).rejects()
        for s in range(60)
    )
    assert rejections <= 9  # 5 % of 60 is 3; 9 would be very unlikely for a valid test
