"""kit.runner never hangs silently: the Output widget's state goes back to the kernel without
swallowing the wake-up of a reply that has just arrived (notebook 01's explorer stalled `make run`
for the notebook's whole budget), and a cell silent past its watchdog limit fails in one line with
its cell and last output."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import psutil
import pytest
import zmq
import zmq.asyncio
from jupyter_client.channels import AsyncZMQSocketChannel
from jupyter_client.session import Session
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from kit import runner, watchdog

#: How long the shell channel's wait for a reply may take in the widget test (seconds).
_WAIT = 5.0


async def _seconds_to_see_the_reply(widget_class: type) -> float:
    """The kernel replies while the client waits on its shell socket; the reply reaches the
    socket, then (before the event loop runs again) the Output widget sends its state back on
    that socket, as nbclient's does while it reads the cell's outputs. How long the wait then
    takes to return the reply."""
    session = Session(key=b"")
    kernel = zmq.Context.instance().socket(zmq.ROUTER)
    client = zmq.asyncio.Context.instance().socket(zmq.DEALER)
    try:
        port = kernel.bind_to_random_port("tcp://127.0.0.1")
        client.connect(f"tcp://127.0.0.1:{port}")
        shell = AsyncZMQSocketChannel(client, session)
        session.send(client, "kernel_info_request")  # the kernel learns the client's identity
        ident = kernel.recv_multipart()[0]
        kernel_client = SimpleNamespace(session=session, shell_channel=shell)
        widget = widget_class("comm-1", {"outputs": []}, kernel_client, SimpleNamespace())
        widget.parent_header = {}
        waiting = asyncio.ensure_future(shell.get_msg(timeout=_WAIT))
        await asyncio.sleep(0.2)  # the wait is armed
        session.send(kernel, "execute_reply", {"status": "ok"}, ident=[ident])
        time.sleep(0.3)  # blocking: the reply arrives while the event loop does not run
        widget.sync_state()  # what nbclient's Output widget does for each output it captures
        start = time.monotonic()
        reply = await waiting
        assert reply["msg_type"] == "execute_reply"
        return time.monotonic() - start
    finally:
        client.close(linger=0)
        kernel.close(linger=0)


def test_the_output_widget_does_not_swallow_a_reply() -> None:
    widget = runner._InterruptibleClient(new_notebook()).widget_registry["@jupyter-widgets/output"]
    seconds = asyncio.run(_seconds_to_see_the_reply(widget["OutputModel"]))
    assert seconds < 1.0, f"the reply waited {seconds:.1f} s for the wait's timeout"


def _notebook(path: Path, *sources: str) -> Path:
    """A notebook of a markdown title (cell 1) and code cells (cells 2, 3, ...)."""
    cells = [new_markdown_cell(f"# {path.stem}"), *(new_code_cell(src) for src in sources)]
    nbformat.write(new_notebook(cells=cells), str(path))
    return path


@pytest.fixture
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stalled kernel that ignores the interrupt is killed after 2 s, not 15."""
    monkeypatch.setattr(runner, "_INTERRUPT_GRACE", 2.0)


def test_a_busy_cell_silent_past_its_limit_fails_with_its_last_output(
    tmp_path: Path, short_grace: None
) -> None:
    nb = _notebook(
        tmp_path / "busy.ipynb",
        "print('loading the pair')",
        "import time\nprint('waiting for the server')\ntime.sleep(300)",
        "print('never')",
    )
    start = time.monotonic()
    result = runner._run_notebook(nb, build_dir=tmp_path / "build", silence_limit=3)
    assert time.monotonic() - start < 60
    assert not result.ok and not result.interrupted
    assert result.error is not None
    assert result.error.startswith("busy.ipynb cell 3: silent for "), result.error
    assert "(limit 3 s: the limit given); last output: 'waiting for the server'" in result.error
    saved = nbformat.read(result.executed, as_version=4)
    assert "CellSilentError" in [o.get("ename") for o in saved.cells[2].outputs]
    assert saved.cells[3].outputs == [], "no cell runs after a stall"


def test_a_reply_that_never_comes_fails_instead_of_waiting(tmp_path: Path, short_grace) -> None:
    # The kernel goes idle but its execute_reply is lost: runner and kernel both wait in their
    # event loops, as in the widget hang.
    drop_reply = (
        "kernel = get_ipython().kernel\n"
        "send = kernel.session.send\n"
        "def drop(stream, msg_or_type, *args, **kwargs):\n"
        "    if msg_or_type == 'execute_reply':\n"
        "        kernel.session.send = send\n"
        "        return None\n"
        "    return send(stream, msg_or_type, *args, **kwargs)\n"
        "kernel.session.send = drop\n"
        "print('reply dropped')"
    )
    nb = _notebook(tmp_path / "idle.ipynb", drop_reply, "print('never')")
    start = time.monotonic()
    result = runner._run_notebook(nb, build_dir=tmp_path / "build", silence_limit=3)
    assert time.monotonic() - start < 60
    assert result.error is not None
    assert result.error.startswith("idle.ipynb cell 2: silent for "), result.error
    assert result.error.endswith("last output: 'reply dropped'"), result.error
    assert "killed" not in result.error, "the watchdog's kill is no out-of-memory death"


def test_the_cells_times_are_recorded_and_tighten_the_limit(tmp_path: Path) -> None:
    build = tmp_path / "build"
    nb = _notebook(tmp_path / "timed.ipynb", "x = 1", "import time\ntime.sleep(0.5)")
    assert runner._run_notebook(nb, build_dir=build).ok
    times = watchdog.read_times(build, "timed.ipynb")
    cells = nbformat.read(str(nb), as_version=4).cells
    assert set(times) == {cells[1].id, cells[2].id}
    assert 0.5 <= times[cells[2].id] < 30
    limits = watchdog.cell_limits(cells, times)
    assert limits[2].seconds == watchdog._FLOOR and "its last" in limits[2].reason
    assert limits[0].reason == "never measured"  # the markdown cell


def test_a_long_notebook_prints_a_line_per_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build = tmp_path / "build"
    nb = _notebook(tmp_path / "lines.ipynb", "x = 1", "y = 2")
    runner._run_notebook(nb, build_dir=build)  # never measured: a line per cell
    first = capsys.readouterr().out
    assert "cell 2/3 done in " in first and "cell 3/3 done in " in first
    runner._run_notebook(nb, build_dir=build)  # measured at well under a minute: quiet
    assert "done in" not in capsys.readouterr().out


def test_no_kernel_is_left_after_a_stall(tmp_path: Path, short_grace: None) -> None:
    pid_file = tmp_path / "kernel.pid"
    nb = _notebook(
        tmp_path / "left.ipynb",
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(300)",
    )
    runner._run_notebook(nb, build_dir=tmp_path / "build", silence_limit=2)
    kernel = int(pid_file.read_text())
    assert not psutil.pid_exists(kernel) or psutil.Process(kernel).status() == (
        psutil.STATUS_ZOMBIE
    )
