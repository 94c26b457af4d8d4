"""Faults of 04's servers, tried as an attendee would meet them: a kernel (or a plain Python
owner) killed while its servers start, or while the tiny server serves, leaves no process behind
and gives the GPU's memory back.

Stand-in servers (a Python process that never answers /health) keep this quick; the tests that
launch the real tiny-pair server are marked `vllm`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from jupyter_client.manager import KernelManager

from chapters.ch04_serving import server
from helpers.common.envinfo import has_gpu
from kit import runner
from tests.support import needs_shipped, wait_until

#: Seconds a server group may take to go once its owner is gone (guard poll + SIGTERM; a loaded
#: 2-core machine). A stand-in dies on SIGTERM at once.
GONE_WITHIN = 10.0


# --------------------------------------------------------------------------- helpers


def stand_in_argv(pgid_file: Path) -> list[str]:
    """A server that writes its process group id and never becomes healthy."""
    code = (
        f"import os, time; open({str(pgid_file)!r}, 'w').write(str(os.getpgrp())); time.sleep(300)"
    )
    return [sys.executable, "-c", code]


def start_code(tmp_path: Path, names: tuple[str, ...] = ("fault-a", "fault-b")) -> str:
    """What a notebook cell runs: setup_notebook, then servers started together (as notebook 04)."""
    argvs = {name: stand_in_argv(tmp_path / f"{name}.pgid") for name in names}
    return textwrap.dedent(
        f"""\
        from pathlib import Path
        from helpers.common.notebook import setup_notebook
        from chapters.ch04_serving import server
        setup_notebook(verbose=False)
        server._SERVERS_DIR = Path({str(tmp_path / "servers")!r})
        servers = [
            server.VllmServer(argv, server._free_port(), name, "m")
            for name, argv in {argvs!r}.items()
        ]
        server.start_together(servers, timeout=300, progress=False)
        """
    )


def started_groups(tmp_path: Path, names: tuple[str, ...] = ("fault-a", "fault-b")) -> list[int]:
    """The process groups of the stand-ins, once each has written its file."""
    files = [tmp_path / f"{name}.pgid" for name in names]
    wait_until(lambda: all(f.exists() and f.read_text() for f in files), 60, "servers not started")
    return [int(f.read_text()) for f in files]


def assert_all_gone(pgids: list[int]) -> None:
    """Every process group ends within GONE_WITHIN seconds."""
    wait_until(
        lambda: not any(server._group_processes(g) for g in pgids),
        GONE_WITHIN,
        f"server groups {[g for g in pgids if server._group_processes(g)]} still run",
    )


# --------------------------------------------------------------------------- orphans


def test_a_plain_owner_killed_mid_start_leaves_nothing(tmp_path: Path) -> None:
    owner = subprocess.Popen([sys.executable, "-c", start_code(tmp_path)])
    try:
        pgids = started_groups(tmp_path)
        assert all(server._group_processes(g) for g in pgids)
    finally:
        owner.kill()
        owner.wait()
    assert_all_gone(pgids)
    records = tmp_path / "servers"
    assert len(list(records.glob("*.json"))) == 2, "a killed owner cleans nothing up itself"
    assert server.sweep_orphans(records) == [] and not list(records.glob("*.json"))


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[KernelManager]:
    """A Jupyter kernel on this interpreter (as `make run` and JupyterLab start one)."""
    km = KernelManager(kernel_name=runner._KERNEL_NAME)
    km.kernel_spec_manager = runner._CurrentEnvKernelSpecManager()
    km.start_kernel(cwd=str(tmp_path), extra_arguments=["--IPKernelApp.log_level=ERROR"])
    client = km.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        km.test_client = client  # type: ignore[attr-defined]
        yield km
    finally:
        client.stop_channels()
        if km.has_kernel:
            km.shutdown_kernel(now=True)


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM", "jupyter-shutdown"])
def test_a_kernel_ended_while_its_servers_start_leaves_nothing(
    kernel: KernelManager, tmp_path: Path, how: str
) -> None:
    """SIGKILL (the guard stops the servers), SIGTERM to the kernel alone (setup_notebook's
    handler stops them and removes their records), and JupyterLab's shut-down (interrupt,
    shutdown request, SIGTERM, SIGKILL)."""
    kernel.test_client.execute(start_code(tmp_path))  # type: ignore[attr-defined]
    pgids = started_groups(tmp_path)
    pid = kernel.provisioner.pid  # type: ignore[union-attr]
    t0 = time.monotonic()
    if how == "SIGKILL":
        kernel.shutdown_kernel(now=True)  # SIGKILL to the kernel's process group
    elif how == "SIGTERM":
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: kernel.is_alive() is False, 10, "the kernel still runs after SIGTERM")
    else:
        kernel.shutdown_kernel(now=False)
    assert_all_gone(pgids)
    seconds = time.monotonic() - t0
    assert not kernel.is_alive()
    records = list((tmp_path / "servers").glob("*.json"))
    if how == "SIGTERM":
        assert records == [], "the SIGTERM handler stopped the servers itself"
    server.sweep_orphans(tmp_path / "servers")
    assert not list((tmp_path / "servers").glob("*.json"))
    assert seconds < GONE_WITHIN + 6, f"{how}: {seconds:.1f} s"


@pytest.mark.vllm
@needs_shipped
def test_an_owner_killed_right_after_launching_the_tiny_server_leaves_nothing(
    tmp_path: Path,
) -> None:
    """The real `vllm serve` of the tiny pair (still importing vLLM when its owner dies)."""
    pgid_file = tmp_path / "pgid"
    code = textwrap.dedent(
        f"""\
        import threading, time
        from pathlib import Path
        from helpers.common.profiles import load_profile
        from chapters.ch04_serving import server
        server._SERVERS_DIR = Path({str(tmp_path / "servers")!r})
        srv = server.make_server(load_profile("tiny"), name="fault-tiny")
        threading.Thread(target=srv.start, kwargs={{"progress": False}}, daemon=True).start()
        while srv.pgid is None:
            time.sleep(0.05)
        Path({str(pgid_file)!r}).write_text(str(srv.pgid))
        time.sleep(300)
        """
    )
    owner = subprocess.Popen([sys.executable, "-c", code])
    try:
        wait_until(lambda: pgid_file.exists() and pgid_file.read_text(), 60, "no server launched")
        pgid = int(pgid_file.read_text())
        time.sleep(2)  # well inside vLLM's import, long before /health
        assert server._group_processes(pgid), "the server should still be starting"
    finally:
        owner.kill()
        owner.wait()
    assert_all_gone([pgid])


def gpu_pids() -> set[int]:
    """Pids that hold GPU memory, as nvidia-smi lists them."""
    done = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return {int(line) for line in done.stdout.split() if line.strip().isdigit()}


@pytest.mark.vllm
@needs_shipped
@pytest.mark.skipif(
    not has_gpu(), reason="needs an NVIDIA GPU: nvidia-smi says who holds GPU memory"
)
def test_an_owner_killed_while_its_tiny_server_serves_returns_the_gpu_memory(
    tmp_path: Path,
) -> None:
    """On a GPU: the tiny server up (its engine holds GPU memory), its owner killed: every process
    of the group ends and nvidia-smi lists none of them."""
    ready = tmp_path / "ready"
    code = textwrap.dedent(
        f"""\
        import json, time
        from pathlib import Path
        from helpers.common.profiles import load_profile
        from chapters.ch04_serving import server
        server._SERVERS_DIR = Path({str(tmp_path / "servers")!r})
        srv = server.make_server(load_profile("tiny"), name="fault-tiny-gpu").start(progress=False)
        pids = [p.pid for p in srv.group_processes()]
        Path({str(ready)!r}).write_text(json.dumps({{"pgid": srv.pgid, "pids": pids}}))
        time.sleep(600)
        """
    )
    owner = subprocess.Popen([sys.executable, "-c", code])
    try:
        wait_until(
            lambda: ready.exists() and ready.read_text(), 900, "the tiny server never came up"
        )
        started = json.loads(ready.read_text())
        holding = gpu_pids() & set(started["pids"])
        assert holding, "the server's engine should hold GPU memory while it serves"
    finally:
        owner.kill()
        owner.wait()
    assert_all_gone([started["pgid"]])
    wait_until(
        lambda: not gpu_pids() & set(started["pids"]), 30, f"{holding} still hold GPU memory"
    )
