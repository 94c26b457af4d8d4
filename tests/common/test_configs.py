"""helpers.common.configs: the one config.json reader (local folders, hub ids offline)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.common.configs import read_config


def test_reads_a_local_folder_and_a_repo_relative_path(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 128}))
    assert read_config(tmp_path) == {"hidden_size": 128}
    assert read_config("data/tiny-qwen3-moe")["model_type"] == "qwen3_moe"


def test_missing_config_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="has no config.json"):
        read_config(tmp_path)


def test_hub_id_offline_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match="offline or no access") as err:
        read_config("Qwen/No-Such-Model-For-Tests")
    assert "\n" not in str(err.value)
