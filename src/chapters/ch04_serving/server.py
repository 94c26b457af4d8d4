"""`vllm serve` with or without EAGLE-3 (notebook 04): the command, and a server process (its own
session, loopback, log in build/logs/) that dies with its owner: a guard (`guard.py`) leads its
group, exit and SIGTERM stop it, and `sweep_orphans` stops a dead owner's server, signalling only
processes proven its own (its random token SERVER_ID_ENV, or its leader's boot and start time)."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import psutil
import requests

from chapters.ch04_serving import guard
from helpers.common.envinfo import has_gpu
from helpers.common.notebook import at_terminate
from helpers.common.paths import BUILD_DIR, LOGS_DIR, REPO_ROOT, build_path, local_dir
from helpers.common.profiles import Profile, resolve_k
from helpers.common.vllm_names import PER_REQUEST
from helpers.engine import compat
from helpers.engine.lifecycle import (
    ENGINE_ENV,
    IN_PROCESS_ENV,
    engine_kwargs,
    journal_start,
    speculative_config,
)

__all__ = [
    "shell_text",
    "serve_command_text",
    "launch_command",
    "entry_point_name",
    "helper_processes",
    "open_ports",
    "sweep_orphans",
    "make_server",
    "start_together",
    "running_servers",
    "stop_all",
    "feature_label",
]

_HOST = "127.0.0.1"
_MODULE_ENTRY = "vllm.entrypoints.openai.api_server"
#: Env marker of every process a server starts (children inherit it): owner pid + server name.
_OWNER_ENV = "EAGLE3_WORKBOOK_SERVER_OWNER"
#: Env marker proving a process one server's: a random token per start, also in its record.
_SERVER_ID_ENV = "EAGLE3_WORKBOOK_SERVER_ID"
#: Keeps /proc/PID/environ (the markers) readable after vLLM's processes set their titles.
_KEEP_ENVIRON = {"SPT_NOENV": "1"}
#: Changes at every boot: a start time counted in ticks since boot means nothing across one.
_BOOT_ID_FILE = Path("/proc/sys/kernel/random/boot_id")
#: Seconds to wait for /health: a first GPU start compiles (214 s for the 30B shape on an H200).
_START_TIMEOUT = 900.0
_STOP_GRACE = 15.0
#: What vLLM logs once per process when its GPU worker runs Model Runner V2 (gpu_worker.py).
_V2_LOG_LINE = "Using V2 Model Runner"
#: SIGTERM to SIGKILL when the kernel is terminated (Jupyter's SIGKILL comes 2.5 s after SIGTERM).
_TERMINATE_GRACE = 1.5
_GUARD_FILE: Path = Path(guard.__file__)
#: One record per running server: its process group, name, port and owner.
_SERVERS_DIR: Path = BUILD_DIR / "servers"
_PROGRESS_EVERY = 5.0
_LOG_TAIL_LINES = 20
#: Local addresses whose listener a connection to 127.0.0.1 can reach (IPv4 and dual-stack).
_REACHES_LOOPBACK = frozenset({"127.0.0.1", "0.0.0.0", "::", "::ffff:127.0.0.1", "::ffff:0.0.0.0"})
#: vLLM's log when a process ended by SIGKILL (the OOM killer's): "(exit code: -9)", "': -9}".
_KILLED_LINE = re.compile(r"exit code:? -9\b|': -9\b")
#: ... and when one died, whatever its code (which it may log before it has one).
_DIED_LINE = re.compile(r"died unexpectedly|exited unexpectedly|died with exit code")
#: The kernel's count of processes its OOM killer has killed since boot (any cgroup's).
_VMSTAT = Path("/proc/vmstat")
#: What a server's log says when its port was taken (its bind failed), and the fix for a taken port.
_PORT_TAKEN_LINE = "Address already in use"
_OWN_PORT = "give each server its own port, or pass port=None to pick a free one"

_running: list[VllmServer] = []
#: Held while a server checks its port and registers in _running (two starts of one process).
_launch_lock = threading.Lock()
_started_pgids: set[int] = set()
_started_ports: set[int] = set()


def _serve_command(
    profile: Profile,
    k: int | None = None,
    port: int | None = None,
    short_form: bool = False,
    extra: Sequence[str] = (),
    spec_extra: dict[str, Any] | None = None,
) -> list[str]:
    """argv of `vllm serve …` for a profile (k as `resolve_k` reads it; short form: the drafter)."""
    k = resolve_k(profile, k)
    tp = str(profile.engine.get("tensor_parallel_size", 1))
    if short_form:
        if not k:
            raise ValueError(
                "short form serves the drafter, so it is always speculative: use k=None or k>0, "
                "or the long form with k=0 for plain decoding"
            )
        argv = ["vllm", "serve", profile.drafter, "-tp", tp]
        if k != profile.num_speculative_tokens:
            argv += ["--speculative-config", json.dumps({"num_speculative_tokens": k})]
    else:
        argv = ["vllm", "serve", profile.verifier, "-tp", tp]
        if k:
            config = {**speculative_config(profile.drafter, k), **(spec_extra or {})}
            argv += ["--speculative-config", json.dumps(config)]
    if profile.tokenizer is not None:  # a shape profile: Qwen3's tokenizer, built by make venv
        argv += ["--tokenizer", profile.tokenizer]
    if port is not None:
        argv += ["--port", str(port)]
    return argv + list(extra)


def shell_text(argv: Sequence[str]) -> str:
    """argv as one copy-pasteable shell line (JSON single-quoted)."""
    return shlex.join(argv)


def serve_command_text(profile: Profile, **kwargs: Any) -> str:
    """`serve_command(profile, **kwargs)` as a copy-pasteable shell line."""
    return shell_text(_serve_command(profile, **kwargs))


def _flag(name: str, value: Any) -> list[str]:
    """One engine argument as CLI flags (True: the bare flag; a dict as JSON)."""
    flag = "--" + name.replace("_", "-")
    if value is True:
        return [flag]
    if value is False or value is None:
        return []
    return [flag, json.dumps(value) if isinstance(value, dict) else str(value)]


def _engine_flags(profile: Profile, gpu: bool | None = None, **overrides: Any) -> list[str]:
    """CLI flags for an in-process engine's plain arguments and `overrides`."""
    args = {**engine_kwargs(profile, k=0, gpu=gpu), **overrides}
    for name in ("model", "tokenizer", "tensor_parallel_size"):
        args.pop(name, None)
    return [part for name, value in args.items() for part in _flag(name, value)]


def _per_request_flags() -> tuple[list[str], list[str]]:
    """The per-request acceptance flag where this vLLM has it, else none and a line on the loss."""
    if compat.supports(PER_REQUEST.arg):
        return _flag(PER_REQUEST.arg, PER_REQUEST.summary), []
    lost = compat.FEATURES[PER_REQUEST.arg].lost
    return [], [f"this vLLM has no {PER_REQUEST.arg}: {lost}"]


def feature_label(name: str) -> str:
    """One line: a vLLM feature, the versions with and without it, and what is lost without it."""
    f = compat.FEATURES[name]
    return f"{name}: in {', '.join(f.has)}; not in {', '.join(f.lacks)}; without it: {f.lost}"


def launch_command(
    profile: Profile,
    k: int | None = None,
    port: int = 8000,
    gpu: bool | None = None,
    spec_extra: dict[str, Any] | None = None,
    **engine: Any,
) -> list[str]:
    """The `vllm serve …` launched: engine flags, host, model name, per-request flag."""
    if profile.is_local:  # fail in one line here rather than as a hub lookup inside the server
        for local_path in (profile.verifier_path, profile.drafter_path, profile.tokenizer_path):
            local_path()
    k = resolve_k(profile, k)
    per_request = _per_request_flags()[0] if k else []
    extra = ["--host", _HOST, *_engine_flags(profile, gpu, **engine), *per_request]
    extra += ["--served-model-name", _model_name(profile)]
    return _serve_command(profile, k=k, port=port, extra=extra, spec_extra=spec_extra)


def _model_name(profile: Profile) -> str:
    """The readable `--served-model-name` for a profile: the verifier's last path part."""
    return profile.verifier.rstrip("/").split("/")[-1]


@lru_cache(maxsize=1)
def _console_script_works() -> bool:
    """True when `vllm --version` runs (not without a `vllm` distribution: compat's vllm_cli)."""
    exe = _console_script()
    if exe is None or not compat.supports("vllm_cli"):  # else the script dies at once
        return False
    try:
        done = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _uses_console_script(asked: bool | None) -> bool:
    """`asked`, or where None whether the console script works here."""
    return _console_script_works() if asked is None else asked


def _console_script() -> str | None:
    """The `vllm` script next to this interpreter, else on PATH."""
    local = Path(sys.executable).parent / "vllm"
    return str(local) if local.is_file() else shutil.which("vllm")


def _entry_point_argv(argv: Sequence[str], use_console_script: bool | None = None) -> list[str]:
    """Translate `vllm serve MODEL …` into the console script, or the module form with `--model`."""
    argv = list(argv)
    if argv[:2] != ["vllm", "serve"] or len(argv) < 3:
        raise ValueError(f"expected `vllm serve MODEL …`, got {shell_text(argv)!r}")
    if _uses_console_script(use_console_script):
        return [_console_script() or "vllm", *argv[1:]]
    return [sys.executable, "-m", _MODULE_ENTRY, "--model", argv[2], *argv[3:]]


def entry_point_name(use_console_script: bool | None = None) -> str:
    """A one-line description of the entry point in use."""
    if _uses_console_script(use_console_script):
        return "`vllm serve` (the console script works)"
    return f"`python -m {_MODULE_ENTRY} --model …` (the `vllm` console script does not start here)"


def _port_in_use(port: int, host: str = _HOST) -> bool:
    """True when something accepts TCP connections on host:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def _listeners(port: int) -> list[int | None]:
    """Pids listening on TCP `port` reachable at 127.0.0.1 (None: another user's process)."""
    return [
        conn.pid
        for conn in psutil.net_connections(kind="tcp")
        if conn.status == psutil.CONN_LISTEN
        and conn.laddr
        and conn.laddr.port == port
        and conn.laddr.ip in _REACHES_LOOPBACK
    ]


def _describe(pid: int | None) -> str:
    """A listener in a few words: a server of this process by name, else its pid and command."""
    if pid is None:
        return "a process of another user"
    for srv in _running:
        if srv.pgid is not None and pid in {p.pid for p in srv._members()}:
            return f"server {srv.name!r} (pid {pid}, started here)"
    try:
        command = " ".join(" ".join(psutil.Process(pid).cmdline()).split())[:80]  # one line
    except psutil.Error:
        command = "?"
    return f"pid {pid} ({command})"


def _free_port(host: str = _HOST) -> int:
    """A TCP port nothing listens on right now (picked by the OS on 127.0.0.1)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _oom_kills() -> int | None:
    """How many processes the OOM killer has killed since boot (None where the kernel won't say)."""
    try:
        text = _VMSTAT.read_text(encoding="ascii")
    except OSError:
        return None
    found = re.search(r"^oom_kill (\d+)$", text, re.MULTILINE)
    return int(found[1]) if found else None


def _log_line(pattern: re.Pattern[str], text: str) -> str | None:
    """A log's first line matching `pattern`, without vLLM's prefix, at most 160 chars (or None)."""
    found = pattern.search(text)
    if found is None:
        return None
    start, end = text.rfind("\n", 0, found.start()) + 1, text.find("\n", found.end())
    return text[start : len(text) if end < 0 else end].split("] ", 1)[-1].strip()[:160]


def _live(proc: psutil.Process) -> bool:
    """True for a running (non-zombie) process."""
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def _group_processes(pgid: int) -> list[psutil.Process]:
    """Live processes of one process group."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pgid and _live(proc):
                found.append(proc)
        except (psutil.NoSuchProcess, ProcessLookupError, OSError):
            continue
    return found


def helper_processes(owner_pid: int | None = None) -> list[psutil.Process]:
    """Live processes started by this module: in a group it created, or carrying its marker."""
    prefix = f"{owner_pid or os.getpid()}:"
    found: dict[int, psutil.Process] = {}
    for proc in psutil.process_iter(["pid"]):
        try:
            mine = os.getpgid(proc.pid) in _started_pgids
            mine = mine or proc.environ().get(_OWNER_ENV, "").startswith(prefix)
            if mine and _live(proc):
                found[proc.pid] = proc
        except (psutil.Error, OSError):  # gone, or not ours to read
            continue
    return list(found.values())


def open_ports() -> list[int]:
    """Ports of servers started by this module that still accept connections."""
    return [port for port in sorted(_started_ports) if _port_in_use(port)]


def _guarded_argv(argv: Sequence[str], owner: int | None = None) -> list[str]:
    """argv under the guard that stops the server once `owner` (default: this process) is gone."""
    owner = os.getpid() if owner is None else owner
    return [sys.executable, "-I", "-S", str(_GUARD_FILE), "--owner", str(owner), "--", *argv]


def _is_model_folder(arg: str) -> bool:
    """True when a command-line argument names a local model folder."""
    try:
        folder = local_dir(arg)
        return folder is not None and (folder / "config.json").is_file()
    except OSError:
        return False


def _boot_id() -> str | None:
    """This boot's id (None where /proc does not give it)."""
    try:
        return _BOOT_ID_FILE.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def _start_ticks(pid: int) -> int | None:
    """A live process's exact start time: /proc/PID/stat field 22, clock ticks since boot."""
    fields = guard.stat_fields(pid)
    return None if fields is None else int(fields[19])


def _server_id_of(pid: int) -> str | None:
    """The SERVER_ID_ENV value in /proc/PID/environ (None when absent or unreadable)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    prefix = f"{_SERVER_ID_ENV}=".encode()
    found = next((entry for entry in environ.split(b"\0") if entry.startswith(prefix)), None)
    return None if found is None else found[len(prefix) :].decode(errors="replace")


def _write_record(server: VllmServer, directory: Path | None = None) -> Path:
    """Record a started server (group, token, start times, boot, name, port) for a later sweep."""
    directory = _SERVERS_DIR if directory is None else directory
    directory.mkdir(parents=True, exist_ok=True)
    assert server.pgid is not None and server.server_id, "record a server after it started"
    pgid, me = server.pgid, os.getpid()
    record = {"name": server.name, "port": server.port, "pgid": pgid, "server_id": server.server_id}
    record |= {"boot_id": _boot_id(), "group_started_ticks": _start_ticks(pgid), "owner_pid": me}
    record |= {"owner_started_ticks": _start_ticks(me), "log": str(server.log_path)}
    path = directory / f"{server.pgid}.json"
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return path


def _read_records(directory: Path | None = None) -> list[tuple[Path, dict[str, Any]]]:
    """(path, record) of every server record; unreadable ones are deleted (nothing to act on)."""
    directory = _SERVERS_DIR if directory is None else directory
    found = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            int(record["pgid"]), int(record["owner_pid"])
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)
            continue
        found.append((path, record))
    return found


def _same_boot(record: dict[str, Any]) -> bool:
    """True when the record was written since this machine last booted."""
    boot = _boot_id()
    return boot is not None and record.get("boot_id") == boot


def _owner_alive(record: dict[str, Any]) -> bool:
    """True while the recorded server's owner runs (same boot, pid and exact start time)."""
    ticks = record.get("owner_started_ticks")
    alive = ticks is not None and _same_boot(record)
    return alive and _start_ticks(int(record["owner_pid"])) == ticks


def _leader_is_servers(record: dict[str, Any]) -> bool:
    """True when the group's leader is the server's guard: same boot, start time, session, token."""
    pgid = int(record["pgid"])
    fields = guard.stat_fields(pgid)
    return (
        fields is not None
        and _same_boot(record)
        and int(fields[19]) == record.get("group_started_ticks")
        and int(fields[2]) == pgid == int(fields[3])
        and _server_id_of(pgid) == record["server_id"]
    )


def _owned_processes(record: dict[str, Any]) -> list[psutil.Process]:
    """Processes proven the record's: its group under a proven leader, else those with its token."""
    if not record.get("server_id") or not _same_boot(record):
        return []
    members = _group_processes(int(record["pgid"]))  # identities taken before the proof
    if _leader_is_servers(record):
        return members
    return [p for p in members if _server_id_of(p.pid) == record["server_id"]]


def _send(proc: psutil.Process, sig: int) -> None:
    """Send sig to proc while it is the very process proven the server's (same start time)."""
    with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
        if proc.is_running():
            proc.send_signal(sig)


def _end_processes(procs: Sequence[psutil.Process], grace: float) -> None:
    """SIGTERM `procs`, SIGKILL what is left after `grace` seconds, wait for them to go."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for proc in procs:
            _send(proc, sig)
        _, procs = psutil.wait_procs(procs, timeout=wait)
        if not procs:
            return


def _left_alone(record: dict[str, Any]) -> str:
    """The line for a recorded group that still runs but is not provably the server's."""
    name, pgid = record.get("name", "?"), record["pgid"]
    if not record.get("server_id"):
        return (
            f"left process group {pgid} ({name}) running: its record predates ownership markers; "
            f"if it is a leftover server of yours, stop it with `kill -TERM -{pgid}`"
        )
    return f"left process group {pgid} running: it is not server {name}'s (its pid was reused)"


def sweep_orphans(directory: Path | None = None, grace: float = 5.0) -> list[str]:
    """Stop each recorded server whose owner died (only processes proven its); one line each."""
    stopped = []
    for path, record in _read_records(directory):
        if _owner_alive(record):
            continue
        owned = _owned_processes(record)
        if owned:
            _end_processes(owned, grace)
            name, port, log = (record.get(key, "?") for key in ("name", "port", "log"))
            gone = f"pgid {record['pgid']}, owner pid {record['owner_pid']} gone"
            stopped.append(f"{name} (port {port}, {gone}; log {log})")
        elif _group_processes(int(record["pgid"])):
            print(f"[sweep] {_left_alone(record)}", file=sys.stderr, flush=True)
        path.unlink(missing_ok=True)
    return stopped


class VllmServer:
    """One vLLM OpenAI-compatible server subprocess (see make_server)."""

    def __init__(
        self,
        argv: Sequence[str],
        port: int,
        name: str,
        model: str,
        env: dict[str, str] | None = None,
    ) -> None:
        self.argv = list(argv)
        self.port = port
        self.name = name
        self.model = model
        self.env = env or {}
        self.log_path = LOGS_DIR / f"{name}.log"
        self.process: subprocess.Popen | None = None  # the guard, which runs the server
        self.pgid: int | None = None
        self.record: Path | None = None
        self.server_id: str | None = None  # SERVER_ID_ENV's token, new at each start
        self.startup_seconds: float | None = None
        self.stopped = False  # True once stop() (or stop_all) ended it: not a death to report
        self.oom_kills_at_start: int | None = None  # the kernel's count when it started

    @property
    def base_url(self) -> str:
        """http://127.0.0.1:PORT (no trailing slash)."""
        return f"http://{_HOST}:{self.port}"

    @property
    def alive(self) -> bool:
        """True while the server's main process runs."""
        return self.process is not None and self.process.poll() is None

    def start(self, timeout: float = _START_TIMEOUT, progress: bool = True) -> VllmServer:
        """Start the server; return once GET /health answers 200 (else raise with the log)."""
        if self.alive:
            return self
        self._check_port()  # before its log is emptied; again right before launch
        build_path("logs", f"{self.name}.log")
        # Local model folders never need the hub; hub models keep the caller's setting.
        local = any(_is_model_folder(arg) for arg in self.argv if not arg.startswith("-"))
        offline = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"} if local else {}
        # A server's engine core runs in a process of its own; on a CPU its model runs inside it
        # (IN_PROCESS_ENV=0, else vllm/platforms/cpu.py spawns a worker process), as on one GPU.
        inherited = {k: v for k, v in os.environ.items() if k != IN_PROCESS_ENV}
        inherited |= {} if has_gpu() else {IN_PROCESS_ENV: "0"}
        quiet = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
        # vLLM's default logging, at INFO, into the server's own log (its SpecDecoding lines).
        logging = {"VLLM_LOGGING_CONFIG_PATH": "", "VLLM_LOGGING_LEVEL": "INFO", **_KEEP_ENVIRON}
        self.server_id = secrets.token_hex(16)  # a fresh token for this start, kept in its record
        marks = {_OWNER_ENV: f"{os.getpid()}:{self.name}", _SERVER_ID_ENV: self.server_id}
        env = {**ENGINE_ENV, **inherited, **offline, **quiet, **logging, **self.env, **marks}
        t0 = time.perf_counter()
        with self.log_path.open("w", encoding="utf-8") as log:
            print(f"$ {shell_text(self.argv)}", file=log, flush=True)
            self._launch(env, log)
        self.record = _write_record(self)
        try:
            self._wait_healthy(t0, timeout, progress)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.perf_counter() - t0
        runner = ("V2" if _V2_LOG_LINE in self._log_text() else "V1") if has_gpu() else None
        model = self.argv[2] if len(self.argv) > 2 else None
        seconds = round(self.startup_seconds, 2)
        record = {"engine": f"server {self.name}", "model": model, "seconds": seconds}
        journal_start(record | {"model_runner": runner})
        return self

    def _launch(self, env: dict[str, str], log: Any) -> None:
        """Start the guard (a new session) that runs the server; port checked under a lock."""
        with _launch_lock:
            self._check_port()
            oom_kills = _oom_kills()
            # The guard leads the new session and runs the server as its child (see guard.py).
            io = {"stdout": log, "stderr": subprocess.STDOUT, "stdin": subprocess.DEVNULL}
            self.process = subprocess.Popen(
                _guarded_argv(self.argv), cwd=REPO_ROOT, env=env, start_new_session=True, **io
            )
            self.pgid = self.process.pid  # a new session: the leader's pid is the group id
            self.stopped, self.oom_kills_at_start = False, oom_kills
            _started_pgids.add(self.pgid)
            _started_ports.add(self.port)
            if self not in _running:
                _running.append(self)

    def _check_port(self) -> None:
        """Raise in one line when another server of this process, or anything, holds the port."""
        holder = next((s for s in _running if s.port == self.port and s.alive), None)
        if holder is not None and holder is not self:
            taken = f"port {self.port} is already server {holder.name!r}'s (started here)"
            raise RuntimeError(f"{taken}: {_OWN_PORT}")
        if _port_in_use(self.port):
            taken = f"port {self.port} on {_HOST} is already in use: stop what holds it"
            raise RuntimeError(f"{taken}, or pass port=None to pick a free one")

    def _wait_healthy(self, t0: float, timeout: float, progress: bool) -> None:
        """Poll /health until 200; raise on early exit or timeout; print progress at times."""
        next_note = _PROGRESS_EVERY
        while True:
            elapsed = time.perf_counter() - t0
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(self._exit_message(elapsed))
            if self._health_answers():  # from this server, or from whatever took its port
                listening = _listeners(self.port)
                strangers = self._strangers(listening)
                if strangers:
                    raise RuntimeError(
                        f"port {self.port} is answered by {_describe(strangers[0])}, not by server "
                        f"{self.name!r}: another start took the port while this one started; "
                        f"{_OWN_PORT}"
                    )
                if listening:
                    if progress:
                        print(f"[{self.name}] healthy at {self.base_url} after {elapsed:.1f} s")
                    return
            if elapsed > timeout:
                raise TimeoutError(
                    f"vLLM server {self.name!r} not healthy after {timeout:.0f} s; "
                    f"last lines of {self.log_path}:\n{self._tail()}"
                )
            if progress and elapsed >= next_note:
                print(f"[{self.name}] starting… {elapsed:.0f} s (log: {self._where()})")
                next_note += _PROGRESS_EVERY
            time.sleep(0.5)

    def _exit_message(self, elapsed: float) -> str:
        """Why the server ended while starting: port taken, killed, else code and log tail."""
        assert self.process is not None and self.process.returncode is not None
        if _PORT_TAKEN_LINE in self._log_text():
            return (
                f"vLLM server {self.name!r} could not listen on port {self.port}: another "
                f"process took it while this one started (log {self._where()}); {_OWN_PORT}"
            )
        killed = self._killed()
        if killed is not None:
            return f"vLLM server {self.name!r} ended after {elapsed:.0f} s: {killed}"
        return (
            f"vLLM server {self.name!r} exited with code {self.process.returncode} after "
            f"{elapsed:.0f} s; last lines of {self.log_path}:\n{self._tail()}"
        )

    def _log_text(self) -> str:
        """The server's log ('' before it has one)."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def _tail(self) -> str:
        """The last lines of the server's log."""
        return "\n".join(self._log_text().splitlines()[-_LOG_TAIL_LINES:])

    def _where(self) -> str:
        """The log's path, relative to the repository where it is inside it."""
        path = self.log_path
        return str(path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path)

    def _oom_killed_since_start(self) -> bool:
        """True when the kernel's out-of-memory killer has killed a process since this start."""
        now, then = _oom_kills(), self.oom_kills_at_start
        return now is not None and then is not None and now > then

    def _killed(self) -> str | None:
        """One line when a process was killed, memory the likely cause; else None."""
        if self.process is None or self.stopped:
            return None
        log, code = self._log_text(), self.process.poll()
        killed, died = _log_line(_KILLED_LINE, log), _log_line(_DIED_LINE, log)
        oom, sigkill = self._oom_killed_since_start(), True
        if killed is not None:
            what = killed
        elif code in (-signal.SIGKILL, 128 + signal.SIGKILL):
            what = f"its main process: exit code {code}"
        elif died is not None and oom:
            what, sigkill = died, False
        else:
            return None
        rose = " (the kernel's OOM kill count rose since it started)" if oom else ""
        cause = "was killed by SIGKILL, most likely by" if sigkill else "died while"
        cause = f"{cause} the out-of-memory killer{'' if sigkill else ' ran'}{rose}"
        return (
            f"{what!r}: a process of server {self.name!r} {cause}; free memory (stop other "
            f"kernels or servers) or give it a smaller KV cache (kv_cache_memory_bytes); "
            f"log {self._where()}"
        )

    def failure(self) -> str | None:
        """What broke this server in one line (killed, died, exited); None while it serves."""
        killed = self._killed()
        if killed is not None or self.process is None or self.stopped:
            return killed
        died, code = _log_line(_DIED_LINE, self._log_text()), self.process.poll()
        if died is not None:
            return f"{died!r}: a process of server {self.name!r} died; log {self._where()}"
        if code is not None:
            return f"server {self.name!r} exited with code {code}; log {self._where()}"
        return None

    def _strangers(self, listening: Sequence[int | None]) -> list[int | None]:
        """Listeners on the port that are neither this start's group members nor carry its token."""
        mine = {p.pid for p in self._members()}
        return [
            pid
            for pid in listening
            if pid is None or (pid not in mine and _server_id_of(pid) != self.server_id)
        ]

    def _health_answers(self) -> bool:
        """True when GET /health on the server's port answers 200 (whoever listens there)."""
        try:
            return requests.get(f"{self.base_url}/health", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    def healthy(self) -> bool:
        """True when /health answers 200 and only this server's own processes listen on its port."""
        if not self._health_answers():
            return False
        listening = _listeners(self.port)
        return bool(listening) and not self._strangers(listening)

    def group_processes(self) -> list[psutil.Process]:
        """Live processes of this server: its group without the guard (empty once stopped)."""
        return [p for p in self._members() if p.pid != self.pgid]

    def _members(self) -> list[psutil.Process]:
        """Live processes of the group, guard included; once it is reaped, those with the token."""
        if self.pgid is None:
            return []
        members = _group_processes(self.pgid)
        if self._guard_unreaped():
            return members
        return [p for p in members if _server_id_of(p.pid) == self.server_id]

    def _guard_unreaped(self) -> bool:
        """True while the guard runs or is a zombie (its pid, the group id, still this server's)."""
        return self.process is not None and self.process.poll() is None

    def _running_still(self) -> bool:
        """True while the guard runs or any process of the group lives."""
        return self.process is not None and (self.process.poll() is None or bool(self._members()))

    def _signal_group(self, sig: int) -> None:
        """Signal the whole group while the guard is unreaped, else only members with the token."""
        if self.pgid is None:
            return
        if self._guard_unreaped():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, sig)
            return
        for proc in self._members():
            _send(proc, sig)

    def _finish(self) -> None:
        """After the group's last signal: reap the guard, wait for the group to go, forget it."""
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)
        deadline = time.perf_counter() + 5
        while self._members() and time.perf_counter() < deadline:
            time.sleep(0.1)
        if self.record is not None and not self._members():
            self.record.unlink(missing_ok=True)
        with contextlib.suppress(ValueError):  # a start thread may have stopped it just now
            _running.remove(self)

    def stop(self, grace: float = _STOP_GRACE) -> None:
        """SIGTERM the process group, SIGKILL it after `grace` seconds, and reap the guard."""
        _stop_servers([self], grace)

    def __repr__(self) -> str:
        failure, state = self.failure(), "running" if self.alive else "stopped"
        if failure is not None:
            state = f"{'running' if self.alive else 'ended'}: {failure}"
        return f"VllmServer({self.name!r}, {self.base_url}, model={self.model!r}, {state})"


def make_server(
    profile: Profile,
    k: int | None = None,
    name: str | None = None,
    port: int | None = None,
    env: dict[str, str] | None = None,
    **launch: Any,
) -> VllmServer:
    """A (not yet started) server for a profile: speculative unless k=0; port=None: a free one."""
    k = resolve_k(profile, k)
    name = name or ("spec" if k else "plain")
    port = _free_port() if port is None else port
    argv = launch_command(profile, k=k, port=port, **launch)  # gpu, spec_extra, engine flags
    for line in _per_request_flags()[1] if k else []:
        print(f"make_server {name}: {line}")
    return VllmServer(_entry_point_argv(argv), port, name, _model_name(profile), env=env)


def start_together(
    servers: Sequence[VllmServer], timeout: float = _START_TIMEOUT, progress: bool = True
) -> None:
    """Start servers at once, return when all are healthy; on a failure or interrupt stop all."""
    from concurrent.futures import ThreadPoolExecutor, wait

    pool = ThreadPoolExecutor(max_workers=len(servers), thread_name_prefix="start")
    futures = [pool.submit(srv.start, timeout, progress) for srv in servers]
    try:
        wait(futures)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        while not all(f.done() for f in futures):  # a start thread sees its server gone and ends
            _stop_servers(servers, _TERMINATE_GRACE)
            wait(futures, timeout=0.5)
        _stop_servers(servers, _TERMINATE_GRACE)
        raise
    finally:
        pool.shutdown(wait=True)
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        for srv in servers:
            srv.stop()
        raise errors[0]


def failure_note(url: str) -> str:
    """What broke this process's server at `url` (else its log); '' for a URL none serves."""
    for srv in reversed(_running):
        if url == srv.base_url or url.startswith(f"{srv.base_url}/"):
            return srv.failure() or f"server {srv.name!r}'s log: {srv._where()}"
    return ""


def running_servers() -> list[VllmServer]:
    """Servers started by this module and not yet stopped."""
    return list(_running)


def _stop_servers(servers: Sequence[VllmServer], grace: float) -> None:
    """SIGTERM every server's group at once, SIGKILL those still running after `grace` seconds."""
    started = [srv for srv in servers if srv.process is not None]
    for srv in started:
        srv.stopped = True
        srv._signal_group(signal.SIGTERM)
    deadline = time.perf_counter() + grace
    while time.perf_counter() < deadline and any(srv._running_still() for srv in started):
        time.sleep(0.1)
    for srv in started:
        if srv._running_still():
            srv._signal_group(signal.SIGKILL)
    for srv in started:
        srv._finish()


def stop_all(grace: float = _STOP_GRACE) -> None:
    """Stop every server this module started, all at once (at exit, and on SIGTERM)."""
    _stop_servers(list(_running), grace)


atexit.register(stop_all)
at_terminate(lambda: stop_all(_TERMINATE_GRACE))
