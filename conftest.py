"""pytest's root conftest: puts the repository root on sys.path (so `tests.support` imports from
a chapter's own tests, src/chapters/chNN_*/tests/) and gives those tests tests/conftest.py's
fixtures; in a fork with fewer chapters than the whole workbook, the `whole_workbook` tests skip."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import (  # noqa: F401 - fixtures, found by name
    _tiny_pair_source,
    added_profile,
    qwen3_built,
    tiny,
    tiny_pair,
    tok,
)
from tests.support import whole_chapters

_ROOT = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a fork (fewer chapters than the whole workbook) skip the `whole_workbook` tests, unless
    they are asked for by name (`-m whole_workbook`: kit.drop_check's trim list)."""
    from kit import chapters

    found, whole = len(chapters.discover(_ROOT / "src" / "chapters")), whole_chapters(_ROOT)
    if found >= whole or config.getoption("markexpr", "") == "whole_workbook":
        return
    why = (
        f"a fork: {found} of the workbook's {whole} chapters; what this test would find is the "
        "fork's trim list (python -m kit.drop_check --keep ...)"
    )
    for item in items:
        if item.get_closest_marker("whole_workbook"):
            item.add_marker(pytest.mark.skip(reason=why))
