"""chapters.ch04_serving.guard: a command tied to its owner, run the way VllmServer runs it (by path,
`python -I -S`, in a new session), with stand-in commands and owners (no vLLM; seconds)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from chapters.ch04_serving import guard
from chapters.ch04_serving.server import _GUARD_FILE, _group_processes, _guarded_argv

#: Seconds a group may take to go once its owner is gone: the guard's poll + SIGTERM (a sleeping
#: stand-in ends at once), with room for a loaded 2-core machine.
GONE_WITHIN = 10.0


def wait_gone(pgid: int, within: float = GONE_WITHIN) -> float:
    """Seconds until process group `pgid` has no live process (fails the test after `within`)."""
    t0 = time.monotonic()
    while _group_processes(pgid):
        assert time.monotonic() - t0 < within, f"group {pgid} still runs: {_group_processes(pgid)}"
        time.sleep(0.1)
    return time.monotonic() - t0


def session_processes(sid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes of session `sid`, whatever their process group."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getsid(proc.pid) == sid and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def guarded(argv: list[str], **kwargs) -> subprocess.Popen:
    """The guard running argv for this process, in its own session."""
    return subprocess.Popen(_guarded_argv(argv), start_new_session=True, **kwargs)


def test_the_guard_needs_only_the_standard_library() -> None:
    imports = [
        line.split()[1].split(".")[0]
        for line in _GUARD_FILE.read_text().splitlines()
        if line.startswith(("import ", "from "))
    ]
    assert set(imports) <= set(sys.stdlib_module_names) | {"__future__"}, imports


@pytest.mark.parametrize(
    ("code", "expected"),
    [("raise SystemExit(3)", 3), ("pass", 0), ("import os; os.kill(os.getpid(), 9)", -9)],
)
def test_the_guard_exits_as_its_command_does(code: str, expected: int) -> None:
    done = guarded([sys.executable, "-c", code])
    assert done.wait(timeout=60) == expected


def test_the_guard_outlives_the_groups_sigterm_until_its_command_ends(tmp_path: Path) -> None:
    flag = tmp_path / "got-term"
    code = (
        "import signal, sys, time\n"
        "def bye(*_):\n"
        f"    time.sleep(0.5); open({str(flag)!r}, 'w').write('x'); sys.exit(7)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        f"open({str(tmp_path / 'ready')!r}, 'w').write('x')\n"
        "time.sleep(60)\n"
    )
    proc = guarded([sys.executable, "-c", code])
    deadline = time.monotonic() + 30
    while not (tmp_path / "ready").exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGTERM)  # what VllmServer.stop sends
    assert proc.wait(timeout=30) == 7 and flag.exists(), "the guard waited and kept the status"


def test_the_guard_starts_nothing_for_an_owner_that_is_not_its_parent(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    argv = _guarded_argv([sys.executable, "-c", f"open({str(marker)!r}, 'w')"], owner=1)
    assert subprocess.run(argv, timeout=60).returncode == 1 and not marker.exists()


def test_an_owner_killed_takes_the_whole_group_with_it(tmp_path: Path) -> None:
    """The owner (a plain Python process) starts a guarded command that leaves a grandchild in
    the group, and is SIGKILLed: the guard stops the group, grandchild included."""
    pids = tmp_path / "pids"
    command = ["sh", "-c", f"sleep 120 & echo $$ $! > {pids}; wait"]
    owner_code = (
        "import subprocess, sys, time\n"
        "from chapters.ch04_serving.server import _guarded_argv\n"
        f"p = subprocess.Popen(_guarded_argv({command!r}), start_new_session=True)\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", owner_code], stdout=subprocess.PIPE, text=True)
    try:
        pgid = int(owner.stdout.readline())
        deadline = time.monotonic() + 30
        while not pids.exists() or len(pids.read_text().split()) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert len(_group_processes(pgid)) == 3  # guard, sh, sleep
    finally:
        owner.kill()
        owner.wait()
    wait_gone(pgid)


def written(path: Path) -> bool:
    """True once a file holds a whole line (a shell's `echo … > file` is done)."""
    return path.exists() and path.read_text(encoding="utf-8").endswith("\n")


def test_a_command_that_dies_takes_its_whole_session_with_it(tmp_path: Path) -> None:
    """The server (the guard's command) SIGKILLed or crashed: what it started (vLLM's EngineCore,
    Worker and resource tracker; here a sleep in its group and one in a group of its own) goes
    too, and the guard still ends as its command did."""
    pids = tmp_path / "pids"
    own_group = f"{sys.executable} -c 'import os, time; os.setpgid(0, 0); time.sleep(120)'"
    command = ["sh", "-c", f"sleep 120 & {own_group} & echo $$ > {pids}; wait"]
    proc = guarded(command)
    try:
        deadline = time.monotonic() + 30
        # guard, sh, sleep, python; and the shell has written its pid (after starting both)
        while len(session_processes(proc.pid)) < 4 or not written(pids):
            assert time.monotonic() < deadline and proc.poll() is None, session_processes(proc.pid)
            time.sleep(0.05)
        os.kill(int(pids.read_text()), signal.SIGKILL)  # the server's main process dies
        assert proc.wait(timeout=30) == -signal.SIGKILL, "the guard ends as its command did"
        deadline = time.monotonic() + GONE_WITHIN
        while session_processes(proc.pid):
            assert time.monotonic() < deadline, f"left running: {session_processes(proc.pid)}"
            time.sleep(0.1)
    finally:
        for left in session_processes(proc.pid):
            left.kill()


@pytest.mark.parametrize("field", [guard._GROUP, guard._SESSION])
def test_members_reads_proc(field: int) -> None:
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert guard._members(proc.pid, field) == [proc.pid]
        assert os.getpid() not in guard._members(proc.pid, field)
    finally:
        proc.kill()
        proc.wait()
    assert guard._members(proc.pid, field) == []


def test_a_guard_outside_a_session_of_its_own_answers_for_no_one_else() -> None:
    """Run without a new session or group (not as VllmServer runs it), the guard must never take
    its owner's session or group for its own."""
    code = (
        "import os, sys; sys.path.insert(0, sys.argv[1]); import guard; "
        "assert os.getsid(0) != os.getpid() != os.getpgrp(); print(guard._others())"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(_GUARD_FILE.parent)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == "[]", done.stderr


def test_parse_args_needs_a_command() -> None:
    with pytest.raises(SystemExit):
        guard._parse_args(["--owner", "1", "--"])
    args = guard._parse_args(["--owner", "5", "--grace", "2", "--", "echo", "--x"])
    assert args.owner == 5 and args.grace == 2.0 and args.command == ["echo", "--x"]
