"""helpers.common.notebook: setup_notebook sets what it prints and never overrides the user."""

from __future__ import annotations

import pytest

from helpers.common.notebook import NOTEBOOK_ENV, setup_notebook


def test_sets_prints_and_keeps_user_values(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in NOTEBOOK_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("VLLM_LOGGING_LEVEL", "DEBUG")
    applied = setup_notebook()
    assert applied["VLLM_LOGGING_LEVEL"] == "DEBUG"  # the user's choice wins
    assert applied["PYTHONWARNINGS"] == NOTEBOOK_ENV["PYTHONWARNINGS"]
    printed = capsys.readouterr().out
    assert all(f"{k}={v}" in printed for k, v in applied.items())
