"""Run notebooks headless (`python -m helpers.tools.runner`): executed copies + HTML under build/, a peak-RSS summary."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import nbformat
import psutil
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbconvert import HTMLExporter

from helpers.common.paths import BUILD_DIR, NOTEBOOKS_DIR

__all__ = [
    "DEFAULT_TIMEOUT",
    "SAMPLE_INTERVAL",
    "KERNEL_NAME",
    "SUMMARY_NAME",
    "GIB",
    "NotebookResult",
    "CurrentEnvKernelSpecManager",
    "RssSampler",
    "tree_rss_bytes",
    "kernel_pid",
    "find_notebooks",
    "describe_error",
    "failing_cell",
    "cell_timeout_func",
    "write_outputs",
    "run_notebook",
    "format_summary",
    "write_summary",
    "run_all",
    "parse_args",
    "main",
]

DEFAULT_TIMEOUT = 1200.0
SAMPLE_INTERVAL = 0.5
KERNEL_NAME = "python3"
SUMMARY_NAME = "run-summary.json"
GIB = 1024**3


@dataclass
class NotebookResult:
    """How one notebook run went."""

    notebook: str
    ok: bool
    seconds: float
    peak_rss_gib: float
    executed: str
    html: str
    error: str | None = None

    @property
    def status(self) -> str:
        """'ok' or 'FAILED'."""
        return "ok" if self.ok else "FAILED"


class CurrentEnvKernelSpecManager(KernelSpecManager):
    """Resolves the 'python3' kernel to this interpreter (the venv), whatever kernelspecs are installed."""

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        """The ipykernel spec for sys.executable when asked for KERNEL_NAME."""
        if kernel_name != KERNEL_NAME:
            return super().get_kernel_spec(kernel_name)
        return KernelSpec(
            argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            display_name=f"Python 3 ({sys.prefix})",
            language="python",
            metadata={"debugger": True},
        )


class RssSampler:
    """Samples the summed RSS of a process and all its descendants in a thread; keeps the peak."""

    def __init__(
        self, get_pid: Callable[[], int | None], interval: float = SAMPLE_INTERVAL
    ) -> None:
        """`get_pid` may return None until the process exists (the kernel is still starting)."""
        self._get_pid = get_pid
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)
        self.peak_bytes = 0

    def __enter__(self) -> RssSampler:
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
        total = tree_rss_bytes(pid) if pid else 0
        self.peak_bytes = max(self.peak_bytes, total)
        return total

    def _loop(self) -> None:
        """Sample every `interval` seconds until stopped."""
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self._interval)


def tree_rss_bytes(pid: int) -> int:
    """RSS of `pid` plus all its descendants, in bytes; processes that vanish mid-count are skipped."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return 0
    total = 0
    for proc in procs:
        try:
            total += proc.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total


def kernel_pid(km: AsyncKernelManager) -> int | None:
    """The kernel process id once it has started, else None."""
    provisioner = getattr(km, "provisioner", None)
    pid = getattr(provisioner, "pid", None)
    if pid is None:
        process = getattr(provisioner, "process", None)
        pid = getattr(process, "pid", None)
    return pid


def find_notebooks(names: Sequence[str] = (), notebooks_dir: Path = NOTEBOOKS_DIR) -> list[Path]:
    """The given notebooks (paths, or names inside notebooks_dir), else notebooks_dir/*.ipynb by name."""
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


def describe_error(err: BaseException) -> str:
    """A one- or two-line account of a failure: the failing cell's error name + message."""
    if isinstance(err, CellExecutionError):
        name, message = err.ename, err.evalue
    else:
        name, message = type(err).__name__, str(err)
    lines = [line for line in str(message).strip().splitlines() if line.strip()]
    text = "\n".join(lines[:2]) if lines else "(no message)"
    return f"{name}: {text}"[:600]


def failing_cell(nb: nbformat.NotebookNode) -> int | None:
    """1-based index (among all cells) of the first cell with an error output, else None."""
    for index, cell in enumerate(nb.cells, 1):
        if any(out.get("output_type") == "error" for out in cell.get("outputs", [])):
            return index
    return None


def cell_timeout_func(deadline: float, cell_timeout: float | None) -> Callable[[Any], int]:
    """nbclient timeout_func: a cell gets the notebook's remaining budget (at least 1 s), capped by cell_timeout."""

    def timeout(_cell: Any) -> int:
        remaining = deadline - time.monotonic()
        if cell_timeout is not None:
            remaining = min(remaining, cell_timeout)
        return max(1, int(remaining))

    return timeout


def write_outputs(nb: nbformat.NotebookNode, ipynb_path: Path, html_path: Path) -> None:
    """Write the executed notebook and its HTML export."""
    ipynb_path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(ipynb_path))
    body, _ = HTMLExporter().from_notebook_node(nb)
    html_path.write_text(body, encoding="utf-8")


def run_notebook(
    path: Path,
    build_dir: Path = BUILD_DIR,
    timeout: float = DEFAULT_TIMEOUT,
    cell_timeout: float | None = None,
    cwd: Path | None = None,
) -> NotebookResult:
    """Execute one notebook on this interpreter's kernel; outputs land in build_dir even on failure."""
    nb = nbformat.read(str(path), as_version=4)
    km = AsyncKernelManager(
        kernel_name=KERNEL_NAME, kernel_spec_manager=CurrentEnvKernelSpecManager()
    )
    deadline = time.monotonic() + timeout
    client = NotebookClient(
        nb,
        km=km,
        kernel_name=KERNEL_NAME,
        timeout_func=cell_timeout_func(deadline, cell_timeout),
        startup_timeout=120,
        resources={"metadata": {"path": str(cwd or path.parent)}},
        extra_arguments=["--IPKernelApp.log_level=ERROR"],  # not the TCP-without-encryption warning
    )
    error: str | None = None
    start = time.monotonic()
    # What the kernel process writes to its own stderr outside any cell's output (C++ warnings
    # from vLLM and torch) goes to a log, not the terminal.
    kernel_log = build_dir / "logs" / f"kernel-{path.stem}.log"
    kernel_log.parent.mkdir(parents=True, exist_ok=True)
    with kernel_log.open("w") as stderr, RssSampler(lambda: kernel_pid(km)) as sampler:
        # Also sample after every cell: a short notebook can finish between two timer ticks.
        client.on_cell_executed = lambda **_: sampler.sample()
        try:
            client.execute(cleanup_kc=True, stderr=stderr)
        except Exception as err:  # noqa: BLE001 - any failure is reported, outputs still written
            error = describe_error(err)
            index = failing_cell(nb)
            if index is not None:
                error = f"cell {index}: {error}"
            if time.monotonic() >= deadline:
                error = f"notebook timeout after {timeout:.0f} s; {error}"
        finally:
            sampler.sample()
    seconds = time.monotonic() - start
    ipynb_path = build_dir / path.name
    html_path = ipynb_path.with_suffix(".html")
    write_outputs(nb, ipynb_path, html_path)
    return NotebookResult(
        notebook=path.name,
        ok=error is None,
        seconds=round(seconds, 1),
        peak_rss_gib=round(sampler.peak_bytes / GIB, 3),
        executed=str(ipynb_path),
        html=str(html_path),
        error=error,
    )


def format_summary(results: Sequence[NotebookResult]) -> str:
    """The one-screen table: notebook, status, seconds, peak RSS (GiB)."""
    width = max([len("notebook"), *(len(r.notebook) for r in results)])
    lines = [f"{'notebook':<{width}}  {'status':<6}  {'seconds':>8}  {'peak RSS GiB':>12}"]
    lines.append("-" * len(lines[0]))
    for r in results:
        lines.append(
            f"{r.notebook:<{width}}  {r.status:<6}  {r.seconds:>8.1f}  {r.peak_rss_gib:>12.2f}"
        )
    return "\n".join(lines)


def write_summary(results: Sequence[NotebookResult], build_dir: Path = BUILD_DIR) -> Path:
    """Write build_dir/run-summary.json (one record per notebook, with 'status')."""
    build_dir.mkdir(parents=True, exist_ok=True)
    path = build_dir / SUMMARY_NAME
    records = [{**asdict(r), "status": r.status} for r in results]
    path.write_text(
        json.dumps({"notebooks": records, "ok": all(r.ok for r in results)}, indent=2) + "\n"
    )
    return path


def run_all(
    notebooks: Sequence[Path],
    build_dir: Path = BUILD_DIR,
    timeout: float = DEFAULT_TIMEOUT,
    cell_timeout: float | None = None,
) -> list[NotebookResult]:
    """Run `notebooks` in order, printing a progress line as each starts and any failure as it ends."""
    results = []
    for i, path in enumerate(notebooks, 1):
        print(f"[run] {i}/{len(notebooks)} {path.name} ...", flush=True)
        result = run_notebook(path, build_dir=build_dir, timeout=timeout, cell_timeout=cell_timeout)
        if not result.ok:
            print(
                f"[run]   FAILED after {result.seconds:.1f} s: {_indent(result.error)}", flush=True
            )
            print(f"[run]   see {result.html}", flush=True)
        results.append(result)
    return results


def _indent(text: str | None) -> str:
    """Continuation lines of a multi-line error indented under the first."""
    return (text or "").replace("\n", "\n        ")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(prog="python -m helpers.tools.runner", description=__doc__)
    parser.add_argument(
        "notebooks", nargs="*", help="notebooks to run (default: notebooks/*.ipynb by name)"
    )
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per notebook (default 1200)"
    )
    parser.add_argument(
        "--cell-timeout",
        type=float,
        default=None,
        help="seconds per cell (default: the notebook's remaining budget)",
    )
    parser.add_argument(
        "--build-dir", type=Path, default=BUILD_DIR, help="where outputs go (default build/)"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the notebooks, print the summary table; 0 if all passed, 1 otherwise."""
    args = parse_args(argv)
    try:
        notebooks = find_notebooks(args.notebooks)
    except FileNotFoundError as err:
        print(f"[run] {err}", file=sys.stderr)
        return 1
    if not notebooks:
        print(f"[run] no notebooks found in {NOTEBOOKS_DIR}", file=sys.stderr)
        return 1
    results = run_all(
        notebooks, build_dir=args.build_dir, timeout=args.timeout, cell_timeout=args.cell_timeout
    )
    print()
    print(format_summary(results))
    summary = write_summary(results, args.build_dir)
    failed = [r for r in results if not r.ok]
    for r in failed:
        print(f"\nFAILED {r.notebook}: {_indent(r.error)}")
    print(f"\n{len(results) - len(failed)}/{len(results)} ok; summary in {summary}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
