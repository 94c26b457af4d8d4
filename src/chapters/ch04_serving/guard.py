"""Run a server command tied to the process that started it: when that owner dies, the server dies.

    python -I -S guard.py --owner PID [--grace S] -- COMMAND...    (server.VllmServer starts it)

The guard leads the server's process group (the server starts it in a new session) and runs
COMMAND as its child in that group. It polls its parent: once the parent is no longer the owner
(killed: SIGKILL, a crash, a kernel shut down before its exit hooks ran), it sends SIGTERM to the
whole group, SIGKILL after `grace` seconds, and so frees the server's ports, memory and GPU. A
Linux parent-death signal would fire when the owner's *thread* ends (servers start from worker
threads, see `server.start_together`), so the guard watches the process instead.

The guard survives the SIGTERM its group gets from `VllmServer.stop` and exits as COMMAND exits,
with its exit status (or its signal), so the owner sees the server's own end. Standard library
only: it runs as `python -I -S` by path, without this package on its path.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

__all__ = [
    "main",
]

#: How often the guard looks at its parent and its child.
_POLL_SECONDS = 0.25
#: Seconds between SIGTERM and SIGKILL when the owner is gone.
_ORPHAN_GRACE = 5.0


def _group_members(pgid: int) -> list[int]:
    """Pids of live (non-zombie) processes in process group `pgid`, read from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp ...
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(entry))
    return found


def _stop_group(child: subprocess.Popen, grace: float = _ORPHAN_GRACE) -> None:
    """SIGTERM this process group (the guard ignores it), wait up to `grace` s for the others to
    end, then SIGKILL the group, the guard included."""
    pgid, me = os.getpgrp(), os.getpid()
    os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        child.poll()  # reap the command, so it does not linger as a zombie member
        if not [pid for pid in _group_members(pgid) if pid != me]:
            break
        time.sleep(0.1)
    os.killpg(pgid, signal.SIGKILL)


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
    """--owner PID, --grace S, --poll S, then the command after `--`."""
    parser = argparse.ArgumentParser(
        prog="guard.py", description=" ".join(__doc__.split("\n\n")[0].split())
    )
    parser.add_argument("--owner", type=int, required=True, help="pid of the owning process")
    parser.add_argument("--grace", type=float, default=_ORPHAN_GRACE)
    parser.add_argument("--poll", type=float, default=_POLL_SECONDS)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser.error("no command after --")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Start the command, then wait for it; stop the whole group if the owner dies first."""
    args = _parse_args(argv)
    if os.getppid() != args.owner:
        return 1  # the owner is already gone: start nothing
    # A Python-level handler (not SIG_IGN, which the command would inherit through exec): the
    # group's SIGTERM stops the command, and the guard waits to report how it ended.
    signal.signal(signal.SIGTERM, lambda *_: None)
    child = subprocess.Popen(args.command)
    while True:
        try:
            return _exit_like(child.wait(timeout=args.poll))
        except subprocess.TimeoutExpired:
            pass
        if os.getppid() != args.owner:
            _stop_group(child, args.grace)


if __name__ == "__main__":
    sys.exit(main())
