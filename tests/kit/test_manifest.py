"""kit.manifest: data/ matches its sha256 manifest, and a changed byte, a missing file
or an added one is named with its fix, in well under a second."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from helpers.common import paths
from helpers.common.paths import DATA_DIR
from kit import manifest

#: Seconds the check of all of data/ (~20 MB) may take on a busy 2-core machine (19 ms idle).
CHECK_LIMIT_S = 1.0


@pytest.fixture
def data_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of data/ standing in for the repo's (shown paths and restore hints point into it)."""
    shutil.copytree(DATA_DIR, tmp_path / "data")
    monkeypatch.setattr(paths, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(paths, "DATA_DIR", tmp_path / "data")
    return tmp_path / "data"


def test_the_shipped_data_matches_its_manifest() -> None:
    problems = manifest.check_manifest(DATA_DIR)
    assert problems == {}, (
        "data/ changed without its manifest: check the files below, then run "
        "`python -m kit.manifest`:\n" + "\n".join(problems.values())
    )


def test_the_manifest_lists_every_file_in_sha256sums_format() -> None:
    lines = (DATA_DIR / manifest._MANIFEST_NAME).read_text().splitlines()
    names = [line.split("  ", 1)[1] for line in lines]
    on_disk = sorted(
        p.relative_to(DATA_DIR).as_posix()
        for p in DATA_DIR.rglob("*")
        if p.is_file() and p.name != manifest._MANIFEST_NAME
    )
    assert names == on_disk, set(names) ^ set(on_disk)
    if shutil.which("sha256sum"):  # the format is sha256sum's: it checks the manifest too
        done = subprocess.run(
            ["sha256sum", "--check", "--quiet", manifest._MANIFEST_NAME],
            cwd=DATA_DIR,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stdout + done.stderr


def test_checking_all_of_data_takes_well_under_a_second() -> None:
    t0 = time.perf_counter()
    manifest.check_manifest(DATA_DIR)
    seconds = time.perf_counter() - t0
    assert seconds < CHECK_LIMIT_S, f"the manifest check took {seconds:.2f} s"


def test_a_changed_byte_a_missing_and_an_added_file_are_named(data_copy: Path) -> None:
    template = data_copy / "tiny-qwen3-moe" / "chat_template.jinja"
    blob = bytearray(template.read_bytes())
    blob[len(blob) // 2] ^= 0x01
    template.write_bytes(bytes(blob))
    (data_copy / "prompts" / "code.json").unlink()
    (data_copy / "profiles" / "mine.json").write_text("{}")
    problems = manifest.check_manifest(data_copy)
    changed, missing, added = (
        data_copy / "tiny-qwen3-moe" / "chat_template.jinja",
        data_copy / "prompts" / "code.json",
        data_copy / "profiles" / "mine.json",
    )
    assert set(problems) == {changed, missing, added}, problems
    assert problems[changed].startswith("data/tiny-qwen3-moe/chat_template.jinja does not match")
    assert "`git checkout -- data/tiny-qwen3-moe/chat_template.jinja`" in problems[changed]
    assert "`python -m kit.manifest`" in problems[changed]
    assert problems[missing].startswith("data/prompts/code.json is missing")
    assert "`git checkout -- data/prompts/code.json`" in problems[missing]
    assert problems[added].startswith("data/profiles/mine.json is not in data/MANIFEST.sha256")
    assert all("\n" not in line for line in problems.values())


def test_a_missing_or_malformed_manifest_is_one_line(data_copy: Path) -> None:
    target = data_copy / manifest._MANIFEST_NAME
    target.write_text(target.read_text() + "not a digest line\n")
    (line,) = manifest.check_manifest(data_copy).values()
    assert "data/MANIFEST.sha256 line" in line and "is not `<sha256>  <path>`" in line, line
    target.unlink()
    (line,) = manifest.check_manifest(data_copy).values()
    assert line.startswith("data/MANIFEST.sha256 is missing"), line
    assert "`git checkout -- data/MANIFEST.sha256`" in line


def test_write_then_check_and_leftovers_are_not_listed(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("[]")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.bin").write_bytes(bytes(range(256)))
    for leftover in (".ipynb_checkpoints/a-checkpoint.json", "__pycache__/x.pyc", ".DS_Store"):
        (tmp_path / leftover).parent.mkdir(exist_ok=True)
        (tmp_path / leftover).write_text("x")
    written = manifest.write_manifest(tmp_path)
    assert [line.split("  ")[1] for line in written.read_text().splitlines()] == [
        "a.json",
        "sub/b.bin",
    ]
    assert manifest.check_manifest(tmp_path) == {}
    (tmp_path / "sub" / "b.bin").write_bytes(bytes(range(255)))
    assert list(manifest.check_manifest(tmp_path)) == [tmp_path / "sub" / "b.bin"]


def test_the_command_line_writes_and_checks(tmp_path: Path, capsys) -> None:
    (tmp_path / "a.txt").write_text("one")
    assert manifest.main(["--check", str(tmp_path)]) == 1  # no manifest yet
    assert manifest.main([str(tmp_path)]) == 0
    assert "(1 file)" in capsys.readouterr().out
    assert manifest.main(["--check", str(tmp_path)]) == 0
    (tmp_path / "a.txt").write_text("two")
    assert manifest.main(["--check", str(tmp_path)]) == 1
    assert "a.txt does not match" in capsys.readouterr().err
    assert manifest.main([str(tmp_path / "nowhere")]) == 1
