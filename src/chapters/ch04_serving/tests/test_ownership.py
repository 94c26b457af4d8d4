"""chapters.ch04_serving.server's orphan sweep signals only what the workbook started: real foreign
processes behind stale records are left running, real workbook servers (stand-ins started through
VllmServer.start) whose owner died are stopped. No vLLM; seconds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from chapters.ch04_serving import server as srv_mod
from chapters.ch04_serving.server import VllmServer, _free_port
from tests.support import wait_until

#: Seconds a signalled stand-in may take to go on a loaded 2-core machine.
GONE_WITHIN = 10.0


def dead_owner() -> tuple[int, int]:
    """(pid, exact start ticks) of a process that ran and has exited: an owner gone."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    wait_until(lambda: srv_mod._start_ticks(proc.pid) is not None, 30, "no owner started")
    ticks = srv_mod._start_ticks(proc.pid)
    proc.kill()
    proc.wait()
    assert ticks is not None
    return proc.pid, ticks


def write_record(directory: Path, record: dict[str, Any]) -> Path:
    """A record as build/servers/ holds one."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{record['pgid']}.json"
    path.write_text(json.dumps(record))
    return path


def stale_record(pgid: int, **fields: Any) -> dict[str, Any]:
    """A current-format record for group `pgid` whose owner is dead; `fields` override."""
    owner_pid, owner_ticks = dead_owner()
    record = {
        "name": "stale",
        "port": 1,
        "pgid": pgid,
        "server_id": "f" * 32,
        "boot_id": srv_mod._boot_id(),
        "group_started_ticks": srv_mod._start_ticks(pgid),
        "owner_pid": owner_pid,
        "owner_started_ticks": owner_ticks,
        "log": "x.log",
    }
    return record | fields


@pytest.fixture
def foreign() -> Iterator[subprocess.Popen]:
    """A process the workbook never started, leading its own group (what a reused pid finds)."""
    env = {k: v for k, v in os.environ.items() if k != srv_mod._SERVER_ID_ENV}
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True, env=env)
    wait_until(lambda: srv_mod._start_ticks(proc.pid) is not None, 30, "sleep not started")
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def stand_in(tmp_path: Path, name: str, code: str = "pass") -> VllmServer:
    """A server stand-in (http.server answering GET /health) run by `code` first, if any."""
    (tmp_path / "health").write_text("ok")
    port = _free_port()
    serve = (
        f"{code}; import functools, http.server; "
        f"h = functools.partial(http.server.SimpleHTTPRequestHandler, directory={str(tmp_path)!r}); "
        f"http.server.ThreadingHTTPServer(('127.0.0.1', {port}), h).serve_forever()"
    )
    return VllmServer([sys.executable, "-c", serve], port, name, "m")


def orphaned(directory: Path) -> dict[str, Any]:
    """The one record in `directory`, rewritten as if its owner had died (nothing else changed)."""
    [(path, record)] = srv_mod._read_records(directory)
    record["owner_pid"], record["owner_started_ticks"] = dead_owner()
    path.write_text(json.dumps(record))
    return record


# --------------------------------------------------------------------------- foreign: left alone


def test_start_ticks_is_field_22_even_with_parentheses_in_the_name() -> None:
    code = "open('/proc/self/comm', 'w').write('a) b (c'); import time; time.sleep(30)"
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        wait_until(lambda: "(c" in psutil.Process(proc.pid).name(), 30, "comm not renamed")
        ticks = srv_mod._start_ticks(proc.pid)
        assert ticks is not None
        started = psutil.boot_time() + ticks / os.sysconf("SC_CLK_TCK")
        assert abs(started - psutil.Process(proc.pid).create_time()) < 0.02
    finally:
        proc.kill()
        proc.wait()
    assert srv_mod._start_ticks(proc.pid) is None, "a reaped process has no start time"


@pytest.mark.parametrize(
    "stale",
    [
        "wrong start time",  # earlier than the real one: it passed the old lower bound
        "right start time, no marker",
        "right start time, another boot",
        "no marker in the record (older code)",
    ],
)
def test_a_foreign_process_behind_a_stale_record_is_left_running(
    foreign: subprocess.Popen, tmp_path: Path, capsys: pytest.CaptureFixture[str], stale: str
) -> None:
    ticks = srv_mod._start_ticks(foreign.pid)
    assert ticks is not None
    record = {
        "wrong start time": stale_record(foreign.pid, group_started_ticks=ticks - 100),
        "right start time, no marker": stale_record(foreign.pid),
        "right start time, another boot": stale_record(foreign.pid, boot_id="another-boot"),
        "no marker in the record (older code)": {
            "name": "old",
            "port": 1,
            "pgid": foreign.pid,
            "group_started": psutil.Process(foreign.pid).create_time(),
            "owner_pid": dead_owner()[0],
            "owner_started": 0.0,
            "log": "x.log",
        },
    }[stale]
    path = write_record(tmp_path / "servers", record)
    assert srv_mod.sweep_orphans(tmp_path / "servers", grace=1) == []
    time.sleep(0.2)
    assert foreign.poll() is None, f"{stale}: the sweep signalled a process it never started"
    assert not path.exists(), "the stale record is dropped"
    assert f"left process group {foreign.pid}" in capsys.readouterr().err


def test_a_process_with_another_servers_marker_is_left_running(tmp_path: Path) -> None:
    env = {**os.environ, srv_mod._SERVER_ID_ENV: "a" * 32}
    other = subprocess.Popen(["sleep", "60"], start_new_session=True, env=env)
    try:
        wait_until(lambda: srv_mod._server_id_of(other.pid) == "a" * 32, 30, "no marker")
        write_record(tmp_path, stale_record(other.pid, server_id="b" * 32))
        assert srv_mod.sweep_orphans(tmp_path, grace=1) == [] and other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_a_records_group_counts_whole_only_behind_its_proven_leader(tmp_path: Path) -> None:
    """A leader with the token but not the recorded start time proves nothing about the rest of
    its group: only processes carrying the token count then."""
    token = "c" * 32
    pids = tmp_path / "pids"
    command = f"env -u {srv_mod._SERVER_ID_ENV} sleep 60 & echo $! > {pids}; wait"
    env = {**os.environ, srv_mod._SERVER_ID_ENV: token}
    leader = subprocess.Popen(["sh", "-c", command], start_new_session=True, env=env)
    try:
        wait_until(lambda: pids.exists() and pids.read_text().strip(), 30, "no child started")
        child = int(pids.read_text())
        # $! names the forked shell before it execs `env -u`: until then it still carries the token
        comm = Path(f"/proc/{child}/comm")
        wait_until(lambda: comm.read_text().strip() == "sleep", 30, "the child never became sleep")
        record = stale_record(leader.pid, server_id=token)
        assert {p.pid for p in srv_mod._owned_processes(record)} == {leader.pid, child}
        record["group_started_ticks"] -= 1
        assert [p.pid for p in srv_mod._owned_processes(record)] == [leader.pid]
    finally:
        os.killpg(leader.pid, signal.SIGKILL)  # the test's own group
        leader.wait()


def test_an_owner_is_alive_only_at_its_exact_start_time() -> None:
    ticks = srv_mod._start_ticks(os.getpid())
    record = {"owner_pid": os.getpid(), "boot_id": srv_mod._boot_id()}
    assert srv_mod._owner_alive(record | {"owner_started_ticks": ticks})
    assert not srv_mod._owner_alive(record | {"owner_started_ticks": ticks - 1})
    assert not srv_mod._owner_alive(record | {"owner_started_ticks": ticks, "boot_id": "x"})
    assert not srv_mod._owner_alive({"owner_pid": os.getpid(), "owner_started": 0.0})


# --------------------------------------------------------------------------- the workbook's: swept


def test_a_workbook_server_whose_owner_died_is_swept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(srv_mod, "_SERVERS_DIR", tmp_path / "servers")
    server = stand_in(tmp_path, "swept").start(timeout=30, progress=False)
    try:
        [child] = server.group_processes()
        assert srv_mod._server_id_of(child.pid) == server.server_id
        record = orphaned(tmp_path / "servers")
        assert record["server_id"] == server.server_id and srv_mod._leader_is_servers(record)
        stopped = srv_mod.sweep_orphans(grace=5)
        assert len(stopped) == 1 and f"swept (port {server.port}" in stopped[0]
        wait_until(lambda: not server._members(), GONE_WITHIN, "the server's group still runs")
        assert not list((tmp_path / "servers").iterdir())
    finally:
        server.stop()


def test_a_workbook_server_whose_guard_died_too_is_swept_by_its_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leader gone (nothing to prove by start time), the server still carries its token."""
    monkeypatch.setattr(srv_mod, "_SERVERS_DIR", tmp_path / "servers")
    server = stand_in(tmp_path, "leaderless").start(timeout=30, progress=False)
    try:
        [child] = server.group_processes()
        record = orphaned(tmp_path / "servers")
        assert server.process is not None
        server.process.kill()  # the guard
        server.process.wait()
        assert not srv_mod._leader_is_servers(record) and child.is_running()
        assert len(srv_mod.sweep_orphans(grace=5)) == 1
        wait_until(lambda: not child.is_running(), GONE_WITHIN, "the server still runs")
    finally:
        server.stop()


def test_a_renamed_server_process_keeps_its_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM's processes rename themselves (setproctitle), which would overwrite /proc/PID/environ."""
    pytest.importorskip("setproctitle")
    monkeypatch.setattr(srv_mod, "_SERVERS_DIR", tmp_path / "servers")
    code = "import setproctitle; setproctitle.setproctitle('VLLM::EngineCore')"
    server = stand_in(tmp_path, "renamed", code).start(timeout=30, progress=False)
    try:
        [child] = server.group_processes()
        assert child.cmdline()[0].startswith("VLLM::EngineCore")
        assert srv_mod._server_id_of(child.pid) == server.server_id
    finally:
        server.stop()


def test_each_start_gets_a_new_marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(srv_mod, "_SERVERS_DIR", tmp_path / "servers")
    server = stand_in(tmp_path, "restarted")
    tokens = []
    for _ in range(2):
        server.start(timeout=30, progress=False)
        tokens.append(server.server_id)
        server.stop()
    assert len(set(tokens)) == 2 and all(len(t or "") == 32 for t in tokens)


def test_stopping_a_reaped_server_spares_the_group_that_took_its_id(
    foreign: subprocess.Popen, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once its guard is reaped a server's group id is free; stop() must not signal whoever has
    it now (the foreign group stands in for a reused id)."""
    monkeypatch.setattr(srv_mod, "_SERVERS_DIR", tmp_path / "servers")
    server = stand_in(tmp_path, "reaped").start(timeout=30, progress=False)
    server.stop()
    server.pgid = foreign.pid  # what a reused id looks like to the owner
    assert server.group_processes() == [], "a reaped server has no processes in that group"
    t0 = time.monotonic()
    server.stop()
    time.sleep(0.2)
    assert foreign.poll() is None, "stop() signalled a group it no longer owns"
    assert time.monotonic() - t0 < 5.0, "stop() waited on a group it no longer owns"


def test_stopping_a_server_whose_guard_died_still_stops_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(srv_mod, "_SERVERS_DIR", tmp_path / "servers")
    server = stand_in(tmp_path, "guardless").start(timeout=30, progress=False)
    [child] = server.group_processes()
    assert server.process is not None
    server.process.kill()
    server.process.wait()
    server.stop(grace=5)
    assert not srv_mod._live(child) and not server._members()
