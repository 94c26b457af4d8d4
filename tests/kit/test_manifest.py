"""kit.manifest: data/ matches its sha256 manifest, and a changed byte, a missing file
or an added one is named with its fix, in well under a second."""

from __future__ import annotations

import json
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
    assert (
        "changed on purpose: `make manifest FILE=data/tiny-qwen3-moe/chat_template.jinja`"
        in (problems[changed])
    )
    assert problems[missing].startswith("data/prompts/code.json is missing")
    assert "`git checkout -- data/prompts/code.json`" in problems[missing]
    assert problems[added].startswith("data/profiles/mine.json is not in data/MANIFEST.sha256")
    assert "`make manifest FILE=data/profiles/mine.json`" in problems[added]
    assert "git checkout" not in problems[added], "an added file has nothing to check out"
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


# --------------------------------------------------------------------------- symbolic links


def test_symbolic_links_are_refused_by_name_one_line_each(data_copy: Path) -> None:
    """A self-loop and a directory cycle passed as "data intact"; a .json pair loop crashed
    preflight with "RuntimeError: Symlink loop" and an absolute path."""
    links = {
        "self": "self",  # a self-loop
        "prompts/up": "..",  # a directory cycle
        "published/a.json": "b.json",  # a .json pair loop
        "published/b.json": "a.json",
    }
    for name, target in links.items():
        (data_copy / name).symlink_to(target)
    shipped = data_copy / "prompts" / "code.json"
    shipped.unlink()
    shipped.symlink_to("prose.json")  # a shipped file replaced by a link
    problems = manifest.check_manifest(data_copy)
    assert sorted(problems) == sorted(data_copy / n for n in [*links, "prompts/code.json"])
    for path, line in problems.items():
        shown = path.relative_to(data_copy.parent).as_posix()
        assert line.startswith(f"{shown} is a symbolic link"), line
        assert str(data_copy) not in line and "\n" not in line, line
    assert (
        "`rm data/prompts/code.json && git checkout -- data/prompts/code.json`"
        in (problems[shipped])
    )
    assert "git checkout" not in problems[data_copy / "self"]
    assert manifest._symlinks(data_copy) == sorted(problems)


def test_the_manifest_never_lists_or_follows_a_link(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("b")
    (tmp_path / "link.txt").symlink_to("a.txt")
    (tmp_path / "again").symlink_to("sub")
    written = manifest.write_manifest(tmp_path)
    assert [line.split("  ")[1] for line in written.read_text().splitlines()] == [
        "a.txt",
        "sub/b.txt",
    ]


# --------------------------------------------------------------------------- recording one file


def tiny_profile_named(name: str) -> str:
    """The tiny profile's JSON under another name: a valid profile a user adds."""
    raw = json.loads((DATA_DIR / "profiles" / "tiny.json").read_text())
    return json.dumps({**raw, "name": name}, indent=2)


def test_recording_one_file_records_that_file_only(data_copy: Path) -> None:
    """`python -m kit.manifest`, the fix printed for an added profile, re-blessed every file in
    data/, damaged ones included (and failed outside .venv)."""
    target = data_copy / manifest._MANIFEST_NAME
    before = target.read_text()
    added = data_copy / "profiles" / "mypair.json"
    added.write_text(tiny_profile_named("mypair"))
    damaged = data_copy / "prompts" / "code.json"
    damaged.write_text(damaged.read_text() + " ")
    line = manifest._record_file(added, data_copy)
    assert line == "recorded data/profiles/mypair.json in data/MANIFEST.sha256", line
    after = target.read_text().splitlines()
    assert sorted(set(after) - set(before.splitlines())) == [
        f"{manifest._digest(added)}  profiles/mypair.json"
    ]
    assert len(after) == len(before.splitlines()) + 1 and after == sorted(
        after, key=lambda x: x[66:]
    )
    assert list(manifest.check_manifest(data_copy)) == [damaged], "the damaged file stays named"
    added.write_text(tiny_profile_named("mypair") + "\n")
    manifest._record_file(added, data_copy)  # recorded again: its line replaced, not added
    assert len(target.read_text().splitlines()) == len(after)
    assert manifest.check_manifest(data_copy) == {
        damaged: manifest.check_manifest(data_copy)[damaged]
    }


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda d: d / "profiles" / "broken.json", "does not load"),
        (lambda d: d / "published" / "notes.json", "is not valid JSON"),
        (lambda d: d / "nowhere.bin", "is not a file"),
        (lambda d: d.parent / "outside.txt", "is not inside data/"),
        (lambda d: d / "published" / "link.json", "is a symbolic link"),
        (lambda d: d / manifest._MANIFEST_NAME, "is the manifest itself"),
    ],
    ids=["bad-profile", "bad-json", "missing", "outside", "link", "manifest"],
)
def test_recording_refuses_what_it_must_not_bless_in_one_line(
    data_copy: Path, make, says: str
) -> None:
    path = make(data_copy)
    if path.name == "broken.json":
        path.write_text('{"name": "broken", "num_speculative_tokens": 1000000}')
    elif path.name == "notes.json":
        path.write_text("{")
    elif path.name == "outside.txt":
        path.write_text("x")
    elif path.name == "link.json":
        path.symlink_to("drafting-methods.json")
    before = (data_copy / manifest._MANIFEST_NAME).read_text()
    with pytest.raises(ValueError) as err:
        manifest._record_file(path, data_copy)
    assert says in str(err.value) and "\n" not in str(err.value), str(err.value)
    assert (data_copy / manifest._MANIFEST_NAME).read_text() == before


def test_the_command_line_records_one_file_or_says_how(
    data_copy: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    added = data_copy / "profiles" / "mypair.json"
    added.write_text(tiny_profile_named("mypair"))
    monkeypatch.chdir(data_copy.parent)
    assert manifest.main(["--record", "", str(data_copy)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "make manifest FILE=data/profiles/" in err, err
    assert manifest.main(["--record", "data/profiles/mypair.json", str(data_copy)]) == 0
    assert "recorded data/profiles/mypair.json" in capsys.readouterr().out
    assert manifest.check_manifest(data_copy) == {}
    assert manifest.main(["--record", "data/profiles/none.json", str(data_copy)]) == 2
    assert "is not a file" in capsys.readouterr().err


def test_make_manifest_records_the_file_it_is_given() -> None:
    done = subprocess.run(
        ["make", "-n", "manifest", "FILE=data/profiles/my pair.json"],
        cwd=paths.REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "-m kit.manifest --record 'data/profiles/my pair.json'" in done.stdout, done.stdout
