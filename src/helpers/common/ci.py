"""The one CI switch: smaller experiments when the CI environment variable is set."""

from __future__ import annotations

import os
from typing import TypeVar

__all__ = [
    "ci_scaled",
]

_CI_ENV_VAR = "CI"
_FALSE = {"", "0", "false", "no", "off"}

_Number = TypeVar("_Number", int, float)


def _in_ci() -> bool:
    """True when $CI is set to anything but '', '0', 'false', 'no' or 'off'."""
    return os.environ.get(_CI_ENV_VAR, "").strip().lower() not in _FALSE


def ci_scaled(full: _Number, ci: _Number) -> _Number:
    """`full` on a learner's machine; under CI the smaller of `full` and `ci`."""
    return min(full, ci) if _in_ci() else full
