"""helpers.common.notebook: setup_notebook sets what it prints and never overrides the user; a
HOME that cannot be written gets the caches moved under build/."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.common import envinfo, notebook
from helpers.common.notebook import _MAX_CPU_THREADS, _NOTEBOOK_ENV, cache_env, setup_notebook


@pytest.fixture(autouse=True)
def _keep_sigterm() -> Iterator[None]:
    """setup_notebook installs a SIGTERM handler: give pytest its own back afterwards."""
    from helpers.common import notebook

    before, previous = signal.getsignal(signal.SIGTERM), notebook._previous_sigterm
    yield
    signal.signal(signal.SIGTERM, before)
    notebook._previous_sigterm = previous


def _unset_what_it_sets(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Unset what setup_notebook sets (and `names`), recorded so the test leaves the environment
    as it found it."""
    for name in [*_NOTEBOOK_ENV, "VLLM_LOGGING_CONFIG_PATH", *names]:
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


def test_sets_prints_and_keeps_user_values(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _unset_what_it_sets(monkeypatch, "OMP_NUM_THREADS", "NUMBA_NUM_THREADS")
    monkeypatch.setenv("VLLM_LOGGING_LEVEL", "DEBUG")
    applied = setup_notebook()
    assert applied["VLLM_LOGGING_LEVEL"] == "DEBUG"  # the user's choice wins
    assert applied["PYTHONWARNINGS"] == _NOTEBOOK_ENV["PYTHONWARNINGS"]
    assert 1 <= int(applied["OMP_NUM_THREADS"]) <= _MAX_CPU_THREADS  # bounded on a many-core box
    printed = capsys.readouterr().out
    assert all(f"{k}={v}" in printed for k, v in applied.items())


@pytest.mark.parametrize("cores, threads", [(1, 1), (3, min(3, _MAX_CPU_THREADS)), (256, None)])
def test_torch_threads_follow_envinfos_core_count(
    monkeypatch: pytest.MonkeyPatch, cores: int, threads: int | None
) -> None:
    monkeypatch.setattr(envinfo, "cpu_cores", lambda: cores)
    _unset_what_it_sets(monkeypatch, "OMP_NUM_THREADS", "NUMBA_NUM_THREADS")
    applied = setup_notebook(verbose=False)
    assert int(applied["OMP_NUM_THREADS"]) == (threads or _MAX_CPU_THREADS)
    assert applied["NUMBA_NUM_THREADS"] == applied["OMP_NUM_THREADS"]  # numba's default follows


def test_a_users_thread_counts_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    _unset_what_it_sets(monkeypatch)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("NUMBA_NUM_THREADS", "2")
    applied = setup_notebook(verbose=False)
    assert (applied["OMP_NUM_THREADS"], applied["NUMBA_NUM_THREADS"]) == ("3", "2")


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
    assert config == notebook._vllm_logging_config()
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


# --------------------------------------------------------------------------- SIGTERM


def run_owner(code: str, tmp_path: Path) -> subprocess.Popen:
    """A Python process running `code` (which writes tmp_path/ready when it is set up)."""
    return subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path)


def wait_for(path: Path, proc: subprocess.Popen, within: float = 60) -> None:
    """Wait until `path` exists (fail if `proc` ends first or it takes too long)."""
    deadline = time.monotonic() + within
    while not path.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.returncode
        time.sleep(0.05)


def test_sigterm_runs_the_hooks_then_ends_the_process_as_before(tmp_path: Path) -> None:
    code = (
        "import time\n"
        "from helpers.common import notebook\n"
        "notebook.at_terminate(lambda: open('first', 'w').write('x'))\n"
        "notebook.at_terminate(lambda: open('second', 'w').write(str(__import__('os').path.exists('first'))))\n"
        "notebook.setup_notebook(verbose=False)\n"
        "notebook.setup_notebook(verbose=False)  # twice: still one handler, chained once\n"
        "open('ready', 'w').write('x')\n"
        "time.sleep(60)\n"
    )
    owner = run_owner(code, tmp_path)
    wait_for(tmp_path / "ready", owner)
    owner.send_signal(signal.SIGTERM)
    assert owner.wait(timeout=30) == -signal.SIGTERM, "the default action still ends it"
    assert (tmp_path / "first").exists() and (tmp_path / "second").read_text() == "False", (
        "last registered runs first"
    )


def test_sigterm_chains_to_the_handler_it_replaced(tmp_path: Path) -> None:
    code = (
        "import signal, sys, time\n"
        "from helpers.common import notebook\n"
        "signal.signal(signal.SIGTERM, lambda *_: (open('previous', 'w').write('x'), sys.exit(5)))\n"
        "notebook.at_terminate(lambda: open('hook', 'w').write('x'))\n"
        "notebook._handle_sigterm()\n"
        "open('ready', 'w').write('x')\n"
        "time.sleep(60)\n"
    )
    owner = run_owner(code, tmp_path)
    wait_for(tmp_path / "ready", owner)
    owner.send_signal(signal.SIGTERM)
    assert owner.wait(timeout=30) == 5
    assert (tmp_path / "hook").exists() and (tmp_path / "previous").exists()


def test_a_hook_that_fails_does_not_stop_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    from helpers.common import notebook

    ran = []
    monkeypatch.setattr(notebook, "_terminate_hooks", [lambda: ran.append("a"), lambda: 1 / 0])
    monkeypatch.setattr(notebook, "_previous_sigterm", signal.SIG_IGN)
    notebook._on_sigterm(signal.SIGTERM, None)  # SIG_IGN before: nothing else happens
    assert ran == ["a"]


def test_handle_sigterm_needs_the_main_thread() -> None:
    import threading

    from helpers.common import notebook

    results = []
    thread = threading.Thread(target=lambda: results.append(notebook._handle_sigterm()))
    thread.start()
    thread.join()
    assert results == [False]


#: A HOME no process can write, root included: a path under a file.
_NO_HOME = "/dev/null/nohome"


def test_a_writable_home_moves_no_cache(tmp_path: Path) -> None:
    assert cache_env({"HOME": str(tmp_path)}, cache_dir=tmp_path / "cache") == {}


def test_an_unwritable_home_moves_the_caches_and_keeps_the_users(tmp_path: Path) -> None:
    env = {"HOME": _NO_HOME, "TRITON_CACHE_DIR": "/mine/triton"}
    moved = cache_env(env, cache_dir=tmp_path)
    assert moved["VLLM_CACHE_ROOT"] == str(tmp_path / "vllm")
    assert moved["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "torchinductor")
    assert moved["XDG_CACHE_HOME"] == str(tmp_path)
    assert "TRITON_CACHE_DIR" not in moved  # the user's choice wins
    assert moved["HF_HOME"] == f"{_NO_HOME}/.cache/huggingface"  # the hub cache is not moved


def test_setup_notebook_gives_vllm_a_cache_it_can_write(tmp_path: Path) -> None:
    # vLLM's model registry writes VLLM_CACHE_ROOT/modelinfos: with HOME unwritable, notebooks 02
    # and 04 printed "Error saving model info cache ... NotADirectoryError" in their outputs.
    script = (
        "from pathlib import Path\n"
        "from helpers.common import notebook\n"
        f"notebook._CACHE_DIR = Path({str(tmp_path)!r})\n"
        "notebook.setup_notebook(verbose=False)\n"
        "import vllm.envs\n"
        "Path(vllm.envs.VLLM_CACHE_ROOT, 'modelinfos').mkdir(parents=True)\n"
        "import matplotlib\n"
        "print(vllm.envs.VLLM_CACHE_ROOT, matplotlib.get_configdir())\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in notebook._CACHE_VARS}
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**env, "HOME": _NO_HOME, "VLLM_LOGGING_CONFIG_PATH": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(tmp_path / "vllm"), str(tmp_path / "matplotlib")]
    assert "mkdir -p failed" not in done.stderr, done.stderr
