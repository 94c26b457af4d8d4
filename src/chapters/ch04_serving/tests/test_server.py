"""helpers.server and helpers.serving_bench: serve commands, the server's lifecycle, and a live tiny-pair server.

Tests marked `vllm` start real vLLM servers (two starts in this file: one module-scoped long-form
server, one short-form server); the others run in well under a second.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import requests

from chapters.ch04_serving import server as srv_mod
from chapters.ch04_serving.clients import (
    answer_text,
    chat,
    scrape_spec_counters,
    served_models,
    stream_chat,
)
from chapters.ch04_serving.server import (
    _MODULE_ENTRY,
    VllmServer,
    _engine_flags,
    _entry_point_argv,
    _free_port,
    _port_in_use,
    _serve_command,
    launch_command,
    make_server,
    serve_command_text,
    stop_all,
)
from helpers.common.paths import REPO_ROOT
from helpers.common.profiles import load_profile
from helpers.engine import compat, lifecycle
from helpers.engine.lifecycle import IN_PROCESS_ENV
from tests.support import needs_shipped, notebook_defs, tiny_pair_present, wait_until

DOCUMENTS_COMMAND = (
    "vllm serve Qwen/Qwen3-30B-A3B-Instruct-2507 -tp 1 --speculative-config "
    '\'{"model": "RedHatAI/Qwen3-30B-A3B-Instruct-2507-speculator.eagle3", "num_speculative_tokens": 3, '
    '"method": "eagle3"}\''
)
MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {
        "role": "user",
        "content": "Convert to JSON: name Ada Moreno, age 41, city Porto, job pilot, pet owl.",
    },
]


# ---------------------------------------------------------------- commands (no server)


def test_documents_command_from_the_qwen_profile() -> None:
    profile = load_profile("qwen3-30b-a3b")
    assert profile.engine["tensor_parallel_size"] == 1  # `-tp 1` comes from here
    assert _serve_command(profile) == shlex.split(DOCUMENTS_COMMAND)
    assert serve_command_text(profile) == DOCUMENTS_COMMAND


def test_tiny_long_form() -> None:
    argv = _serve_command(load_profile("tiny"))
    assert argv[:5] == ["vllm", "serve", "data/tiny-qwen3-moe", "-tp", "1"]
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == {
        "model": "data/tiny-qwen3-moe-eagle3",
        "num_speculative_tokens": 3,
        "method": "eagle3",
    }


def test_k_zero_is_plain_and_k_overrides() -> None:
    tiny = load_profile("tiny")
    assert "--speculative-config" not in _serve_command(tiny, k=0)
    argv = _serve_command(tiny, k=5, port=8123, extra=["--seed", "0"])
    assert json.loads(argv[argv.index("--speculative-config") + 1])["num_speculative_tokens"] == 5
    assert argv[-4:] == ["--port", "8123", "--seed", "0"]


def test_short_form_hub_profile() -> None:
    assert (
        serve_command_text(load_profile("qwen3-30b-a3b"), short_form=True)
        == "vllm serve RedHatAI/Qwen3-30B-A3B-Instruct-2507-speculator.eagle3 -tp 1"
    )
    argv = _serve_command(load_profile("qwen3-30b-a3b"), k=5, short_form=True)
    assert json.loads(argv[-1]) == {"num_speculative_tokens": 5}
    with pytest.raises(ValueError, match="always speculative"):
        _serve_command(load_profile("qwen3-30b-a3b"), k=0, short_form=True)


@needs_shipped
def test_short_form_tiny_overrides_only_a_k_other_than_the_profiles() -> None:
    tiny = load_profile("tiny")
    assert _serve_command(tiny, short_form=True) == [
        "vllm",
        "serve",
        "data/tiny-qwen3-moe-eagle3",
        "-tp",
        "1",
    ]
    argv = _serve_command(tiny, k=2, short_form=True)
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == {"num_speculative_tokens": 2}


def test_cpu_engine_flags() -> None:
    flags = " ".join(_engine_flags(load_profile("tiny"), gpu=False))
    assert (
        flags
        == "--seed 0 --dtype float32 --enforce-eager --kv-cache-memory-bytes 536870912 --max-model-len 1024"
    )
    assert "--enforce-eager" not in _engine_flags(load_profile("qwen3-30b-a3b"), gpu=True)


def test_gpu_tiny_flags_pass_the_compilation_config_as_json() -> None:
    flags = _engine_flags(load_profile("tiny"), gpu=True)
    assert "--enforce-eager" not in flags
    graphs = json.loads(flags[flags.index("--compilation-config") + 1])
    assert graphs == lifecycle.SMALL_GPU_GRAPHS["compilation_config"]


@pytest.mark.usefixtures("qwen3_built")
def test_shape_profile_serves_random_weights_with_qwens_tokenizer() -> None:
    shape = load_profile("qwen3-30b-a3b-shape")
    flags = " ".join(_engine_flags(shape, gpu=True))
    assert "--load-format dummy" in flags and "--dtype auto" in flags
    assert "--kv-cache-memory-bytes 2147483648" in flags and "--enforce-eager" not in flags
    # The verifier folder has config.json only; the tokenizer is Qwen3's, built by make venv.
    assert not (Path(shape.verifier_path()) / "tokenizer.json").exists()
    argv = launch_command(shape, k=3, gpu=True)
    assert argv[2] == "data/shapes/qwen3-30b-a3b"
    assert argv[argv.index("--tokenizer") + 1] == "build/qwen3-tokenizer-151936"
    missing = dataclasses.replace(shape, tokenizer="build/nowhere")
    with pytest.raises(FileNotFoundError, match="is not built: `make venv` builds it"):
        launch_command(missing, k=3, gpu=True)


def test_per_request_flag_where_this_vllm_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    tiny = load_profile("tiny")
    flag = "--per-request-spec-decode-metrics"
    monkeypatch.setitem(compat._PROBES, "per_request_spec_decode_metrics", lambda: True)
    assert srv_mod._per_request_flags() == ([flag, "summary"], [])
    spec = launch_command(tiny, k=3, gpu=False)
    assert spec[spec.index(flag) + 1] == "summary"
    assert flag not in launch_command(tiny, k=0, gpu=False)  # a plain server has nothing to record
    monkeypatch.setitem(compat._PROBES, "per_request_spec_decode_metrics", lambda: False)
    flags, lines = srv_mod._per_request_flags()
    assert flags == [] and lines == [
        "this vLLM has no per_request_spec_decode_metrics: no per-request acceptance, so no intervals"
    ]
    assert flag not in launch_command(tiny, k=3, gpu=False)


def test_every_feature_label_names_its_versions_and_its_cost() -> None:
    for name, feature in compat.FEATURES.items():
        line = srv_mod.feature_label(name)
        assert line.startswith(f"{name}: in ") and feature.lost in line
        assert all(v in line for v in (*feature.has, *feature.lacks))


def test_spec_extra_and_engine_overrides_reach_the_command() -> None:
    tiny = load_profile("tiny")
    argv = launch_command(
        tiny, k=3, gpu=False, spec_extra={"disable_eagle_block_drop": True}, kv_cache_memory_bytes=7
    )
    config = json.loads(argv[argv.index("--speculative-config") + 1])
    assert config["disable_eagle_block_drop"] is True and config["num_speculative_tokens"] == 3
    assert argv[argv.index("--kv-cache-memory-bytes") + 1] == "7"  # the override, not 512 MiB
    assert argv.count("--kv-cache-memory-bytes") == 1


def test_entry_point_translation() -> None:
    argv = ["vllm", "serve", "data/tiny-qwen3-moe", "-tp", "1", "--port", "9"]
    module = _entry_point_argv(argv, use_console_script=False)
    assert module == [
        sys.executable,
        "-m",
        _MODULE_ENTRY,
        "--model",
        "data/tiny-qwen3-moe",
        "-tp",
        "1",
        "--port",
        "9",
    ]
    script = _entry_point_argv(argv, use_console_script=True)
    assert Path(script[0]).name == "vllm" and script[1:] == argv[1:]
    with pytest.raises(ValueError, match="vllm serve MODEL"):
        _entry_point_argv(["python", "x.py"])


# ---------------------------------------------------------------- lifecycle with stand-in processes (no vLLM)


@pytest.fixture
def listening_port() -> Iterator[int]:
    """A port something listens on for the test's duration."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_free_port_and_port_in_use(listening_port: int) -> None:
    assert _port_in_use(listening_port)
    assert not _port_in_use(_free_port())


def test_busy_port_gives_a_one_line_error(listening_port: int) -> None:
    server = VllmServer(["false"], listening_port, "busy-port-test", "m")
    with pytest.raises(
        RuntimeError, match=f"port {listening_port} on 127.0.0.1 is already in use"
    ) as err:
        server.start()
    assert "\n" not in str(err.value) and server.process is None


def test_early_death_raises_with_the_log_tail() -> None:
    argv = [sys.executable, "-c", "print('model folder missing, say so'); raise SystemExit(3)"]
    server = VllmServer(argv, _free_port(), "early-death-test", "m")
    with pytest.raises(RuntimeError, match="exited with code 3") as err:
        server.start(timeout=30, progress=False)
    assert "model folder missing, say so" in str(err.value)
    assert server.log_path == REPO_ROOT / "build" / "logs" / "early-death-test.log"


def test_timeout_kills_the_whole_group() -> None:
    argv = ["sh", "-c", "sleep 60 & sleep 60"]  # never healthy; leaves a child in the group
    server = VllmServer(argv, _free_port(), "timeout-test", "m")
    with pytest.raises(TimeoutError, match="not healthy after 2 s"):
        server.start(timeout=2, progress=False)
    assert server.group_processes() == [] and not server.alive


def test_start_stop_and_atexit_hook_with_a_stand_in_server(tmp_path: Path) -> None:
    (tmp_path / "health").write_text("ok")  # http.server answers GET /health with 200
    port = _free_port()
    argv = [
        sys.executable,
        "-m",
        "http.server",
        str(port),
        "--bind",
        "127.0.0.1",
        "--directory",
        str(tmp_path),
    ]
    server = VllmServer(argv, port, "stand-in-test", "m").start(timeout=30, progress=False)
    assert server.healthy() and server in srv_mod.running_servers() and server.group_processes()
    stop_all()  # what atexit runs
    assert (
        server.group_processes() == []
        and not _port_in_use(port)
        and server not in srv_mod.running_servers()
    )


def stand_in(tmp_path: Path, name: str) -> VllmServer:
    """A server stand-in: http.server answering GET /health from tmp_path."""
    (tmp_path / "health").write_text("ok")
    port = _free_port()
    argv = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    return VllmServer([*argv, "--directory", str(tmp_path)], port, name, "m")


def test_start_together_starts_all_or_stops_all(tmp_path: Path) -> None:
    pair = [stand_in(tmp_path, "together-a"), stand_in(tmp_path, "together-b")]
    srv_mod.start_together(pair, timeout=30, progress=False)
    try:
        assert all(s.healthy() for s in pair)
    finally:
        stop_all()
    dying = VllmServer(
        [sys.executable, "-c", "raise SystemExit(4)"], _free_port(), "together-x", "m"
    )
    alive = stand_in(tmp_path, "together-c")
    with pytest.raises(RuntimeError, match="exited with code 4"):
        srv_mod.start_together([alive, dying], timeout=30, progress=False)
    assert not alive.alive and alive.group_processes() == [] and not _port_in_use(alive.port)


def test_an_interrupt_while_starting_together_stops_them_all() -> None:
    """Ctrl-C (a kernel interrupt) while two servers start: both groups end before it goes on."""
    import threading

    never = [
        VllmServer([sys.executable, "-c", "import time; time.sleep(120)"], _free_port(), n, "m")
        for n in ("interrupted-a", "interrupted-b")
    ]
    main = threading.main_thread().ident

    def interrupt() -> None:
        deadline = time.monotonic() + 30
        while not all(s.group_processes() for s in never) and time.monotonic() < deadline:
            time.sleep(0.05)
        signal.pthread_kill(main, signal.SIGINT)

    # A kernel turns SIGINT into KeyboardInterrupt; an earlier test in this process may have left
    # another handler installed (in a full `make test` run this test once waited out its 120 s).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            srv_mod.start_together(never, timeout=120, progress=False)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert all(s._members() == [] and s not in srv_mod.running_servers() for s in never)


@pytest.mark.parametrize(("gpu", "expected"), [(False, "0"), (True, "unset")])
@pytest.mark.parametrize("caller", ["0", "1", None])
def test_where_a_servers_model_runs_is_the_devices_choice_not_the_callers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpu: bool, expected: str, caller: str | None
) -> None:
    """On a CPU the model runs inside the engine core (IN_PROCESS_ENV=0), on a GPU vLLM's default,
    whatever the notebook's in-process engines set (start_engine sets "0" on one device)."""
    monkeypatch.setattr(srv_mod, "has_gpu", lambda: gpu)
    if caller is None:
        monkeypatch.delenv(IN_PROCESS_ENV, raising=False)
    else:
        monkeypatch.setenv(IN_PROCESS_ENV, caller)
    (tmp_path / "health").write_text("ok")
    port = _free_port()
    code = (
        "import os, sys, http.server, functools; "
        f"open({str(tmp_path / 'env')!r}, 'w').write(os.environ.get({IN_PROCESS_ENV!r}, 'unset')); "
        "h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[2]); "
        "http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), h).serve_forever()"
    )
    argv = [sys.executable, "-c", code, str(port), str(tmp_path)]
    server = VllmServer(argv, port, "stand-in-env", "m").start(timeout=30, progress=False)
    try:
        assert (tmp_path / "env").read_text() == expected
    finally:
        server.stop()


def test_a_server_runs_under_its_guard_and_records_its_owner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(srv_mod, "_SERVERS_DIR", tmp_path / "servers")
    server = stand_in(tmp_path, "guarded-test").start(timeout=30, progress=False)
    try:
        guard_proc = psutil.Process(server.pgid)
        assert str(srv_mod._GUARD_FILE) in guard_proc.cmdline()
        assert server.pgid not in [p.pid for p in server.group_processes()], (
            "the guard is no server"
        )
        assert [p.ppid() for p in server.group_processes()] == [server.pgid]
        [(path, record)] = srv_mod._read_records()
        assert record["owner_pid"] == os.getpid() and record["pgid"] == server.pgid
        assert srv_mod._owner_alive(record) and srv_mod.sweep_orphans() == []
        assert server.healthy(), "a sweep leaves a live owner's server alone"
    finally:
        server.stop()
    assert not path.exists() and server.group_processes() == []


def test_stop_all_stops_every_server_at_once(tmp_path: Path) -> None:
    """Two servers that ignore SIGTERM cost one grace period, not two (SIGTERM fits in 2.5 s)."""
    (tmp_path / "health").write_text("ok")
    code = (
        "import functools, http.server, signal, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[2]); "
        "http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), h).serve_forever()"
    )
    servers = []
    for name in ("stubborn-a", "stubborn-b"):
        port = _free_port()
        servers.append(
            VllmServer([sys.executable, "-c", code, str(port), str(tmp_path)], port, name, "m")
        )
    srv_mod.start_together(servers, timeout=30, progress=False)
    t0 = time.monotonic()
    stop_all(grace=1.0)
    assert time.monotonic() - t0 < 1.0 + 4.0, "one grace for all, then SIGKILL"
    assert all(s.group_processes() == [] and not _port_in_use(s.port) for s in servers)


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


def health_server(port: int, directory: Path, first: str = "pass") -> str:
    """Python code that runs `first`, then answers GET /health from `directory` on `port`."""
    return (
        f"{first}\nimport functools, http.server\n"
        f"h = functools.partial(http.server.SimpleHTTPRequestHandler, directory={str(directory)!r})\n"
        f"http.server.ThreadingHTTPServer(('127.0.0.1', {port}), h).serve_forever()\n"
    )


def test_two_servers_of_one_process_asked_for_one_port_do_not_both_start(tmp_path: Path) -> None:
    """`start_together` with port=8000 twice: the first to listen would answer both health checks
    (the second still importing vLLM: here it sleeps before it binds)."""
    (tmp_path / "health").write_text("ok")
    port = _free_port()
    pair = [
        VllmServer([sys.executable, "-c", health_server(port, tmp_path, first)], port, name, "m")
        for name, first in (("same-port-a", "pass"), ("same-port-b", "import time; time.sleep(5)"))
    ]
    try:
        with pytest.raises(RuntimeError, match=f"port {port} is already server 'same-port-") as err:
            srv_mod.start_together(pair, timeout=30, progress=False)
        assert "\n" not in str(err.value)
    finally:
        stop_all()
    assert all(s.group_processes() == [] for s in pair) and not _port_in_use(port)


def test_a_port_taken_by_another_process_while_starting_is_not_taken_for_health(
    tmp_path: Path,
) -> None:
    """Two kernels ask for one port: both check it free, the other's server listens first and
    answers /health while this one still imports vLLM (here: sleeps before it binds)."""
    (tmp_path / "health").write_text("ok")
    port, launched = _free_port(), tmp_path / "launched"
    waits = f"import os, time\nwhile not os.path.exists({str(launched)!r}): time.sleep(0.02)"
    other = subprocess.Popen(
        [sys.executable, "-c", health_server(port, tmp_path, waits)], start_new_session=True
    )
    slow = f"open({str(launched)!r}, 'w').close(); import time; time.sleep(60)"
    server = VllmServer(
        [sys.executable, "-c", health_server(port, tmp_path, slow)], port, "late", "m"
    )
    try:
        with pytest.raises(
            RuntimeError, match=f"port {port} is answered by pid {other.pid} "
        ) as err:
            server.start(timeout=30, progress=False)
        assert "not by server 'late'" in str(err.value) and "\n" not in str(err.value)
        assert not server.alive and server.group_processes() == [] and other.poll() is None
    finally:
        server.stop()
        other.kill()
        other.wait()


def test_a_server_whose_bind_fails_says_its_port_was_taken(tmp_path: Path) -> None:
    (tmp_path / "health").write_text("ok")
    port = _free_port()
    code = "print('OSError: [Errno 98] Address already in use'); raise SystemExit(1)"
    server = VllmServer([sys.executable, "-c", code], port, "bind-failed", "m")
    with pytest.raises(RuntimeError, match=f"could not listen on port {port}: another process"):
        server.start(timeout=30, progress=False)


def test_only_the_servers_own_listener_counts_as_healthy(tmp_path: Path) -> None:
    server = stand_in(tmp_path, "own-listener").start(timeout=30, progress=False)
    try:
        [child] = server.group_processes()
        assert srv_mod._listeners(server.port) == [child.pid] and server.healthy()
        stranger = VllmServer(["true"], server.port, "stranger", "m")
        stranger.pgid, stranger.server_id = os.getpid(), "0" * 32  # not the listener's
        assert stranger._health_answers() and not stranger.healthy()
    finally:
        server.stop()


def test_a_crashed_server_leaves_nothing_of_its_session(tmp_path: Path) -> None:
    """The API server killed (kill -9, a crash): its EngineCore, Worker and resource tracker
    (here: a child in its group and one in a group of its own) must not live on until stop()."""
    (tmp_path / "health").write_text("ok")
    port = _free_port()
    children = (
        "import os, subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
        "subprocess.Popen([sys.executable, '-c', "
        "'import os, time; os.setpgid(0, 0); time.sleep(300)'])"
    )
    argv = [sys.executable, "-c", health_server(port, tmp_path, children)]
    server = VllmServer(argv, port, "crashed", "m").start(timeout=30, progress=False)
    sid = server.pgid
    assert sid is not None
    try:
        wait_until(lambda: len(session_processes(sid)) == 4, 30, "not all started")
        [main] = [p for p in server.group_processes() if p.ppid() == server.pgid]
        main.kill()
        wait_until(lambda: not session_processes(sid), 15, "the crashed server's session lives")
        assert srv_mod.helper_processes() == [] and not server.alive
        assert "ended: 'its main process: exit code -9'" in repr(server), repr(server)
    finally:
        for left in session_processes(sid):
            left.kill()
        server.stop()


@pytest.mark.parametrize(
    ("last_words", "end"),
    [
        # the out-of-memory killer takes a worker while serving; the API server then exits
        (
            "(EngineCore_DP0 pid=7) ERROR [multiproc_executor.py:315] Worker proc VllmWorker-0 "
            "died unexpectedly (exit code: -9), shutting down executor.",
            "raise SystemExit(0)",
        ),
        # ... an engine core at start
        (
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core "
            "proc(s): {'EngineCore_DP0': -9}",
            "raise SystemExit(1)",
        ),
        # ... the API server itself
        ("loading", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"),
    ],
    ids=["worker", "engine core at start", "api server"],
)
def test_a_process_killed_by_sigkill_is_reported_as_memory_with_the_log(
    last_words: str, end: str
) -> None:
    code = f"print({last_words!r}, flush=True); {end}"
    server = VllmServer([sys.executable, "-c", code], _free_port(), "oom-test", "m")
    with pytest.raises(RuntimeError) as err:
        server.start(timeout=30, progress=False)
    message = str(err.value)
    assert "killed by SIGKILL" in message and "out-of-memory" in message, message
    assert "log build/logs/oom-test.log" in message and "\n" not in message


@pytest.mark.parametrize("oom_killer_ran", [True, False])
def test_a_process_dead_while_the_oom_killer_ran_is_reported_as_memory(
    monkeypatch: pytest.MonkeyPatch, oom_killer_ran: bool
) -> None:
    """vLLM may log a worker's death before its exit code is known ("exit code: None"): the
    kernel's out-of-memory kill count, risen since the start, tells a memory kill from others."""
    counts = iter(range(3, 100))
    monkeypatch.setattr(srv_mod, "_oom_kills", lambda: next(counts) if oom_killer_ran else 3)
    line = (
        "(EngineCore pid=7) ERROR [multiproc_executor.py:314] Worker proc VllmWorker-0 died "
        "unexpectedly (exit code: None), shutting down executor."
    )
    code = f"print({line!r}, flush=True)"
    server = VllmServer([sys.executable, "-c", code], _free_port(), "oom-count-test", "m")
    with pytest.raises(RuntimeError) as err:
        server.start(timeout=30, progress=False)
    said = str(err.value)
    memory = "died while the out-of-memory killer ran (the kernel's OOM kill count rose since"
    assert (memory in said) == oom_killer_ran
    assert "Worker proc VllmWorker-0 died unexpectedly (exit code: None)" in said
    if not oom_killer_ran:
        assert "out-of-memory" not in said and server.failure() is None  # stop() ended it


def test_oom_kills_reads_the_kernels_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "vmstat").write_text("oom_kill_other 9\noom_kill 12\npgfault 3\n")
    monkeypatch.setattr(srv_mod, "_VMSTAT", tmp_path / "vmstat")
    assert srv_mod._oom_kills() == 12
    monkeypatch.setattr(srv_mod, "_VMSTAT", tmp_path / "none")
    assert srv_mod._oom_kills() is None


def test_a_stopped_server_reports_no_failure(tmp_path: Path) -> None:
    server = stand_in(tmp_path, "stopped-test").start(timeout=30, progress=False)
    assert server.failure() is None
    server.stop()
    assert server.failure() is None and repr(server).endswith("stopped)")


# ---------------------------------------------------------------- serving_bench arithmetic (no server)


# ---------------------------------------------------------------- a live tiny-pair server (vLLM)


@pytest.fixture(scope="module")
def spec_server() -> Iterator[VllmServer]:
    """The tiny profile's speculative server (long form), started once for this module."""
    if not tiny_pair_present():
        pytest.skip("the tiny pair is not in data/: run `make tiny-models`")
    server = make_server(load_profile("tiny"), name="test-spec").start(progress=False)
    yield server
    server.stop()
    assert server.group_processes() == [] and not _port_in_use(server.port)


@pytest.mark.vllm
def test_speculative_sampling_at_t07_through_the_server(spec_server: VllmServer) -> None:
    """vLLM issue #55005 is fixed in the server's processes too (the plugin loads there)."""
    from helpers.common.prompts import as_messages, load_prompts
    from kit.text_quality import _distinct_ngram_ratio

    prompts = [p for items in load_prompts(2).values() for p in items]
    before = scrape_spec_counters(spec_server.base_url)
    replies = [
        chat(
            spec_server.base_url,
            spec_server.model,
            as_messages(p),
            max_tokens=256,
            temperature=0.7,
            seed=i,
        )
        for i, p in enumerate(prompts)
    ]
    drafts = (scrape_spec_counters(spec_server.base_url) - before).num_drafts
    finished = sum(r["choices"][0]["finish_reason"] == "stop" for r in replies) / len(replies)
    distinct = min(_distinct_ngram_ratio(answer_text(r).split()) for r in replies)
    print(f"finished naturally {finished:.0%}, lowest distinct-4-gram ratio {distinct:.2f}")
    assert drafts > 0 and finished >= 0.75 and distinct >= 0.5, (drafts, finished, distinct)


@pytest.mark.vllm
def test_server_answers_a_chat_request(spec_server: VllmServer) -> None:
    assert served_models(spec_server.base_url) == [spec_server.model] == ["tiny-qwen3-moe"]
    reply = chat(spec_server.base_url, spec_server.model, MESSAGES, max_tokens=32, temperature=0.0)
    assert reply["choices"][0]["message"]["role"] == "assistant" and answer_text(reply)
    assert 0 < reply["usage"]["completion_tokens"] <= 32


@pytest.mark.vllm
def test_the_model_runs_inside_the_servers_one_engine_core(spec_server: VllmServer) -> None:
    """No worker process of its own: on a CPU (IN_PROCESS_ENV=0, `VllmServer.start`) as on one GPU."""
    titles = [" ".join(p.cmdline()) for p in spec_server.group_processes()]
    assert sum(t.startswith("VLLM::EngineCore") for t in titles) == 1, titles
    assert not any(t.startswith("VLLM::Worker") for t in titles), titles


@pytest.mark.vllm
def test_streaming_gives_ttft_and_token_counts(spec_server: VllmServer) -> None:
    r = stream_chat(
        spec_server.base_url, spec_server.model, MESSAGES, max_tokens=48, ignore_eos=True
    )
    assert r.ttft > 0 and r.output_tokens == 48 and r.finish_reason == "length"
    assert 0 < r.chunks <= 48 and r.tpot > 0 and r.latency >= r.ttft and r.text


@pytest.mark.vllm
def test_metrics_counters_move_and_the_trained_drafter_is_accepted(spec_server: VllmServer) -> None:
    before = scrape_spec_counters(spec_server.base_url)
    chat(spec_server.base_url, spec_server.model, MESSAGES[1:], max_tokens=64, ignore_eos=True)
    delta = scrape_spec_counters(spec_server.base_url) - before
    assert delta.num_drafts > 0 and delta.num_draft_tokens == 3 * delta.num_drafts
    assert delta.num_accepted_tokens > 0, (
        "the trained drafter should get some draft tokens accepted"
    )
    assert (
        len(delta.accepted_per_pos) == 3
        and sum(delta.accepted_per_pos) == delta.num_accepted_tokens
    )


def post_raw(base_url: str, body: str) -> requests.Response:
    """POST a raw (possibly malformed) JSON body to the chat endpoint, whatever the status."""
    headers = {"Content-Type": "application/json"}
    url = f"{base_url}/v1/chat/completions"
    return requests.post(url, data=body.encode(), timeout=30, headers=headers)


@pytest.mark.vllm
def test_bad_requests_get_4xx_and_the_server_keeps_serving(spec_server: VllmServer) -> None:
    malformed = post_raw(spec_server.base_url, '{"model": "tiny-qwen3-moe", "messages": [')
    assert malformed.status_code == 400
    unknown = post_raw(
        spec_server.base_url, json.dumps({"model": "no-such-model", "messages": MESSAGES})
    )
    assert unknown.status_code == 404 and "does not exist" in unknown.json()["error"]["message"]
    with pytest.raises(requests.HTTPError, match="404"):
        chat(spec_server.base_url, "no-such-model", MESSAGES)
    assert answer_text(chat(spec_server.base_url, spec_server.model, MESSAGES, max_tokens=8))


@pytest.mark.vllm
def test_second_server_on_a_busy_port_fails_clearly(spec_server: VllmServer) -> None:
    busy = f"port {spec_server.port} is already server 'test-spec''s \\(started here\\)"
    with pytest.raises(RuntimeError, match=busy):
        make_server(load_profile("tiny"), port=spec_server.port, name="test-busy").start(
            progress=False
        )
    assert spec_server.healthy()


@pytest.mark.vllm
def test_per_request_acceptance_adds_up_to_the_counter_delta(spec_server: VllmServer) -> None:
    """Each response's metrics.speculative_decoding, summed over a concurrent level (streamed)
    and over plain calls, equals the /metrics counter delta of the same requests."""
    if not compat.supports("per_request_spec_decode_metrics"):
        pytest.skip(srv_mod.feature_label("per_request_spec_decode_metrics"))
    from concurrent.futures import ThreadPoolExecutor

    from chapters.ch04_serving.bench import _run_level, bench_prompts
    from chapters.ch04_serving.clients import response_acceptance
    from helpers.common.counters import counters_of
    from helpers.common.prompts import as_messages

    prompts = bench_prompts(4)
    run = _run_level(spec_server, prompts, 4, 4, 32, 120.0, "spec")
    row = notebook_defs("04_serving_and_benchmarks.ipynb")["reconcile_per_request"]([run]).iloc[0]
    assert row.with_acceptance == 4 and row.drafts_counters > 0
    assert row.equal and row.per_position_equal, row
    before = scrape_spec_counters(spec_server.base_url)
    with ThreadPoolExecutor(max_workers=4) as pool:
        replies = list(
            pool.map(
                lambda p: chat(
                    spec_server.base_url, spec_server.model, as_messages(p), max_tokens=24
                ),
                prompts,
            )
        )
    delta = scrape_spec_counters(spec_server.base_url) - before
    records = [response_acceptance(r) for r in replies]
    assert all(r is not None for r in records)
    assert counters_of(records) == delta, (records, delta)
