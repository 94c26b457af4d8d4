"""helpers.paths: repo layout, build_path, local-vs-hub model references."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.common import paths


def test_repo_layout() -> None:
    assert (paths.REPO_ROOT / "pyproject.toml").is_file()
    assert paths.DATA_DIR == paths.REPO_ROOT / "data"
    assert paths.BUILD_DIR == paths.REPO_ROOT / "build"
    assert paths.FIGURES_DIR.parent == paths.BUILD_DIR and paths.LOGS_DIR.parent == paths.BUILD_DIR


def test_build_path_creates_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paths, "BUILD_DIR", tmp_path / "build")
    target = paths.build_path("logs", "run", "x.txt")
    assert target == tmp_path / "build" / "logs" / "run" / "x.txt"
    assert target.parent.is_dir() and not target.exists()


@pytest.mark.parametrize(
    ("ref", "local"),
    [
        ("data/tiny-qwen3-moe", True),
        ("./model", True),
        ("../elsewhere/model", True),
        ("/abs/model", True),
        ("build/tiny", True),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", False),
        ("RedHatAI/Qwen3-30B-A3B-Instruct-2507-speculator.eagle3", False),
    ],
)
def test_is_local_ref(ref: str, local: bool) -> None:
    assert paths.is_local_ref(ref) is local


def test_hub_id_is_unchanged() -> None:
    ref = "Qwen/Qwen3-30B-A3B-Instruct-2507"
    assert paths.resolve_model_ref(ref) == ref


def test_missing_local_model_names_make_tiny_models() -> None:
    with pytest.raises(FileNotFoundError, match="make tiny-models") as info:
        paths.resolve_model_ref("data/no-such-model-folder")
    assert str(paths.REPO_ROOT / "data" / "no-such-model-folder") in str(info.value)


def test_folder_without_config_is_missing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="config.json"):
        paths.resolve_model_ref(str(tmp_path))


def test_existing_local_model_becomes_absolute(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    assert paths.resolve_model_ref(str(tmp_path)) == str(tmp_path)


@pytest.mark.parametrize(
    ("relative", "hint"),
    [
        (
            "prompts/code.json",
            "restore it with `git checkout -- data/prompts/code.json` (or rebuild with "
            "`make tiny-models`)",
        ),
        (
            "tiny-qwen3-moe-eagle3/model.safetensors",
            "restore it with `git checkout -- data/tiny-qwen3-moe-eagle3/model.safetensors` (or "
            "rebuild with `make tiny-models`)",
        ),
        ("profiles/tiny.json", "restore it with `git checkout -- data/profiles/tiny.json`"),
    ],
)
def test_restore_hint_for_shipped_files(relative: str, hint: str) -> None:
    assert paths.restore_hint(paths.DATA_DIR / relative) == hint


def test_restore_hint_outside_data(tmp_path: Path) -> None:
    assert paths.restore_hint(tmp_path / "model.safetensors") == "download or export it again"
