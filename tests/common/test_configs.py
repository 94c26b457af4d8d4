"""helpers.common.configs: the one config.json reader (local folders, hub ids offline)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.common.configs import read_config, read_json


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


@pytest.mark.parametrize(
    "text", ['{"hidden_size": 12', "", "\udcff".encode(errors="surrogateescape")]
)
def test_a_config_that_is_not_json_names_the_file(tmp_path: Path, text) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ValueError, match="is not valid JSON") as err:
        read_config(tmp_path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_read_json_says_how_to_restore_a_shipped_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers.common import paths

    monkeypatch.setattr(paths, "DATA_DIR", tmp_path)
    (tmp_path / "profiles").mkdir()
    broken = tmp_path / "profiles" / "x.json"
    broken.write_text("[1, 2")
    with pytest.raises(ValueError, match=r"git checkout -- data/profiles/x\.json`$"):
        read_json(broken)
