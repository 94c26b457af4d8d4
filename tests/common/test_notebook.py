"""helpers.common.notebook: setup_notebook sets what it prints and never overrides the user."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.common.notebook import MAX_CPU_THREADS, NOTEBOOK_ENV, setup_notebook


def test_sets_prints_and_keeps_user_values(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [*NOTEBOOK_ENV, "VLLM_LOGGING_CONFIG_PATH", "OMP_NUM_THREADS"]:
        monkeypatch.setenv(name, "")  # recorded, so the test leaves the environment as it found it
        monkeypatch.delenv(name)
    monkeypatch.setenv("VLLM_LOGGING_LEVEL", "DEBUG")
    applied = setup_notebook()
    assert applied["VLLM_LOGGING_LEVEL"] == "DEBUG"  # the user's choice wins
    assert applied["PYTHONWARNINGS"] == NOTEBOOK_ENV["PYTHONWARNINGS"]
    assert 1 <= int(applied["OMP_NUM_THREADS"]) <= MAX_CPU_THREADS  # bounded on a many-core box
    printed = capsys.readouterr().out
    assert all(f"{k}={v}" in printed for k, v in applied.items())


def test_vllm_log_goes_to_a_file_and_errors_still_show(
    monkeypatch: pytest.MonkeyPatch, tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    import logging.config

    from helpers.common import notebook

    monkeypatch.setenv("VLLM_LOGGING_CONFIG_PATH", "")
    monkeypatch.delenv("VLLM_LOGGING_CONFIG_PATH")
    monkeypatch.setattr(notebook, "LOGS_DIR", tmp_path)
    applied = setup_notebook()
    config = json.loads(Path(applied["VLLM_LOGGING_CONFIG_PATH"]).read_text())
    assert config == notebook.vllm_logging_config()
    log = tmp_path / "vllm.log"
    config["handlers"]["file"]["filename"] = str(log)
    logging.config.dictConfig(config)
    logger = logging.getLogger("vllm.test")
    logger.warning("a start-up warning")
    logger.error("a real error")
    out = capsys.readouterr().out
    assert "a real error" in out and "a start-up warning" not in out
    assert "a start-up warning" in log.read_text() and "a real error" in log.read_text()
    logging.getLogger("vllm").handlers.clear()


def test_a_logging_config_already_chosen_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_LOGGING_CONFIG_PATH", "")
    assert setup_notebook(verbose=False)["VLLM_LOGGING_CONFIG_PATH"] == ""
