"""helpers.common.ci: the one CI switch and how it scales experiments."""

from __future__ import annotations

import pytest

from helpers.common.ci import _CI_ENV_VAR, _in_ci, ci_scaled


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", False),
        ("0", False),
        ("false", False),
        ("False", False),
        ("no", False),
        ("off", False),
        ("1", True),
        ("true", True),
        ("yes", True),
        ("github-actions", True),
    ],
)
def test_in_ci_reads_the_variable_like_ci_systems_set_it(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: bool
) -> None:
    monkeypatch.setenv(_CI_ENV_VAR, value)
    assert _in_ci() is expected


def test_ci_scaled_takes_the_smaller_value_only_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_CI_ENV_VAR, raising=False)
    assert ci_scaled(128, 32) == 128
    monkeypatch.setenv(_CI_ENV_VAR, "true")
    assert ci_scaled(128, 32) == 32
    assert ci_scaled(16, 32) == 16  # never scales up
