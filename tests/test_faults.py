"""Faults and bad input, tried as an attendee or an instructor would meet them.

- damaged shipped data (weights cut to 1 MB, 100 bytes, 0 bytes; a prompt file cut in half; a
  config that is not JSON) stops at preflight in one line naming the file and the fix, and the
  loaders name the file too;
- a swapped pair is a report, not a raise;
- Ctrl-C during `make run` is reported as an interrupt, exit 130, the last good copy kept.

A kernel or owner killed while its servers start is 04's fault, in its tests/test_server_faults.py.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from helpers.common import paths
from helpers.common.paths import DATA_DIR, REPO_ROOT
from helpers.common.profiles import load_profile
from helpers.common.prompts import load_prompts
from helpers.eagle3.checkpoint import load_drafter
from helpers.engine.pairing import validate_pair
from kit import preflight, runner
from tests.support import needs_shipped, wait_until

#: It runs programs (kit.drop_check leaves it out: not a static check of the tree).
pytestmark = pytest.mark.process


# --------------------------------------------------------------------------- helpers


# --------------------------------------------------------------------------- damaged data


@pytest.fixture(scope="module")
def shipped_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repo's data/ (the tiny pair, prompts, configs) to damage."""
    root = tmp_path_factory.mktemp("repo")
    shutil.copytree(DATA_DIR, root / "data")  # all of it: the manifest names a missing file
    return root


@pytest.fixture
def repo_copy(shipped_copy: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The copy stands in for the repo (paths, restore hints, preflight); each damaged file is
    put back after the test."""
    monkeypatch.setattr(paths, "REPO_ROOT", shipped_copy)
    monkeypatch.setattr(paths, "DATA_DIR", shipped_copy / "data")
    monkeypatch.setattr(preflight, "REPO_ROOT", shipped_copy)
    monkeypatch.setattr(preflight, "DATA_DIR", shipped_copy / "data")
    saved = {p: p.read_bytes() for p in (shipped_copy / "data").rglob("*") if p.is_file()}
    yield shipped_copy
    for path, blob in saved.items():
        if path.read_bytes() != blob:
            path.write_bytes(blob)


def damage(path: Path, keep: int | None = None, half: bool = False) -> None:
    """Cut a file to `keep` bytes, or to half its length."""
    blob = path.read_bytes()
    path.write_bytes(blob[: len(blob) // 2] if half else blob[:keep])


def one_line(result: preflight._PreflightResult, relative: str) -> str:
    """The preflight stopped, in one line naming the file and how to restore it."""
    lines = result.lines()
    assert result.exit_code == 2 and len(lines) == 1, lines
    assert relative in lines[0] and f"`git checkout -- {relative}`" in lines[0], lines[0]
    assert "crashed" not in lines[0] and "Traceback" not in lines[0]
    return lines[0]


@needs_shipped
@pytest.mark.parametrize("keep", [1024**2, 100, 0], ids=["1MB", "100B", "0B"])
@pytest.mark.parametrize("model", ["tiny-qwen3-moe-eagle3", "tiny-qwen3-moe"])
def test_truncated_weights_stop_at_preflight(repo_copy: Path, model: str, keep: int) -> None:
    relative = f"data/{model}/model.safetensors"
    damage(repo_copy / relative, keep=keep)
    line = one_line(preflight.run_preflight(load_profile("tiny"), gpus=[]), relative)
    assert "make tiny-models" in line
    if model.endswith("eagle3"):  # and the loader names it when something slips through
        with pytest.raises(ValueError, match=relative.replace(".", r"\.")):
            load_drafter(repo_copy / "data" / model)


def test_a_prompt_file_cut_in_half_stops_at_preflight(repo_copy: Path) -> None:
    relative = "data/prompts/code.json"
    damage(repo_copy / relative, half=True)
    line = one_line(preflight.run_preflight(load_profile("tiny"), gpus=[]), relative)
    assert "is not valid JSON (JSONDecodeError at line" in line
    with pytest.raises(ValueError, match="code.json is not valid JSON"):
        load_prompts(prompts_dir=repo_copy / "data" / "prompts")


def test_a_config_that_is_not_json_stops_at_preflight(repo_copy: Path) -> None:
    relative = "data/tiny-qwen3-moe-eagle3/config.json"
    damage(repo_copy / relative, half=True)
    one_line(preflight.run_preflight(load_profile("tiny"), gpus=[]), relative)


def test_a_hub_profile_stops_on_damaged_data_before_asking_the_hub(
    repo_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_hub(*args, **kwargs):
        raise AssertionError("the hub was asked")

    monkeypatch.setattr(preflight, "_check_hub", no_hub)
    damage(repo_copy / "data/prompts/prose.json", keep=5)
    one_line(
        preflight.run_preflight(load_profile("qwen3-30b-a3b"), gpus=[]), "data/prompts/prose.json"
    )


# --------------------------------------------------------------------------- bad pairs


def test_a_swapped_pair_is_a_report_and_a_preflight_line(tiny_pair) -> None:
    report = validate_pair(tiny_pair.drafter, tiny_pair.verifier)
    assert report.codes() == ["roles_swapped"] and not report.ok
    profile = load_profile("tiny")
    swapped = type(profile)(
        **{
            **profile.__dict__,
            "verifier": str(tiny_pair.drafter),
            "drafter": str(tiny_pair.verifier),
        }
    )
    result = preflight.run_preflight(swapped, gpus=[])
    assert result.exit_code == 2 and len(result.failures) == 1
    assert result.failures[0].startswith("pairing: roles_swapped: ")


def test_a_mistyped_drafter_key_is_one_preflight_line_naming_file_and_key(tiny_pair) -> None:
    """The probe's crash ("pairing check crashed: TypeError") is now the file, key and types."""
    config = json.loads((tiny_pair.drafter / "config.json").read_text())
    config["eagle_aux_hidden_state_layer_ids"] = ["a", 4, 5]
    (tiny_pair.drafter / "config.json").write_text(json.dumps(config))
    profile = load_profile("tiny")
    mine = type(profile)(
        **{
            **profile.__dict__,
            "verifier": str(tiny_pair.verifier),
            "drafter": str(tiny_pair.drafter),
        }
    )
    result = preflight.run_preflight(mine, gpus=[])
    assert result.exit_code == 2 and len(result.failures) == 1, result.failures
    assert result.failures[0] == (
        f"pairing: config_field_invalid: drafter {tiny_pair.drafter / 'config.json'}: "
        'eagle_aux_hidden_state_layer_ids is ["a", 4, 5] (a list), expected a list of integers '
        'or null: item 0 is "a" (a string)'
    )


# --------------------------------------------------------------------------- interrupts


def test_ctrl_c_during_make_run_is_an_interrupt(tmp_path: Path) -> None:
    """SIGINT to the runner while a cell runs: "interrupted in cell N", exit 130, no later
    notebook, the last good copy and the other notebooks' records kept."""
    nb_dir, build = tmp_path / "notebooks", tmp_path / "build"
    nb_dir.mkdir()
    started = tmp_path / "cell-started"
    cells = [
        "print('before')",
        f"open({str(started)!r}, 'w').write('x')\nimport time\ntime.sleep(120)",
    ]
    first = nb_dir / "01_slow.ipynb"
    nbformat.write(
        new_notebook(cells=[new_markdown_cell("# slow")] + [new_code_cell(c) for c in cells]),
        str(first),
    )
    nbformat.write(
        new_notebook(cells=[new_code_cell("print('second')")]), str(nb_dir / "02_next.ipynb")
    )
    build.mkdir()
    (build / "01_slow.ipynb").write_text("the last good copy")
    (build / "01_slow.html").write_text("the last good copy")
    old = {"notebook": "00_other.ipynb", "ok": True, "status": "ok", "seconds": 3.0}
    (build / runner._SUMMARY_NAME).write_text(json.dumps({"notebooks": [old], "ok": True}))
    argv = [str(p) for p in sorted(nb_dir.glob("*.ipynb"))] + ["--build-dir", str(build)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "kit.runner", *argv],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until(started.exists, 120, "the cell never started")
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    assert "interrupted in cell 3 (SIGINT)" in out and "DeadKernelError" not in out, out
    assert "02_next.ipynb" not in out.split("[run] 1/2")[1], "no notebook after an interrupt"
    assert (build / "01_slow.ipynb").read_text() == "the last good copy"
    assert (build / "01_slow.failed.ipynb").is_file() and (build / "01_slow.failed.html").is_file()
    summary = json.loads((build / runner._SUMMARY_NAME).read_text())
    rows = {r["notebook"]: r for r in summary["notebooks"]}
    assert set(rows) == {"00_other.ipynb", "01_slow.ipynb"} and summary["ok"] is False
    assert rows["01_slow.ipynb"]["status"] == "INTERRUPTED"
    assert rows["01_slow.ipynb"]["error"] == "interrupted in cell 3 (SIGINT)"
