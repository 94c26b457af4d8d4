"""Run a server command tied to its owner: `python -I -S guard.py --owner PID -- COMMAND...`.

It leads the server's session and polls its parent (a parent-death signal would fire with the
owner's thread); once the owner is gone, or COMMAND ends, it stops the rest of the session (SIGTERM,
then SIGKILL) and exits as COMMAND did. Standard library only: it runs by path.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

__all__ = ["main"]

#: How often the guard looks at its parent and its child.
_POLL_SECONDS = 0.25
#: Seconds between SIGTERM and SIGKILL when the owner is gone or the command has ended.
_ORPHAN_GRACE = 5.0
#: Seconds of SIGKILL after that for what is still there.
_KILL_WAIT = 5.0
#: Fields of /proc/PID/stat, counted from the state (the field after the command's name).
_GROUP, _SESSION = 2, 3


def stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat from field 3 (state) on, for a live (non-zombie) process; else None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp session
    return fields if len(fields) > 19 and fields[0] != "Z" else None


def _members(scope: int, field: int) -> list[int]:
    """Live (non-zombie) pids whose /proc/PID/stat `field` (2: group, 3: session) is `scope`."""
    found = []
    for pid in (int(entry) for entry in os.listdir("/proc") if entry.isdigit()):
        fields = stat_fields(pid)
        if fields is not None and int(fields[field]) == scope:
            found.append(pid)
    return found


def _others() -> list[int]:
    """The other live processes of the session (or group) the guard leads; none if it leads none."""
    me = os.getpid()
    if os.getsid(0) == me:
        return [pid for pid in _members(me, _SESSION) if pid != me]
    if os.getpgrp() == me:
        return [pid for pid in _members(me, _GROUP) if pid != me]
    return []


def _signal_all(pids: list[int], sig: int) -> None:
    """Send sig to each pid still there."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _stop_others(child: subprocess.Popen, grace: float = _ORPHAN_GRACE) -> None:
    """SIGTERM the guard's other session processes, SIGKILL those left after `grace` s."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, _KILL_WAIT)):
        child.poll()  # reap the command, so it does not linger as a zombie member
        others = _others()
        if not others:
            return
        _signal_all(others, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            child.poll()
            others = _others()
            if not others:
                return
            if sig == signal.SIGKILL:  # one forked meanwhile: kill it too
                _signal_all(others, sig)
            time.sleep(0.1)


def _exit_like(code: int) -> int:
    """Exit with the child's status: its code, or the signal that ended it."""
    if code < 0:
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # these two have no handler to reset
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        time.sleep(1)  # the signal ends this process; 128 + N only if it did not
        return 128 - code
    return code


def _parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """--owner PID, --grace S, then the command after `--`."""
    parser = argparse.ArgumentParser(prog="guard.py", description=__doc__.splitlines()[0])
    parser.add_argument("--owner", type=int, required=True, help="pid of the owning process")
    parser.add_argument("--grace", type=float, default=_ORPHAN_GRACE)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser.error("no command after --")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; stop its session once the owner is gone or it ends; exit as it did."""
    args = _parse_args(argv)
    if os.getppid() != args.owner:
        return 1  # the owner is already gone: start nothing
    # A Python handler (SIG_IGN would pass to the command): SIGTERM stops the command, not us.
    signal.signal(signal.SIGTERM, lambda *_: None)
    child = subprocess.Popen(args.command)
    while True:
        try:
            code = child.wait(timeout=_POLL_SECONDS)
        except subprocess.TimeoutExpired:
            if os.getppid() != args.owner:
                _stop_others(child, args.grace)
                child.kill()  # in case it left the session
            continue
        _stop_others(child, args.grace)
        return _exit_like(code)


if __name__ == "__main__":
    sys.exit(main())
