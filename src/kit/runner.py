"""Run notebooks headless (`python -m kit.runner`): executed copies + HTML under build/, a
peak-RSS summary.

A notebook that passes replaces build/<name>.ipynb and .html; one that fails or is interrupted
goes to build/<name>.failed.ipynb and .html, so the last good copy stays until a new run of it
passes. build/run-summary.json keeps one record per notebook ever run (a run replaces only the
records of the notebooks it ran); runners at once take turns on it (a lock on
run-summary.json.lock), and a damaged one is kept aside as run-summary.json.corrupt, not reset. A
kernel that dies by itself is named with its signal, cell and peak RSS ("kernel killed by SIGKILL
(out of memory?) in cell 4"); a build/ that cannot be written (read-only, full) ends the run with
one line. Ctrl-C (or SIGTERM) stops the kernel, reports "interrupted in cell N" and exits 130 (143
for SIGTERM) without running the notebooks after it. After each notebook the runner stops whatever
its kernel left running (servers, engine processes), and at start any server whose owner died
earlier (the `sweep_orphans` of each chapter's `server` module, where a chapter has one).

Each kernel starts in its own session, with a mark in its environment; after the notebook the
runner also stops what the kernel detached (`os.system('sleep 300 &')`, a double fork, setsid) by
that session or mark. A cell silent longer than its watchdog limit (kit.watchdog: 10 × its last
measured time, at least 120 s; 600 s when never measured) fails the notebook with its cell and
last output; a notebook measured at a minute or more (or never measured) prints a line per cell,
and a cell running over a minute says so every minute. A kernel that fails to start is started
once more; each start's log is kept as build/logs/kernel-<notebook>-<time>-<pid>.log (the newest
10 per notebook). When HOME cannot be written, the caches vLLM and torch write go under build/cache
(helpers.common.notebook.cache_env).
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import copy
import importlib
import importlib.util
import json
import os
import pkgutil
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import nbformat
import psutil
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, DeadKernelError
from nbclient.jsonutil import json_clean
from nbclient.output_widget import OutputWidget
from nbconvert import HTMLExporter

import chapters
from helpers.common.notebook import cache_env
from helpers.common.paths import BUILD_DIR, NOTEBOOKS_DIR
from kit import watchdog

__all__ = [
    "main",
]

_DEFAULT_TIMEOUT = 1200.0
_SAMPLE_INTERVAL = 0.5
_KERNEL_NAME = "python3"
_SUMMARY_NAME = "run-summary.json"
_GIB = 1024**3
#: Seconds an interrupted cell gets to stop (KeyboardInterrupt in the kernel) before the kernel is
#: killed.
_INTERRUPT_GRACE = 15.0
#: Exit status after Ctrl-C (the shell's 128 + SIGINT); SIGTERM gives 128 + 15.
_EXIT_INTERRUPTED = 128 + signal.SIGINT
#: The environment variable that marks a kernel and everything it starts, detached or not.
_MARK = "WORKBOOK_RUNNER_KERNEL"
#: Per notebook, the newest this many kernel logs are kept.
_KEEP_LOGS = 10
#: A notebook measured at this many seconds or more (or never measured) gets a line per cell.
_LONG_NOTEBOOK = 60.0
#: A cell running this long says so, and again each time as long again.
_HEARTBEAT = 60.0


@dataclass
class _NotebookResult:
    """How one notebook run went."""

    notebook: str
    ok: bool
    seconds: float
    peak_rss_gib: float
    executed: str
    html: str
    error: str | None = None
    interrupted: bool = False
    finished_at: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    leftovers: list[str] = field(default_factory=list)
    write_error: str | None = None  # "cannot write <path> (<reason>)": outputs not in place
    kernel_log: str | None = None  # the last kernel start's log
    restarts: list[str] = field(default_factory=list)  # why a kernel start was tried again

    @property
    def status(self) -> str:
        """'ok', 'FAILED' or 'INTERRUPTED'."""
        if self.interrupted:
            return "INTERRUPTED"
        return "ok" if self.ok else "FAILED"


class _CurrentEnvKernelSpecManager(KernelSpecManager):
    """Resolves the 'python3' kernel to this interpreter (the venv), whatever kernelspecs are
    installed."""

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        """The ipykernel spec for sys.executable when asked for KERNEL_NAME."""
        if kernel_name != _KERNEL_NAME:
            return super().get_kernel_spec(kernel_name)
        return KernelSpec(
            argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            display_name=f"Python 3 ({sys.prefix})",
            language="python",
            metadata={"debugger": True},
        )


class _StopAfterInterruptError(Exception):
    """Raised by InterruptibleClient's cell hook to run no cell after an interrupt or a stall."""


class _OutputWidget(OutputWidget):
    """nbclient's stand-in for a front end's Output widget, sending its state back to the kernel
    through the shell channel's asyncio socket.

    nbclient's own sends through Session.send, which writes on a blocking shadow of that socket.
    The send runs in the task that reads IOPub while another task waits on the same socket for the
    cell's execute_reply; zmq's notification descriptor is edge-triggered, and a send that
    processes the socket's pending commands consumes the edge of a reply that has just arrived,
    behind pyzmq's back: the waiting task sleeps until its timeout (the notebook's whole budget),
    though kernel and runner are idle. A send on the asyncio socket lets pyzmq look for what
    arrived and wake the waiting task. (Notebook 01's explorer redraws its Output widget at each
    slider move: with its two cells eight times in a notebook, three runs at once on 2 cores, 14
    of 75 runs had a cell wait out its 60 s timeout this way.)
    """

    def _publish_msg(
        self,
        msg_type: str,
        data: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
        buffers: list[Any] | None = None,
        **keys: Any,
    ) -> None:
        """Send a comm message to the kernel on the shell channel's asyncio socket."""
        content = json_clean(dict(data=data or {}, comm_id=self.comm_id, **keys))
        session = self.kernel_client.session
        msg = session.msg(msg_type, content=content, parent=self.parent_header, metadata=metadata)
        frames = session.serialize(msg) + list(buffers or [])
        sent = self.kernel_client.shell_channel.socket.send_multipart(frames)
        if sent.done():
            sent.result()  # raise what a failed send raised, as Session.send would


@dataclass(frozen=True)
class _Stall:
    """A cell the watchdog stopped: which (1-based, among all cells), how long it was silent, its
    limit and last output."""

    cell: int
    silent: float
    limit: watchdog.CellLimit
    last: str


def _say(text: str) -> None:
    """A progress line on stdout, at once."""
    print(f"[run]   {text}", flush=True)


class _InterruptibleClient(NotebookClient):
    """A NotebookClient that knows when it was interrupted (SIGINT, SIGTERM) and in which cell,
    and watches each cell's output (kit.watchdog).

    The first signal interrupts the kernel (the cell gets KeyboardInterrupt and can clean up, as
    a server start does) and stops the notebook before its next cell; a kernel still busy
    INTERRUPT_GRACE s later, or a second signal, is killed (its servers then die with it). A cell
    silent past its limit is handled as a first signal, and noted in `stalled`.
    """

    def __init__(
        self,
        *args: Any,
        limits: Sequence[watchdog.CellLimit] = (),
        cell_lines: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.widget_registry = {"@jupyter-widgets/output": {"OutputModel": _OutputWidget}}
        self.signal_received: int | None = None
        self.stalled: _Stall | None = None
        self.current_cell: int | None = None  # 1-based, among all cells
        self.kernel_process: subprocess.Popen[bytes] | None = None  # its exit status tells a death
        self.cell_seconds: dict[str, float] = {}  # by watchdog.cell_key, cells that completed
        self.on_cell_start = self._note_cell
        self._limits = list(limits)
        self._cell_lines = cell_lines
        self._last_message = time.monotonic()
        self._kill_timer: asyncio.TimerHandle | None = None

    def _note_cell(self, cell: Any, cell_index: int) -> None:
        """on_cell_start hook: remember the cell; after an interrupt or a stall, run no further
        cell."""
        if self.signal_received is not None or self.stalled is not None:
            raise _StopAfterInterruptError(f"interrupted before cell {cell_index + 1}")
        self.current_cell = cell_index + 1

    def forget_signals(self) -> None:
        """After the run: cancel a pending kill (the kernel is gone by then)."""
        if self._kill_timer is not None:
            self._kill_timer.cancel()
            self._kill_timer = None

    async def async_start_new_kernel(self, **kwargs: Any) -> None:
        """Take over SIGINT/SIGTERM from nbclient (whose handler tears the kernel client down
        under the running cell), then start the kernel."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(RuntimeError, NotImplementedError, ValueError):
                loop.add_signal_handler(sig, self._on_signal, sig)
        await super().async_start_new_kernel(**kwargs)
        self.kernel_process = getattr(getattr(self.km, "provisioner", None), "process", None)

    def process_message(self, msg: dict[str, Any], cell: Any, cell_index: int) -> Any:
        """Every IOPub message of the running cell is a sign of life for the watchdog."""
        self._last_message = time.monotonic()
        return super().process_message(msg, cell, cell_index)

    async def async_execute_cell(
        self, cell: Any, cell_index: int, *args: Any, **kwargs: Any
    ) -> Any:
        """Run one cell under the watchdog; time it (a line per cell when asked)."""
        if cell.cell_type != "code" or not cell.source.strip():
            return await super().async_execute_cell(cell, cell_index, *args, **kwargs)
        start = self._last_message = time.monotonic()
        watch = asyncio.ensure_future(self._watch(cell, cell_index, start))
        try:
            result = await super().async_execute_cell(cell, cell_index, *args, **kwargs)
        finally:
            watch.cancel()
        seconds = time.monotonic() - start
        self.cell_seconds[watchdog.cell_key(cell, cell_index)] = round(seconds, 2)
        if self._cell_lines:
            _say(f"cell {cell_index + 1}/{len(self.nb.cells)} done in {seconds:.1f} s")
        return result

    async def _watch(self, cell: Any, cell_index: int, start: float) -> None:
        """Every second: a cell silent past its limit is stopped (a first signal); a cell running
        HEARTBEAT s, and each HEARTBEAT s after, says so."""
        limit = self._limits[cell_index] if cell_index < len(self._limits) else None
        beats = 1
        while True:
            await asyncio.sleep(min(1.0, limit.seconds / 4) if limit else 1.0)
            now = time.monotonic()
            if now - start >= beats * _HEARTBEAT:
                beats += 1
                _say(
                    f"cell {cell_index + 1}/{len(self.nb.cells)} still running after "
                    f"{now - start:.0f} s (last output {now - self._last_message:.0f} s ago)"
                )
            silent = now - self._last_message
            if limit is not None and silent > limit.seconds:
                last = watchdog.last_output(cell.get("outputs", []))
                self.stalled = _Stall(cell_index + 1, silent, limit, last)
                self._stop_kernel()
                return

    def _on_signal(self, sig: int) -> None:
        """First signal: stop the kernel (see _stop_kernel); later: kill it now."""
        first = self.signal_received is None and self.stalled is None
        self.signal_received = sig
        if first:
            self._stop_kernel()
        else:
            self._kill_kernel()

    def _stop_kernel(self) -> None:
        """Interrupt the kernel, kill it INTERRUPT_GRACE s later if it still runs."""
        if self.km is None or not self.km.has_kernel:
            return  # still starting: the first cell will not run
        asyncio.ensure_future(self.km.interrupt_kernel())
        loop = asyncio.get_running_loop()
        self._kill_timer = loop.call_later(_INTERRUPT_GRACE, self._kill_kernel)

    def _kill_kernel(self) -> None:
        """Kill the kernel's process group now, if it still runs (nbclient then sees it dead)."""
        km = self.km
        if km is not None and km.has_kernel:
            asyncio.ensure_future(km.shutdown_kernel(now=True))


class _RssSampler:
    """Samples the summed RSS of a process and all its descendants in a thread; keeps the peak
    and every process it saw (`seen`), so what outlives the process can be found afterwards."""

    def __init__(
        self, get_pid: Callable[[], int | None], interval: float = _SAMPLE_INTERVAL
    ) -> None:
        """`get_pid` may return None until the process exists (the kernel is still starting)."""
        self._get_pid = get_pid
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)
        self.peak_bytes = 0
        self.seen: dict[int, psutil.Process] = {}

    def __enter__(self) -> _RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop sampling and wait for the thread."""
        self._stop.set()
        self._thread.join()

    def sample(self) -> int:
        """One sample now: the summed RSS in bytes (0 when the process is not there)."""
        pid = self._get_pid()
        procs = _tree_processes(pid) if pid else []
        for proc in procs:
            self.seen.setdefault(proc.pid, proc)
        total = _rss_bytes(procs)
        self.peak_bytes = max(self.peak_bytes, total)
        return total

    def _loop(self) -> None:
        """Sample every `interval` seconds until stopped."""
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self._interval)


def _sweep_orphans() -> list[str]:
    """Stop servers whose owner died (one line each): every chapter that starts servers has a
    `server` module with a `sweep_orphans`, found by walking the chapters, never named; a fork
    without one has none to stop."""
    stopped = []
    for info in pkgutil.iter_modules(chapters.__path__, f"{chapters.__name__}."):
        if not info.ispkg or importlib.util.find_spec(f"{info.name}.server") is None:
            continue
        server = importlib.import_module(f"{info.name}.server")
        if hasattr(server, "sweep_orphans"):
            stopped += server.sweep_orphans()
    return stopped


def _tree_processes(pid: int) -> list[psutil.Process]:
    """`pid` and all its descendants ([] when it is gone)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []


def _rss_bytes(procs: Sequence[psutil.Process]) -> int:
    """Summed RSS in bytes; processes that vanish mid-count are skipped."""
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total


def _tree_rss_bytes(pid: int) -> int:
    """RSS of `pid` plus all its descendants, in bytes; processes that vanish mid-count are
    skipped."""
    return _rss_bytes(_tree_processes(pid))


def _stop_leftovers(procs: Sequence[psutil.Process], grace: float = 5.0) -> list[str]:
    """Stop the processes of `procs` that still run (the same processes: psutil checks their start
    time): SIGTERM, SIGKILL after `grace` s. Returns 'name (pid N)' for each."""
    alive = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append((proc, f"{proc.name()} (pid {proc.pid})"))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for proc, _ in alive:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                proc.send_signal(sig)
        _, still = psutil.wait_procs([proc for proc, _ in alive], timeout=wait)
        if not still:
            break
    return [name for _, name in alive]


def _kernel_pid(km: AsyncKernelManager) -> int | None:
    """The kernel process id once it has started, else None."""
    provisioner = getattr(km, "provisioner", None)
    pid = getattr(provisioner, "pid", None)
    if pid is None:
        process = getattr(provisioner, "process", None)
        pid = getattr(process, "pid", None)
    return pid


def _kernel_death(err: BaseException, process: subprocess.Popen[bytes] | None) -> str | None:
    """How a kernel that died by itself ended ('killed by SIGKILL (out of memory?)', 'exited with
    status 1', 'died'); None when `err` is not a dead kernel."""
    # At start jupyter_client raises a plain RuntimeError("Kernel died before replying ...").
    starting = isinstance(err, RuntimeError) and str(err).startswith("Kernel died")
    if not isinstance(err, DeadKernelError) and not starting:
        return None
    code = process.poll() if process is not None else None
    if code is None:
        return "died"
    if code >= 0:
        return f"exited with status {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return f"killed by {name}" + (" (out of memory?)" if -code == signal.SIGKILL else "")


def _note_error(nb: nbformat.NotebookNode, cell: int | None, ename: str, error: str) -> None:
    """Give a cell (1-based) an error output saying how it ended (the kernel died in it, the
    watchdog stopped it), for the saved copy."""
    if cell is not None and 0 < cell <= len(nb.cells):
        output = nbformat.v4.new_output(
            "error", ename=ename, evalue=error, traceback=[f"{ename}: {error}"]
        )
        nb.cells[cell - 1].setdefault("outputs", []).append(output)


def _left_by_kernel(mark: str, kernel: psutil.Process | None) -> list[psutil.Process]:
    """Processes other than this one that carry `mark` in their environment (whatever they did
    to detach), or live in the kernel's session and started after it (`&`, a double fork)."""
    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid() or (kernel is not None and proc.pid == kernel.pid):
            continue
        with contextlib.suppress(psutil.Error, OSError):
            in_session = (
                kernel is not None
                and os.getsid(proc.pid) == kernel.pid  # the kernel leads its own session
                and proc.create_time() >= kernel.create_time()
            )
            if in_session or proc.environ().get(_MARK) == mark:
                found.append(proc)
    return found


def _kernel_log_path(logs_dir: Path, notebook: Path) -> Path:
    """A new log name for one kernel start: kernel-<stem>-<date>-<time>-<pid>-<random>.log."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return logs_dir / f"kernel-{notebook.stem}-{stamp}-{os.getpid()}-{secrets.token_hex(2)}.log"


def _prune_logs(logs_dir: Path, notebook: Path, keep: int = _KEEP_LOGS) -> None:
    """Delete all but the newest `keep` kernel logs of `notebook` (by modification time)."""
    name = re.compile(rf"kernel-{re.escape(notebook.stem)}-\d{{8}}-\d{{6}}-\d+-[0-9a-f]{{4}}\.log")
    logs = []
    for log in logs_dir.glob("kernel-*.log"):
        with contextlib.suppress(OSError):
            if name.fullmatch(log.name):
                logs.append((log.stat().st_mtime, log))
    for _, log in sorted(logs)[:-keep]:
        with contextlib.suppress(OSError):
            log.unlink()


def _find_notebooks(names: Sequence[str] = (), notebooks_dir: Path = NOTEBOOKS_DIR) -> list[Path]:
    """The given notebooks (paths, or names inside notebooks_dir), else notebooks_dir/*.ipynb by
    name."""
    if not names:
        return sorted(notebooks_dir.glob("*.ipynb"), key=lambda p: p.name)
    found = []
    for name in names:
        path = Path(name)
        if not path.is_file():
            path = notebooks_dir / name
        if not path.is_file():
            raise FileNotFoundError(f"no notebook {name!r} (looked in . and {notebooks_dir})")
        found.append(path.resolve())
    return found


def _describe_error(err: BaseException) -> str:
    """A one- or two-line account of a failure: the failing cell's error name + message."""
    if isinstance(err, CellExecutionError):
        name, message = err.ename, err.evalue
    else:
        name, message = type(err).__name__, str(err)
    lines = [line for line in str(message).strip().splitlines() if line.strip()]
    text = "\n".join(lines[:2]) if lines else "(no message)"
    return f"{name}: {text}"[:600]


def _failing_cell(nb: nbformat.NotebookNode) -> int | None:
    """1-based index (among all cells) of the first cell with an error output, else None."""
    for index, cell in enumerate(nb.cells, 1):
        if any(out.get("output_type") == "error" for out in cell.get("outputs", [])):
            return index
    return None


def _cell_timeout_func(deadline: float, cell_timeout: float | None) -> Callable[[Any], int]:
    """nbclient timeout_func: a cell gets the notebook's remaining budget (at least 1 s), capped by
    cell_timeout."""

    def timeout(_cell: Any) -> int:
        remaining = deadline - time.monotonic()
        if cell_timeout is not None:
            remaining = min(remaining, cell_timeout)
        return max(1, int(remaining))

    return timeout


def _output_paths(notebook: str, build_dir: Path, ok: bool) -> tuple[Path, Path]:
    """(executed .ipynb, .html) for a run: build/<name>.* when it passed, else
    build/<name>.failed.*."""
    stem = Path(notebook).stem + ("" if ok else ".failed")
    return build_dir / f"{stem}.ipynb", build_dir / f"{stem}.html"


class _CannotWriteError(Exception):
    """A file under build/ could not be written; the message is the one line to print."""


def _cannot_write(path: Path, err: OSError, verb: str = "write") -> _CannotWriteError:
    """'cannot write <path> (<reason>)' for an OSError on `path`."""
    return _CannotWriteError(f"cannot {verb} {path} ({err.strerror or err})")


def _partial_path(path: Path) -> Path:
    """A temporary name beside `path` that no other writer shares (pid + random suffix)."""
    return path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.partial")


def _replace(*writes: tuple[Path, Callable[[Path], None]]) -> None:
    """Write each file under a temporary name beside it, then move them all into place: a reader
    never sees half a file, a failed write replaces none and leaves no temporary file behind."""
    staged = [(path, _partial_path(path), write) for path, write in writes]
    target = staged[0][0]
    try:
        for path, partial, write in staged:
            target = path
            write(partial)
        for path, partial, _ in staged:
            target = path
            os.replace(partial, path)
    except OSError as err:
        raise _cannot_write(target, err) from err
    finally:
        for _, partial, _ in staged:
            with contextlib.suppress(OSError):
                partial.unlink(missing_ok=True)


def _make_dir(path: Path) -> None:
    """mkdir -p `path`; _CannotWriteError when that fails."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _cannot_write(path, err) from err


def _open_log(path: Path) -> IO[str]:
    """`path` opened for writing (its directory made); _CannotWriteError when that fails."""
    _make_dir(path.parent)
    try:
        return path.open("w", encoding="utf-8")
    except OSError as err:
        raise _cannot_write(path, err) from err


def _remove(paths: Sequence[Path]) -> None:
    """Delete `paths` where they exist; _CannotWriteError when that fails."""
    for path in paths:
        try:
            path.unlink(missing_ok=True)
        except OSError as err:
            raise _cannot_write(path, err, verb="remove") from err


def _write_outputs(nb: nbformat.NotebookNode, ipynb_path: Path, html_path: Path) -> None:
    """Write the executed notebook and its HTML export (both whole, or neither)."""
    _make_dir(ipynb_path.parent)
    body, _ = HTMLExporter().from_notebook_node(nb)
    _replace(
        (ipynb_path, lambda path: nbformat.write(nb, str(path))),
        (html_path, lambda path: path.write_text(body, encoding="utf-8")),
    )


def _error_text(
    err: BaseException, nb: nbformat.NotebookNode, deadline: float, timeout: float
) -> str:
    """The failure line: the failing cell and its error, and the timeout when it ran out."""
    error = _describe_error(err)
    index = _failing_cell(nb)
    if index is not None:
        error = f"cell {index}: {error}"
    if time.monotonic() >= deadline:
        error = f"notebook timeout after {timeout:.0f} s; {error}"
    return error


@dataclass
class _Attempt:
    """One kernel start and the cells it ran."""

    client: _InterruptibleClient
    log: Path
    peak_bytes: int
    seen: list[psutil.Process]
    error: str | None = None
    died: str | None = None

    @property
    def failed_to_start(self) -> bool:
        """True when the kernel ended before its first cell (and no signal stopped it)."""
        client = self.client
        return self.error is not None and client.current_cell is None and not self.interrupted

    @property
    def interrupted(self) -> bool:
        """True when a signal (SIGINT, SIGTERM) stopped the run."""
        return self.client.signal_received is not None


def _attempt(
    nb: nbformat.NotebookNode,
    path: Path,
    build_dir: Path,
    deadline: float,
    timeout: float,
    mark: str,
    client_options: dict[str, Any],
) -> _Attempt:
    """Start a kernel (its own session, `mark` in its environment) and run the notebook's cells
    on it."""
    km = AsyncKernelManager(
        kernel_name=_KERNEL_NAME, kernel_spec_manager=_CurrentEnvKernelSpecManager()
    )
    client = _InterruptibleClient(nb, km=km, kernel_name=_KERNEL_NAME, **client_options)
    # What the kernel process writes to its own stderr outside any cell's output (C++ warnings
    # from vLLM and torch, a failed start's traceback) goes to a log of its own, not the terminal.
    log = _kernel_log_path(build_dir / "logs", path)
    env = {**os.environ, **cache_env(cache_dir=build_dir / "cache"), _MARK: mark}
    error = died = None
    with _open_log(log) as stderr, _RssSampler(lambda: _kernel_pid(km)) as sampler:
        # Also sample after every cell: a short notebook can finish between two timer ticks.
        client.on_cell_executed = lambda **_: sampler.sample()
        try:
            client.execute(cleanup_kc=True, stderr=stderr, env=env)
        except Exception as err:
            error = _error_text(err, nb, deadline, timeout)
            died = _kernel_death(err, client.kernel_process)
        finally:
            sampler.sample()
            client.forget_signals()
            # nbclient's exit hook, left registered when the start failed, asserts at exit.
            atexit.unregister(client._cleanup_kernel)
    return _Attempt(client, log, sampler.peak_bytes, list(sampler.seen.values()), error, died)


def _run_notebook(
    path: Path,
    build_dir: Path = BUILD_DIR,
    timeout: float = _DEFAULT_TIMEOUT,
    cell_timeout: float | None = None,
    cwd: Path | None = None,
    silence_limit: float | None = None,
) -> _NotebookResult:
    """Execute one notebook on this interpreter's kernel (started once more if it fails to
    start), each cell under the watchdog; outputs land in build_dir (a failed or interrupted run
    beside the last good one); what the kernel left running, detached or not, is stopped."""
    nb = nbformat.read(str(path), as_version=4)
    times = watchdog.read_times(build_dir, path.name)
    deadline = time.monotonic() + timeout
    mark = f"{os.getpid()}-{secrets.token_hex(8)}"
    options = {
        "timeout_func": _cell_timeout_func(deadline, cell_timeout),
        "startup_timeout": 120,
        "resources": {"metadata": {"path": str(cwd or path.parent)}},
        "extra_arguments": ["--IPKernelApp.log_level=ERROR"],  # not TCP-without-encryption
        "limits": watchdog.cell_limits(nb.cells, times, fixed=silence_limit),
        "cell_lines": not times or sum(times.values()) >= _LONG_NOTEBOOK,
    }
    start = time.monotonic()
    restarts: list[str] = []
    seen: dict[int, psutil.Process] = {}
    peak = 0
    for tries_left in (1, 0):
        run = _attempt(copy.deepcopy(nb), path, build_dir, deadline, timeout, mark, options)
        peak = max(peak, run.peak_bytes)
        seen.update({proc.pid: proc for proc in run.seen})
        if not run.failed_to_start or not tries_left:
            break
        restarts.append(f"{run.died or run.error} in kernel start (log {run.log})")
        _say(f"the kernel did not start ({run.died or run.error}); its log: {run.log}; once more")
    nb, client, error = run.client.nb, run.client, run.error
    seconds = time.monotonic() - start
    cell = f"cell {client.current_cell}" if client.current_cell else "kernel start"
    if run.interrupted:
        error = f"interrupted in {cell} ({signal.Signals(client.signal_received).name})"
    elif client.stalled is not None:
        stall = client.stalled
        silent = f"silent for {stall.silent:.0f} s"
        error = watchdog.stall_line(path.name, stall.cell, silent, stall.limit, stall.last)
        _note_error(nb, stall.cell, "CellSilentError", error)
    elif run.died is not None:
        error = f"kernel {run.died} in {cell}; peak RSS {peak / _GIB:.2f} GiB; its log: {run.log}"
        _note_error(nb, client.current_cell, "DeadKernelError", error)
    kernel = seen.get(client.kernel_process.pid) if client.kernel_process else None
    seen.update({proc.pid: proc for proc in _left_by_kernel(mark, kernel)})
    leftovers = _stop_leftovers(list(seen.values()))
    leftovers += _sweep_orphans()
    ipynb_path, html_path = _output_paths(path.name, build_dir, ok=error is None)
    write_error = None
    try:
        _write_outputs(nb, ipynb_path, html_path)
        if error is None:  # this run is the good copy now: drop an older failed one
            _remove(_output_paths(path.name, build_dir, ok=False))
        watchdog.record_times(build_dir, path.name, client.cell_seconds)
    except _CannotWriteError as err:
        write_error = str(err)
    except OSError as err:
        write_error = str(_cannot_write(build_dir / watchdog.TIMES_NAME, err))
    _prune_logs(build_dir / "logs", path)
    return _NotebookResult(
        notebook=path.name,
        ok=error is None,
        seconds=round(seconds, 1),
        peak_rss_gib=round(peak / _GIB, 3),
        executed=str(ipynb_path),
        html=str(html_path),
        error=error,
        interrupted=run.interrupted,
        leftovers=leftovers,
        write_error=write_error,
        kernel_log=str(run.log),
        restarts=restarts,
    )


def _format_summary(results: Sequence[_NotebookResult]) -> str:
    """The one-screen table: notebook, status, seconds, peak RSS (GiB)."""
    width = max([len("notebook"), *(len(r.notebook) for r in results)])
    lines = [f"{'notebook':<{width}}  {'status':<6}  {'seconds':>8}  {'peak RSS GiB':>12}"]
    lines.append("-" * len(lines[0]))
    for r in results:
        lines.append(
            f"{r.notebook:<{width}}  {r.status:<6}  {r.seconds:>8.1f}  {r.peak_rss_gib:>12.2f}"
        )
    return "\n".join(lines)


def _merge_records(
    old: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The summary's records: each notebook's newest record, ordered by notebook name."""
    merged = {r["notebook"]: dict(r) for r in old if isinstance(r, dict) and "notebook" in r}
    merged.update({r["notebook"]: dict(r) for r in new})
    return [merged[name] for name in sorted(merged)]


def _locked(path: Path) -> contextlib.AbstractContextManager[None]:
    """watchdog.locked(path): runners at once take turns at reading and rewriting `path`; a lock
    file that cannot be opened is a _CannotWriteError."""
    lock_path = path.with_name(f"{path.name}.lock")
    try:
        lock_path.touch()
    except OSError as err:
        raise _cannot_write(lock_path, err) from err
    return watchdog.locked(path)


def _set_aside(path: Path) -> Path:
    """Move `path` to <path>.corrupt (or .corrupt.1, .corrupt.2, ...: none is overwritten)."""
    aside = path.with_name(f"{path.name}.corrupt")
    number = 0
    while aside.exists():
        number += 1
        aside = path.with_name(f"{path.name}.corrupt.{number}")
    try:
        os.replace(path, aside)
    except OSError as err:
        raise _cannot_write(aside, err) from err
    return aside


def _read_records(path: Path) -> list[Any]:
    """The summary's records ([] when there is none yet); a damaged summary is moved aside and
    named in one line on stderr."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as err:
        raise _cannot_write(path, err, verb="read") from err
    try:
        records = json.loads(text)["notebooks"]
        if not isinstance(records, list):
            raise TypeError("'notebooks' is not a list")
    except (ValueError, KeyError, TypeError) as err:
        aside = _set_aside(path)
        reason = f"{type(err).__name__}: {err}".splitlines()[0]
        print(
            f"[run] {path} was damaged ({reason}); kept it as {aside}, starting a new summary",
            file=sys.stderr,
            flush=True,
        )
        return []
    return records


def _write_summary(results: Sequence[_NotebookResult], build_dir: Path = BUILD_DIR) -> Path:
    """Merge this run's records into build_dir/run-summary.json (one record per notebook, with
    'status'; notebooks this run did not run keep their last record), under its lock."""
    _make_dir(build_dir)
    path = build_dir / _SUMMARY_NAME
    new = [{**asdict(r), "status": r.status} for r in results]
    for record in new:
        record.pop("write_error")  # a run that could not write its outputs writes no summary
    with _locked(path):
        records = _merge_records(_read_records(path), new)
        ok = all(r.get("status") == "ok" for r in records)
        text = json.dumps({"notebooks": records, "ok": ok}, indent=2) + "\n"
        _replace((path, lambda partial: partial.write_text(text, encoding="utf-8")))
    return path


def _run_all(
    notebooks: Sequence[Path],
    build_dir: Path = BUILD_DIR,
    timeout: float = _DEFAULT_TIMEOUT,
    cell_timeout: float | None = None,
    silence_limit: float | None = None,
) -> list[_NotebookResult]:
    """Run `notebooks` in order, printing a progress line as each starts (and as its cells end,
    for a long one) and any failure as it ends; the summary is merged after each one. An
    interrupted notebook ends the run, and so does a build_dir that cannot be written
    (_CannotWriteError, after the notebook's own report)."""
    results = []
    for line in _sweep_orphans():
        print(f"[run] stopped a server an earlier kernel left running: {line}", flush=True)
    for i, path in enumerate(notebooks, 1):
        print(f"[run] {i}/{len(notebooks)} {path.name} ...", flush=True)
        result = _run_notebook(
            path,
            build_dir=build_dir,
            timeout=timeout,
            cell_timeout=cell_timeout,
            silence_limit=silence_limit,
        )
        if not result.ok:
            print(
                f"[run]   {result.status} after {result.seconds:.1f} s: {_indent(result.error)}",
                flush=True,
            )
            print(f"[run]   see {result.html}", flush=True)
        if result.leftovers:
            print(
                f"[run]   stopped what the kernel left running: {', '.join(result.leftovers)}",
                flush=True,
            )
        results.append(result)
        if result.write_error:
            raise _CannotWriteError(result.write_error)
        _write_summary([result], build_dir)
        if result.interrupted:
            break
    return results


def _indent(text: str | None) -> str:
    """Continuation lines of a multi-line error indented under the first."""
    return (text or "").replace("\n", "\n        ")


def _parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(prog="python -m kit.runner", description=__doc__)
    parser.add_argument(
        "notebooks", nargs="*", help="notebooks to run (default: notebooks/*.ipynb by name)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=_DEFAULT_TIMEOUT,
        help="seconds per notebook (default 1200)",
    )
    parser.add_argument(
        "--cell-timeout",
        type=float,
        default=None,
        help="seconds per cell (default: the notebook's remaining budget)",
    )
    parser.add_argument(
        "--silence-limit",
        type=float,
        default=None,
        help="seconds any cell may go without output (default: 10 × its last measured time, at "
        "least 120 s; 600 s when never measured)",
    )
    parser.add_argument(
        "--build-dir", type=Path, default=BUILD_DIR, help="where outputs go (default build/)"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the notebooks, print the summary table; 0 if all passed, 1 otherwise, 130 (143 for
    SIGTERM) when interrupted."""
    args = _parse_args(argv)
    try:
        notebooks = _find_notebooks(args.notebooks)
    except FileNotFoundError as err:
        print(f"[run] {err}", file=sys.stderr)
        return 1
    if not notebooks:
        print(f"[run] no notebooks found in {NOTEBOOKS_DIR}", file=sys.stderr)
        return 1
    try:
        results = _run_all(
            notebooks,
            build_dir=args.build_dir,
            timeout=args.timeout,
            cell_timeout=args.cell_timeout,
            silence_limit=args.silence_limit,
        )
    except KeyboardInterrupt:  # between notebooks: nothing was running
        print("\n[run] interrupted between notebooks", flush=True)
        return _EXIT_INTERRUPTED
    except _CannotWriteError as err:  # read-only or full build dir
        print(f"[run] {err}", file=sys.stderr, flush=True)
        return 1
    print()
    print(_format_summary(results))
    summary = args.build_dir / _SUMMARY_NAME
    failed = [r for r in results if not r.ok]
    for r in failed:
        print(f"\n{r.status} {r.notebook}: {_indent(r.error)}")
    print(f"\n{len(results) - len(failed)}/{len(results)} ok; summary in {summary}")
    interrupted = [r for r in results if r.interrupted]
    if interrupted:
        print(f"[run] {interrupted[0].notebook}: {interrupted[0].error}; later notebooks not run")
        return 128 + (
            signal.SIGTERM if "SIGTERM" in (interrupted[0].error or "") else signal.SIGINT
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
