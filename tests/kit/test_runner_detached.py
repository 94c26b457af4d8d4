"""kit.runner stops what a notebook detaches: a shell's `&`, a double fork, a new session; by the
kernel's session, or the mark in the environment everything the kernel starts inherits."""

from __future__ import annotations

import os
import time
from pathlib import Path

import nbformat
import psutil
from nbformat.v4 import new_code_cell, new_notebook

from kit import runner


def _gone(pid: int) -> bool:
    """True when `pid` no longer runs (or is a zombie waiting for its parent)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _in_session(pid: int, session: int) -> bool:
    """True when `pid` runs (not a zombie) in session `session`."""
    try:
        return os.getsid(pid) == session and not _gone(pid)
    except OSError:
        return False


def _pids(path: Path) -> int:
    """The pid a cell wrote to `path`, once it is there."""
    for _ in range(50):
        if path.is_file() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.1)
    raise AssertionError(f"no pid in {path}")


def test_detached_processes_are_stopped(tmp_path: Path) -> None:
    amp, fork, setsid = (tmp_path / f"{name}.pid" for name in ("amp", "fork", "setsid"))
    kernel = tmp_path / "kernel.pid"
    cells = [
        f"import os\nopen({str(kernel)!r}, 'w').write(str(os.getpid()))",
        # a shell's background job: the shell exits, the job is reparented, same session. Each job
        # here leaves the kernel's process group: under load jupyter_client's shutdown signals that
        # group (SIGTERM after 2.5 s) and would stop it first, so only the runner can, every run
        "import os, shlex, sys\n"
        "own_group = \"import os; os.setpgid(0, 0); os.execvp('sleep', ['sleep', '300'])\"\n"
        f"os.system(f'{{shlex.quote(sys.executable)}} -c \"{{own_group}}\" & echo $! > {amp}')",
        # a double fork (a daemon's first half: a process group of its own, deaf to SIGINT): the
        # grandchild is reparented, same session
        "import signal\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    if os.fork() == 0:\n"
        "        signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "        os.setpgid(0, 0)\n"
        f"        open({str(fork)!r}, 'w').write(str(os.getpid()))\n"
        "        os.execvp('sleep', ['sleep', '300'])\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)",
        # a new session: neither the kernel's tree nor its session
        f"os.system('setsid sleep 300 > /dev/null 2>&1 & echo $! > {setsid}')",
        # the notebook ends only once each job leads its own group: before that, a loaded machine's
        # shutdown could still reach it through the kernel's group
        "import time\n"
        "def leads_its_group(path, deadline=time.monotonic() + 60):\n"
        "    while time.monotonic() < deadline:\n"
        "        text = open(path).read().strip() if os.path.exists(path) else ''\n"
        "        if text and os.getpgid(int(text)) == int(text):\n"
        "            return\n"
        "        time.sleep(0.05)\n"
        "    raise TimeoutError(path)\n"
        + "\n".join(f"leads_its_group({str(path)!r})" for path in (amp, fork, setsid)),
    ]
    nbformat.write(new_notebook(cells=[new_code_cell(src) for src in cells]), tmp_path / "d.ipynb")
    result = runner._run_notebook(tmp_path / "d.ipynb", build_dir=tmp_path / "build", timeout=120)
    pids = {name: _pids(path) for name, path in (("&", amp), ("fork", fork), ("setsid", setsid))}
    try:
        assert result.ok, result.error
        assert {name: _gone(pid) for name, pid in pids.items()} == dict.fromkeys(pids, True)
        for pid in pids.values():
            assert f"sleep (pid {pid})" in result.leftovers, result.leftovers
        session = _pids(kernel)  # the kernel leads its own session
        left = [p.pid for p in psutil.process_iter() if _in_session(p.pid, session)]
        assert left == [], f"still in the kernel's session: {left}"
    finally:
        for pid in pids.values():
            if not _gone(pid):
                psutil.Process(pid).kill()
