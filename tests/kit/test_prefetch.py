"""`make prefetch`: offline in one line, tiny has nothing to fetch, and the pairing validator on the cached copies.

No network: the hub probe, the dry run and the download are replaced by functions that lay the
tiny pair out in a temporary Hugging Face cache under the real profile's model ids, so the
validation after a "download" reads real config.json and safetensors files.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers.common.profiles import load_profile
from helpers.engine.pairing import edited_copy
from kit import prefetch
from tests.support import run_module

PROFILE = "qwen3-30b-a3b"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
#: Seconds an offline prefetch may take on a busy 2-core machine (about 0.4 s idle).
OFFLINE_LIMIT = 20.0


def cache_model(cache: Path, repo: str, src: Path) -> Path:
    """Lay a model folder out as the HF cache does (refs/main -> snapshots/<commit>/); its snapshot."""
    base = cache / f"models--{repo.replace('/', '--')}"
    snapshot = base / "snapshots" / COMMIT
    shutil.copytree(src, snapshot)
    (base / "refs").mkdir(parents=True, exist_ok=True)
    (base / "refs" / "main").write_text(COMMIT)
    return snapshot


@pytest.fixture
def hub_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Online as far as the environment says: no offline variables."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)


def fake_hub(monkeypatch: pytest.MonkeyPatch, cache: Path, sources: dict[str, Path]) -> list[str]:
    """A reachable hub whose download copies `sources` into the cache; returns the downloads made."""
    downloads: list[str] = []

    def fake_download(repo: str, cache_dir: Path | None = None) -> Path:
        downloads.append(repo)
        return cache_model(Path(cache_dir), repo, sources[repo])

    monkeypatch.setattr(prefetch, "hub_reachable", lambda timeout: True)
    monkeypatch.setattr(prefetch, "_bytes_to_fetch", lambda repo, cache_dir=None: 3 * prefetch._GIB)
    monkeypatch.setattr(prefetch, "_disk_problem", lambda need, where: None)
    monkeypatch.setattr(prefetch, "_download", fake_download)
    return downloads


def output_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """What run_prefetch printed, stdout and stderr, as lines."""
    out = capsys.readouterr()
    return (out.out + out.err).strip().splitlines()


def test_tiny_has_nothing_to_prefetch(capsys: pytest.CaptureFixture[str]) -> None:
    assert prefetch._run_prefetch("tiny") == prefetch.EXIT_OK
    lines = output_lines(capsys)
    assert len(lines) == 1 and "nothing to prefetch" in lines[0], lines


@pytest.mark.usefixtures("qwen3_built")
def test_the_shape_names_its_tokenizer(capsys: pytest.CaptureFixture[str]) -> None:
    assert prefetch._run_prefetch("qwen3-30b-a3b-shape") == prefetch.EXIT_OK
    lines = output_lines(capsys)
    assert len(lines) == 2 and "built and verified by `make venv`" in lines[1], lines


@pytest.mark.parametrize("var", ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"])
def test_offline_without_the_models_is_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    hub_env: None,
    var: str,
) -> None:
    monkeypatch.setenv(var, "1")  # only this one (make test exports both for the tiny profile)
    assert prefetch._run_prefetch(PROFILE, cache_dir=tmp_path) == prefetch.EXIT_FAIL
    lines = output_lines(capsys)
    assert len(lines) == 1 and var in lines[0] and "Qwen/Qwen3-30B-A3B" in lines[0], lines
    assert f"make prefetch PROFILE={PROFILE}" in lines[0]


def test_unreachable_hub_is_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    hub_env: None,
) -> None:
    monkeypatch.setattr(prefetch, "hub_reachable", lambda timeout: False)
    assert prefetch._run_prefetch(PROFILE, cache_dir=tmp_path) == prefetch.EXIT_FAIL
    lines = output_lines(capsys)
    assert len(lines) == 1 and "unreachable" in lines[0], lines


def test_offline_cli_as_make_runs_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env.update(HF_HOME=str(tmp_path / "hf-home"), HF_HUB_OFFLINE="1")
    done, seconds = run_module("kit.prefetch", ["--profile", PROFILE], env)
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, lines
    assert "HF_HUB_OFFLINE" in lines[0] and "Traceback" not in lines[0]
    assert seconds < OFFLINE_LIMIT


def test_download_then_validate_the_cached_pair(
    tmp_path: Path,
    tiny_pair,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    hub_env: None,
) -> None:
    profile = load_profile(PROFILE)
    cache = tmp_path / "hub"
    sources = {profile.verifier: tiny_pair.verifier, profile.drafter: tiny_pair.drafter}
    downloads = fake_hub(monkeypatch, cache, sources)
    assert prefetch._run_prefetch(PROFILE, cache_dir=cache) == prefetch.EXIT_OK
    lines = output_lines(capsys)
    assert downloads == [profile.verifier, profile.drafter]
    assert any("3.00 GiB to download" in line for line in lines), lines
    assert lines[-1].startswith(f"prefetch {PROFILE}: OK") and "HF_HUB_OFFLINE=1" in lines[-1]
    # the stand-in pair was trained for another verifier and shorter contexts: warnings, not errors
    assert all("pairing error" not in line for line in lines), lines


def test_offline_with_both_models_cached_validates_only(
    tmp_path: Path,
    tiny_pair,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    profile = load_profile(PROFILE)
    cache = tmp_path / "hub"
    cache_model(cache, profile.verifier, tiny_pair.verifier)
    cache_model(cache, profile.drafter, tiny_pair.drafter)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(prefetch, "_download", lambda *a, **k: pytest.fail("no download offline"))
    assert prefetch._run_prefetch(PROFILE, cache_dir=cache) == prefetch.EXIT_OK
    lines = output_lines(capsys)
    assert "validating only" in lines[0] and lines[-1].startswith(f"prefetch {PROFILE}: OK"), lines


def test_a_broken_cached_pair_fails_with_the_validators_lines(
    tmp_path: Path,
    tiny_pair,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    hub_env: None,
) -> None:
    profile = load_profile(PROFILE)
    wrong = edited_copy(tiny_pair.verifier, tmp_path / "wrong-verifier", hidden_size=256)
    sources = {profile.verifier: wrong, profile.drafter: tiny_pair.drafter}
    fake_hub(monkeypatch, tmp_path / "hub", sources)
    assert prefetch._run_prefetch(PROFILE, cache_dir=tmp_path / "hub") == prefetch.EXIT_FAIL
    errors = [line for line in output_lines(capsys) if "pairing error" in line]
    assert errors and all(line.startswith(f"prefetch {PROFILE}: pairing error") for line in errors)


def test_a_failed_download_is_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    hub_env: None,
) -> None:
    fake_hub(monkeypatch, tmp_path, {})

    def refused(repo: str, cache_dir: Path | None = None) -> Path:
        raise OSError("401 Client Error: Unauthorized\nmore detail")

    monkeypatch.setattr(prefetch, "_download", refused)
    assert prefetch._run_prefetch(PROFILE, cache_dir=tmp_path) == prefetch.EXIT_FAIL
    lines = output_lines(capsys)
    assert "OSError: 401 Client Error: Unauthorized" in lines[-1] and "HF_TOKEN" in lines[-1]
    assert "more detail" not in "\n".join(lines)


def test_disk_problem(tmp_path: Path) -> None:
    assert (
        prefetch._disk_problem(10 * prefetch._GIB, tmp_path, free_bytes=100 * prefetch._GIB) is None
    )
    line = prefetch._disk_problem(
        61 * prefetch._GIB, tmp_path / "not" / "yet", free_bytes=20 * prefetch._GIB
    )
    assert line and "61.0 GiB" in line and "20.0 GiB" in line and "HF_HOME" in line
    assert prefetch._disk_problem(1, tmp_path / "not" / "yet") is None  # walks up to what exists


def test_bytes_to_fetch_counts_only_missing_files(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    seen = {}

    def dry_run(repo: str, **kwargs: object) -> list[SimpleNamespace]:
        seen.update(kwargs)
        return [
            SimpleNamespace(file_size=5 * prefetch._GIB, will_download=True),
            SimpleNamespace(file_size=7 * prefetch._GIB, will_download=False),
            SimpleNamespace(file_size=None, will_download=True),
        ]

    monkeypatch.setattr(huggingface_hub, "snapshot_download", dry_run)
    assert prefetch._bytes_to_fetch("org/model") == 5 * prefetch._GIB
    assert seen["dry_run"] is True and seen["allow_patterns"] == list(prefetch._ALLOW_PATTERNS)


def test_allow_patterns_cover_what_vllm_loads() -> None:
    from huggingface_hub.utils import filter_repo_objects

    files = [
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.json",
        "merges.txt",
        "model.safetensors.index.json",
        "model-00001-of-00016.safetensors",
        "pytorch_model.bin",
        "original/consolidated.pth",
        "README.md",
    ]
    kept = set(filter_repo_objects(files, allow_patterns=list(prefetch._ALLOW_PATTERNS)))
    assert kept == set(files[:8])
