"""scripts/browser_test.py: the pure parts (ports, prompts, error outputs, one-line failures, process
trees, the Lab command); no browser, no JupyterLab. `make browser-test` runs the whole thing."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from helpers.common.paths import REPO_ROOT
from tests.support import load_script

SCRIPT = REPO_ROOT / "scripts" / "browser_test.py"


bt = load_script("browser_test")


def test_one_line_is_one_line_with_stage_and_hint() -> None:
    line = bt.one_line("lab", "JupyterLab exited\n  with code 1:\tboom", "see lab.log")
    assert line == "browser-test: FAILED lab: JupyterLab exited with code 1: boom (see lab.log)"
    assert "\n" not in bt.one_line("x", "a\n" * 500)
    assert len(bt.one_line("x", "a " * 500, limit=50)) < 90


def test_stage_error_line_and_exit_codes() -> None:
    err = bt.StageError("browser", "cannot install Chromium: apt-get: E: no network")
    assert err.line().startswith("browser-test: FAILED browser: cannot install Chromium")
    assert "apt-get install chromium" in err.line()  # the hint says what to do
    assert err.exit_code == bt.EXIT_CODES["browser"] != 0
    assert bt.StageError("unknown-stage", "x").exit_code == 1
    assert len(set(bt.EXIT_CODES.values())) == len(bt.EXIT_CODES)
    assert 0 not in bt.EXIT_CODES.values()


def test_free_port_is_bindable_on_loopback() -> None:
    port = bt.free_port()
    assert 1024 <= port <= 65535
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((bt.HOST, port))


def test_find_browser_prefers_the_override_then_path_order() -> None:
    on_path = {"chromium-browser": "/usr/bin/chromium-browser", "google-chrome": "/opt/chrome"}
    assert bt.find_browser({}, on_path.get) == "/usr/bin/chromium-browser"
    assert bt.find_browser({bt.BROWSER_ENV_VAR: "/my/chrome"}, on_path.get) == "/my/chrome"
    assert bt.find_browser({}, lambda name: None) is None


def test_ensure_browser_fails_in_one_line_without_install(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(bt, "find_browser", lambda env: None)
    with pytest.raises(bt.StageError) as info:
        bt.ensure_browser(tmp_path / "install.log", None, allow_install=False)
    assert info.value.stage == "browser"
    with pytest.raises(bt.StageError, match="does not exist"):
        bt.ensure_browser(tmp_path / "install.log", str(tmp_path / "no-chrome"), True)


def test_last_line() -> None:
    assert bt.last_line("a\nb\n\n  \n") == "b"
    assert bt.last_line("") == ""


TRACEBACK = """---------------------------------------------------------------------------
ValueError                                Traceback (most recent call last)
Cell In[3], line 1
----> 1 raise ValueError("bad prompt")

ValueError: bad prompt"""


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        ([TRACEBACK], ["ValueError: bad prompt"]),
        (["/x.py:3: UserWarning: tokenizer Error-prone option\n  warnings.warn(msg)"], []),
        (["FutureWarning: something\n"], []),
        (
            ["helpers.common.profiles.ProfileError: no profile 'x'"],
            ["helpers.common.profiles.ProfileError: no profile 'x'"],
        ),
        (
            ["Traceback (most recent call last):\n  File x\nKeyboardInterrupt"],
            ["KeyboardInterrupt"],
        ),
        (["Traceback (most recent call last):\n  File x\nsome odd end"], ["some odd end"]),
        (["ok", TRACEBACK, "warning"], ["ValueError: bad prompt"]),
    ],
)
def test_error_lines_find_errors_not_warnings(texts: list[str], expected: list[str]) -> None:
    assert bt.error_lines(texts) == expected


@pytest.mark.parametrize(
    ("prompt", "state"),
    [("[12]:", "done"), ("[ 3]:", "done"), ("[*]:", "running"), ("[ ]:", "idle"), ("", "idle")],
)
def test_prompt_state(prompt: str, state: str) -> None:
    assert bt.prompt_state(prompt) == state


def test_run_finished_needs_a_run_no_queue_and_an_idle_kernel() -> None:
    assert bt.run_finished(["[1]:", "[2]:"], "idle")
    assert bt.run_finished(["[1]:", "[ ]:"], "idle")  # an error stopped Run All: finished
    assert not bt.run_finished(["[ ]:", "[ ]:"], "idle")  # Run All has not started yet
    assert not bt.run_finished(["[1]:", "[*]:"], "idle")
    assert not bt.run_finished(["[1]:", "[2]:"], "busy")


def test_slider_key_moves_away_from_the_end() -> None:
    assert bt.slider_key(0.5, 0.0, 1.0) == "ArrowRight"
    assert bt.slider_key(1.0, 0.0, 1.0) == "ArrowLeft"
    assert bt.slider_key(0.0, 0.0, 1.0) == "ArrowRight"
    assert bt.slider_key(3.0, 3.0, 3.0) == ""


def test_lab_command_is_make_lab_headless_on_loopback(tmp_path: Path) -> None:
    cmd = bt.lab_command("/venv/bin/python", 8891, "tok", tmp_path, as_root=True)
    assert cmd[:5] == ["/venv/bin/python", "-m", "jupyter", "lab", "--no-browser"]
    assert "--ServerApp.ip=127.0.0.1" in cmd and "--ServerApp.port=8891" in cmd
    assert "--ServerApp.port_retries=0" in cmd and "--IdentityProvider.token=tok" in cmd
    assert f"--ServerApp.root_dir={tmp_path}" in cmd and cmd[-1] == "--allow-root"
    assert "--allow-root" not in bt.lab_command("py", 1, "t", tmp_path, as_root=False)


def test_lab_env_isolates_settings_and_puts_the_venv_first(tmp_path: Path) -> None:
    env = bt.lab_env({"PATH": "/usr/bin", "JUPYTER_TOKEN": "x"}, tmp_path, Path("/venv/bin"))
    assert env["PATH"] == f"/venv/bin{os.pathsep}/usr/bin"
    assert env["JUPYTERLAB_SETTINGS_DIR"] == str(tmp_path / "settings")
    assert "JUPYTER_TOKEN" not in env
    tracker = bt.LAB_SETTINGS["@jupyterlab/notebook-extension/tracker"]
    assert tracker["windowingMode"] == "none"  # every cell in the DOM, the explorer included
    assert bt.LAB_SETTINGS["@jupyterlab/docmanager-extension/plugin"] == {"autosave": False}


def test_notebook_url_quotes_the_name() -> None:
    url = bt.notebook_url(8888, "01 a.ipynb", "abc")
    assert url == "http://127.0.0.1:8888/lab/tree/01%20a.ipynb?token=abc"


def test_parse_proc_stat_with_spaces_and_parens_in_the_name() -> None:
    assert bt.parse_proc_stat("42 (python3) S 7 42 42 0") == (42, 7, "S")
    assert bt.parse_proc_stat("99 (Web Content (x)) Z 1 99 99 0") == (99, 1, "Z")
    assert bt.parse_proc_stat(Path(f"/proc/{os.getpid()}/stat").read_text())[0] == os.getpid()


def test_descendants_walks_the_whole_tree() -> None:
    table = {10: 1, 11: 10, 12: 10, 13: 11, 14: 13, 20: 1}
    assert bt.descendants(10, table) == [11, 12, 13, 14]
    assert bt.descendants(20, table) == []


def test_failure_reason_picks_the_error_line() -> None:
    playwright = "Downloading…\nError: Failed to download Chrome, caused by\nError: Download failure\n    at onexit (node:internal)\n"
    assert bt.failure_reason(playwright) == "Error: Failed to download Chrome, caused by"
    apt = "Reading package lists...\nE: Unable to locate package chromium\n"
    assert bt.failure_reason(apt) == "E: Unable to locate package chromium"
    assert bt.failure_reason(
        "ERROR: No matching distribution found for playwright==9\n"
    ).startswith("ERROR:")
    assert bt.failure_reason("one\ntwo\n") == "two"
