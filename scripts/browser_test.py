#!/usr/bin/env python3
"""`make browser-test`: notebook 01 in a real JupyterLab, driven by headless Chromium.

What `make lab` gives a learner, checked end to end: JupyterLab starts on a free loopback port
with a token and the venv's kernel; headless Chromium (Debian's `chromium`, driven by Playwright)
opens the notebook, runs Run → Run All Cells, waits for the kernel, and checks that no cell shows
an error, that outputs rendered, and that moving the first explorer's slider changes its result.
Screenshots go to build/browser-test/ (lab.png after the run, lab-after-slider.png after the move).

It installs what it needs (Chromium with apt-get when missing, else Playwright's own download;
Playwright into the venv, pinned), runs on a copy of notebooks/ under build/ so nothing is saved
into the committed notebooks, stops JupyterLab, its kernels and the browser, and checks that none
of them is left. Every failure is one line, `browser-test: FAILED <stage>: <what> (<what to do>)`,
and a non-zero exit (the code per stage is in EXIT_CODES).

    .venv/bin/python scripts/browser_test.py [--notebook notebooks/01_….ipynb] [--browser PATH]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = REPO_ROOT / "build" / "browser-test"
#: Installed into the venv when missing; the CDP client only, the browser is Debian's.
PLAYWRIGHT_REQUIREMENT = "playwright==1.65.2"
#: Executables tried in order (Debian's package first); WORKBOOK_CHROMIUM overrides them.
BROWSER_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
BROWSER_ENV_VAR = "WORKBOOK_CHROMIUM"
HOST = "127.0.0.1"

#: One exit code per failure stage, so CI logs and scripts can tell them apart.
EXIT_CODES: dict[str, int] = {
    "setup": 2,
    "browser": 3,
    "lab": 4,
    "timeout": 5,
    "error-output": 6,
    "outputs": 7,
    "explorer": 8,
    "slider": 9,
    "cleanup": 10,
}
HINTS: dict[str, str] = {
    "browser": f"install Debian's chromium (apt-get install chromium) or set {BROWSER_ENV_VAR}=/path/to/chrome",
    "lab": "see build/browser-test/lab.log; `make lab` shows the same start",
    "timeout": "see the screenshots and lab.log in build/browser-test/",
    "error-output": "run the notebook with `make run NOTEBOOKS=...` to see the whole traceback",
    "outputs": "see build/browser-test/lab.png",
    "explorer": "an explorer is a VBox with class workbook-explorer holding workbook-explorer-control sliders and a workbook-explorer-result",
    "slider": "the explorer's observe() callback must update its result widget; see lab-after-slider.png",
    "cleanup": "kill the listed pids by hand",
}

_PROMPT = re.compile(r"\[\s*(\d+|\*)?\s*\]")
# An exception line of a traceback: `ValueError: …`, `module.SomeError: …`, `KeyboardInterrupt`.
# Warnings (`UserWarning: …`, `FutureWarning: …`) are not errors and do not match.
_ERROR_LINE = re.compile(r"^\s*(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception)\b(?::.*)?$")


class StageError(Exception):
    """A failed stage: prints as one line and exits with EXIT_CODES[stage]."""

    def __init__(self, stage: str, detail: str) -> None:
        super().__init__(detail)
        self.stage = stage
        self.detail = detail

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.stage, 1)

    def line(self) -> str:
        return one_line(self.stage, self.detail, HINTS.get(self.stage))


def one_line(stage: str, detail: str, hint: str | None = None, limit: int = 400) -> str:
    """`browser-test: FAILED <stage>: <detail> (<hint>)` on one line, whitespace collapsed, detail cut to `limit`."""
    text = " ".join(str(detail).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return f"browser-test: FAILED {stage}: {text}" + (f" ({hint})" if hint else "")


def free_port(host: str = HOST) -> int:
    """A TCP port that is free on `host` right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def find_browser(
    env: Mapping[str, str],
    which: Callable[[str], str | None] = shutil.which,
    candidates: Sequence[str] = BROWSER_CANDIDATES,
) -> str | None:
    """The browser to drive: $WORKBOOK_CHROMIUM if set, else the first candidate on PATH, else None."""
    override = env.get(BROWSER_ENV_VAR)
    if override:
        return override
    for name in candidates:
        path = which(name)
        if path:
            return path
    return None


def last_line(text: str) -> str:
    """The last non-blank line of some output, or ''."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def failure_reason(output: str) -> str:
    """The line of a tool's output that says why it failed: the first `Error: …`/`E: …`, else the last line."""
    for line in output.splitlines():
        if re.match(r"^\s*(?:Error|ERROR|E):\s", line):
            return line.strip()
    return last_line(output)


def error_lines(stderr_texts: Iterable[str]) -> list[str]:
    """The error line of each stderr output that is an error (a traceback or `SomeError: …`), not a warning."""
    found = []
    for text in stderr_texts:
        lines = [line for line in text.splitlines() if line.strip()]
        errors = [line.strip() for line in lines if _ERROR_LINE.match(line)]
        if errors:
            found.append(errors[-1])
        elif any("Traceback" in line for line in lines):
            found.append(lines[-1].strip())
    return found


def prompt_state(prompt: str) -> str:
    """'done', 'running' or 'idle' for a code cell's input prompt: `[3]:`, `[*]:`, `[ ]:`."""
    match = _PROMPT.search(prompt or "")
    if not match or match.group(1) is None:
        return "idle"
    return "running" if match.group(1) == "*" else "done"


def run_finished(prompts: Sequence[str], kernel_status: str | None) -> bool:
    """Run All is over: something ran, nothing is queued or running, and the kernel is idle."""
    states = [prompt_state(p) for p in prompts]
    return "done" in states and "running" not in states and kernel_status == "idle"


def slider_key(now: float, low: float, high: float) -> str:
    """The arrow key that moves a slider at `now` within [low, high] away from the end it sits at."""
    return "ArrowRight" if now < high else "ArrowLeft" if now > low else ""


def lab_command(
    python: str, port: int, token: str, root_dir: Path, as_root: bool, host: str = HOST
) -> list[str]:
    """`jupyter lab` as `make lab` runs it, headless: loopback, a token, no browser, one fixed port."""
    cmd = [
        python, "-m", "jupyter", "lab", "--no-browser",
        f"--ServerApp.ip={host}", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root_dir}",
    ]  # fmt: skip
    return cmd + (["--allow-root"] if as_root else [])


#: User settings for the test's own JupyterLab settings dir: no news pop-up, no autosave, every
#: cell in the DOM (windowing would leave the explorer at the end unrendered until scrolled to).
LAB_SETTINGS: dict[str, dict] = {
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker": {
        "windowingMode": "none",
        "autoStartDefaultKernel": True,
    },
}


def lab_env(base: Mapping[str, str], jupyter_dir: Path, venv_bin: Path) -> dict[str, str]:
    """The environment for JupyterLab: its own config/settings/workspace dirs, the venv first on PATH."""
    env = dict(base)
    env["PATH"] = f"{venv_bin}{os.pathsep}{base.get('PATH', '')}"
    env["JUPYTER_CONFIG_DIR"] = str(jupyter_dir / "config")
    env["JUPYTER_RUNTIME_DIR"] = str(jupyter_dir / "runtime")
    env["JUPYTERLAB_SETTINGS_DIR"] = str(jupyter_dir / "settings")
    env["JUPYTERLAB_WORKSPACES_DIR"] = str(jupyter_dir / "workspaces")
    env.pop("JUPYTER_TOKEN", None)
    return env


def notebook_url(port: int, name: str, token: str, host: str = HOST) -> str:
    """The Lab URL that opens notebook `name` (relative to the root dir)."""
    return f"http://{host}:{port}/lab/tree/{urllib.request.quote(name)}?token={token}"


def parse_proc_stat(text: str) -> tuple[int, int, str]:
    """(pid, ppid, state) from a /proc/<pid>/stat line (the command name may hold spaces and parens)."""
    head, _, tail = text.rpartition(")")
    fields = tail.split()
    return int(head.split("(", 1)[0]), int(fields[1]), fields[0]


def descendants(root: int, table: Mapping[int, int]) -> list[int]:
    """Every pid below `root` in a {pid: ppid} table, parents before children."""
    children: dict[int, list[int]] = {}
    for pid, ppid in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


# ---- processes -------------------------------------------------------------------------------


def _proc_table() -> dict[int, tuple[int, str]]:
    """{pid: (ppid, state)} of every process readable in /proc."""
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                pid, ppid, state = parse_proc_stat((entry / "stat").read_text())
            except (OSError, ValueError, IndexError):
                continue
            table[pid] = (ppid, state)
    return table


def _tree(root: int) -> list[int]:
    """Live descendants of `root`."""
    table = _proc_table()
    return [p for p in descendants(root, {k: v[0] for k, v in table.items()}) if table[p][1] != "Z"]


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie counts as gone)."""
    try:
        state = parse_proc_stat(Path(f"/proc/{pid}/stat").read_text())[2]
    except (OSError, ValueError, IndexError):
        return False
    return state != "Z"


def _signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _stop(pids: Sequence[int], grace: float = 8.0) -> list[int]:
    """SIGTERM, wait up to `grace` seconds, SIGKILL the rest; the pids still alive after that."""
    _signal_all([p for p in pids if _alive(p)], signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.2)
    _signal_all([p for p in pids if _alive(p)], signal.SIGKILL)
    time.sleep(0.5)
    return [p for p in pids if _alive(p)]


def _say(message: str) -> None:
    print(f"browser-test: {message}", flush=True)


# ---- installing --------------------------------------------------------------------------------


def _run_logged(
    cmd: Sequence[str], log: Path, timeout: float, env: Mapping[str, str] | None = None
) -> tuple[int | None, str]:
    """Run `cmd` with its output appended to `log`; (returncode, None on timeout; why it failed)."""
    with log.open("a") as fh:
        fh.write(f"$ {' '.join(cmd)}\n")
        fh.flush()
        start = fh.tell()
        try:
            proc = subprocess.run(
                cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout, env=env
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            fh.write(f"{exc}\n")
            return None, str(exc)
    with log.open(errors="replace") as fh:
        fh.seek(start)
        return proc.returncode, failure_reason(fh.read())


def ensure_playwright(log: Path) -> None:
    """Import Playwright, installing PLAYWRIGHT_REQUIREMENT into this interpreter's env when missing."""
    if importlib.util.find_spec("playwright") is not None:
        return
    _say(f"installing {PLAYWRIGHT_REQUIREMENT} into {sys.prefix}")
    cmd = [sys.executable, "-m", "pip", "install", "-q", PLAYWRIGHT_REQUIREMENT]
    rc, last = _run_logged(cmd, log, timeout=600)
    importlib.invalidate_caches()
    if rc != 0 or importlib.util.find_spec("playwright") is None:
        raise StageError("browser", f"pip install {PLAYWRIGHT_REQUIREMENT} failed: {last}")


def ensure_browser(log: Path, explicit: str | None, allow_install: bool) -> tuple[str | None, str]:
    """(executable or None for Playwright's own download, how it was found) or a 'browser' failure."""
    if explicit:
        if not (Path(explicit).is_file() or shutil.which(explicit)):
            raise StageError("browser", f"--browser {explicit} does not exist")
        return explicit, "given with --browser"
    found = find_browser(os.environ)
    if found:
        return found, f"found on this machine ({found})"
    if not allow_install:
        raise StageError("browser", "no Chromium on PATH and --no-install was given")
    reasons = []
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    if shutil.which("apt-get") and (not sudo or shutil.which("sudo")):
        _say("installing Debian's chromium with apt-get (about a minute)")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        rc, last = _run_logged([*sudo, "apt-get", "update", "-qq"], log, timeout=300, env=env)
        cmd = [*sudo, "apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium"]
        if rc == 0:
            rc, last = _run_logged(cmd, log, timeout=900, env=env)
        found = find_browser(os.environ)
        if rc == 0 and found:
            return found, f"installed with apt-get install chromium ({found})"
        reasons.append(f"apt-get: {last or f'exit {rc}'}")
    else:
        reasons.append("apt-get: not available" + ("" if not sudo else " without root or sudo"))
    _say("trying Playwright's own Chromium download")
    cmd = [sys.executable, "-m", "playwright", "install", "chromium"]
    rc, last = _run_logged(cmd, log, timeout=900)
    if rc == 0:
        return None, "Playwright's own Chromium (python -m playwright install chromium)"
    reasons.append(f"playwright install chromium: {last or f'exit {rc}'}")
    raise StageError("browser", "cannot install Chromium: " + "; ".join(reasons))


# ---- JupyterLab --------------------------------------------------------------------------------


@dataclass
class Lab:
    """A running JupyterLab server started by this script."""

    proc: subprocess.Popen
    port: int
    token: str
    log: Path
    kernels_seen: set[int] = field(default_factory=set)

    def api(self, path: str, method: str = "GET", timeout: float = 5.0):
        url = f"http://{HOST}:{self.port}{path}?token={self.token}"
        req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def kernel_ready(self) -> bool:
        """One kernel, idle, with the browser connected to it (before that, Run All asks for a kernel)."""
        try:
            kernels = self.api("/api/kernels")
        except (OSError, ValueError):
            return False
        return (
            len(kernels) == 1
            and kernels[0].get("execution_state") == "idle"
            and kernels[0].get("connections", 0) > 0
        )

    def remember_children(self) -> None:
        self.kernels_seen.update(_tree(self.proc.pid))


def start_lab(root_dir: Path, jupyter_dir: Path, timeout: float, attempts: int = 3) -> Lab:
    """Start JupyterLab and wait until its REST API answers; a 'lab' failure if it exits or hangs."""
    for name, settings in LAB_SETTINGS.items():
        path = jupyter_dir / "settings" / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings, indent=2))
    env = lab_env(os.environ, jupyter_dir, Path(sys.executable).parent)
    log = OUT_DIR / "lab.log"
    for attempt in range(1, attempts + 1):
        port, token = free_port(), secrets.token_hex(16)
        cmd = lab_command(sys.executable, port, token, root_dir, as_root=os.geteuid() == 0)
        with log.open("w") as fh:
            proc = subprocess.Popen(
                cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True, cwd=REPO_ROOT,
            )  # fmt: skip
        lab = Lab(proc, port, token, log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            try:
                lab.api("/api/status", timeout=2)
                _say(f"JupyterLab up on http://{HOST}:{port}/ (pid {proc.pid})")
                return lab
            except (OSError, ValueError):
                time.sleep(0.5)
        else:
            stop_lab(lab)
            raise StageError("lab", f"JupyterLab did not answer within {timeout:g} s")
        text = log.read_text(errors="replace")
        if "already in use" in text and attempt < attempts:
            continue  # someone took the free port between our check and Lab's bind
        raise StageError("lab", f"JupyterLab exited with code {proc.returncode}: {last_line(text)}")
    raise AssertionError("unreachable")


def stop_lab(lab: Lab) -> list[int]:
    """Shut Lab down (its API, then its process group and every process it started); survivors' pids."""
    lab.remember_children()
    try:
        lab.api("/api/shutdown", method="POST", timeout=5)
    except (OSError, ValueError):
        pass
    try:
        lab.proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(lab.proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    survivors = _stop([lab.proc.pid, *sorted(lab.kernels_seen)])
    try:
        lab.proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    return survivors


# ---- the browser ------------------------------------------------------------------------------

_CELLS_JS = """() => Array.from(document.querySelectorAll('.jp-NotebookPanel .jp-CodeCell')).map(c => ({
  prompt: (c.querySelector('.jp-InputPrompt') || {}).textContent || '',
  stderr: Array.from(c.querySelectorAll('[data-mime-type="application/vnd.jupyter.stderr"]')).map(e => e.innerText),
  outputs: c.querySelectorAll('.jp-OutputArea-output').length,
  images: c.querySelectorAll('.jp-OutputArea-output img').length,
  text: Array.from(c.querySelectorAll('.jp-OutputArea-output')).map(e => e.innerText).join('').trim().length,
}))"""
_STATUS_JS = """() => { const e = document.querySelector('.jp-NotebookPanel .jp-Notebook-ExecutionIndicator');
  return e ? e.getAttribute('data-status') : null; }"""


def _wait(what: str, check: Callable[[], object], timeout: float, interval: float = 0.5):
    """Poll `check` until it returns something truthy; a 'timeout' failure naming `what` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise StageError("timeout", f"{what} did not happen within {timeout:.0f} s")
        time.sleep(interval)


def _accept_kernel_dialog(page) -> None:
    """Accept Lab's "Select Kernel" dialog (its default is the venv's python3) if it is open."""
    dialog = page.locator(".jp-Dialog")
    if dialog.count() and "Select Kernel" in dialog.first.inner_text():
        dialog.first.locator(".jp-mod-accept").first.click()


def drive(page, lab: Lab, name: str, run_timeout: float) -> str:
    """Open notebook `name`, Run All, check outputs and the explorer; a one-line summary."""
    ms = 1000.0
    page.set_default_timeout(60 * ms)
    page.goto(
        notebook_url(lab.port, name, lab.token), wait_until="domcontentloaded", timeout=120 * ms
    )
    try:
        page.wait_for_selector(".jp-NotebookPanel .jp-CodeCell", timeout=120 * ms)
    except Exception as exc:  # Playwright's TimeoutError
        page.screenshot(path=str(OUT_DIR / "lab.png"))
        raise StageError("timeout", f"notebook {name} did not open in Lab: {exc}") from exc
    _wait(
        "the notebook's kernel starting",
        lambda: lab.kernel_ready() and page.evaluate(_STATUS_JS) == "idle",
        120,
    )
    lab.remember_children()

    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).first.click()
    # Run → Run All Cells: `runmenu:run-all` in Lab 4, `notebook:run-all-cells` before.
    page.locator(
        '.lm-Menu-item[data-command="runmenu:run-all"], .lm-Menu-item[data-command="notebook:run-all-cells"]'
    ).first.click()
    t0 = time.monotonic()
    polls: list[bool] = []

    def finished() -> bool:
        _accept_kernel_dialog(page)
        prompts = [c["prompt"] for c in page.evaluate(_CELLS_JS)]
        polls.append(run_finished(prompts, page.evaluate(_STATUS_JS)))
        return len(polls) >= 3 and all(polls[-3:])  # idle on three polls in a row

    try:
        _wait("Run All Cells finishing", finished, run_timeout)
    except StageError:
        page.screenshot(path=str(OUT_DIR / "lab.png"))
        raise
    seconds = time.monotonic() - t0
    lab.remember_children()
    cells = page.evaluate(_CELLS_JS)
    for i, cell in enumerate(cells, 1):
        errors = error_lines(cell["stderr"])
        if errors:
            page.screenshot(path=str(OUT_DIR / "lab.png"))
            raise StageError("error-output", f"code cell {i} of {name}: {errors[0]}")
    skipped = [i for i, c in enumerate(cells, 1) if prompt_state(c["prompt"]) != "done"]
    if skipped:
        raise StageError("outputs", f"code cells {skipped} of {name} did not run")
    with_output = [c for c in cells if c["outputs"] and (c["images"] or c["text"])]
    if not with_output:
        raise StageError("outputs", f"no code cell of {name} rendered an output")
    _say(f"ran {len(cells)} code cells in {seconds:.1f} s, {len(with_output)} with rendered output")

    explorer = page.locator(".workbook-explorer").first
    if page.locator(".workbook-explorer").count() == 0:
        page.screenshot(path=str(OUT_DIR / "lab.png"))
        raise StageError("explorer", f"no .workbook-explorer in the outputs of {name}")
    explorer.scroll_into_view_if_needed()
    page.screenshot(path=str(OUT_DIR / "lab.png"))
    result = explorer.locator(".workbook-explorer-result").first
    control = explorer.locator(".workbook-explorer-control").first
    handle = control.locator(".noUi-handle").first
    readout = control.locator(".widget-readout").first
    if explorer.locator(".workbook-explorer-result").count() == 0 or handle.count() == 0:
        raise StageError("explorer", "the explorer has no result or no slider control")
    before = result.inner_text()

    def value() -> float:
        return float(handle.get_attribute("aria-valuenow"))

    start = value()
    low, high = (
        float(handle.get_attribute("aria-valuemin")),
        float(handle.get_attribute("aria-valuemax")),
    )
    key = slider_key(start, low, high)
    if not key:
        raise StageError("slider", f"the slider's range [{low}, {high}] has one value")

    def shown() -> str:
        return readout.inner_text().strip() if readout.count() else str(value())

    shown_before = shown()
    handle.focus()
    for _ in range(10):  # a few steps, more when a step is below the readout's precision
        handle.press(key)
        time.sleep(0.2)
        if value() != start or shown() != shown_before:
            break
    moved = value()
    if moved == start and shown() == shown_before:
        raise StageError("slider", f"{key} on the slider left it at {shown_before}")
    try:
        after = _wait(
            "the explorer's result changing", lambda: (t := result.inner_text()) != before and t, 30
        )
    except StageError as exc:
        page.screenshot(path=str(OUT_DIR / "lab-after-slider.png"))
        raise StageError(
            "slider",
            f"moving the slider {shown_before} -> {shown()} left the result at {' '.join(before.split())!r}",
        ) from exc
    page.screenshot(path=str(OUT_DIR / "lab-after-slider.png"))
    short = lambda s: " ".join(s.split())[:80]  # noqa: E731
    return f"slider {shown_before} -> {shown()}: result {short(before)!r} -> {short(after)!r}"


# ---- main -------------------------------------------------------------------------------------


def _on_signal(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument(
        "--notebook", type=Path, help="notebook to open (default: the first in notebooks/, 01)"
    )
    parser.add_argument(
        "--browser",
        help=f"Chromium executable (default: ${BROWSER_ENV_VAR}, else chromium on PATH)",
    )
    parser.add_argument(
        "--no-install", action="store_true", help="fail instead of installing a missing browser"
    )
    parser.add_argument(
        "--run-timeout", type=float, default=600, help="seconds for Run All (default 600)"
    )
    parser.add_argument(
        "--lab-timeout", type=float, default=120, help="seconds for Lab to start (default 120)"
    )
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGHUP, _on_signal)

    t0 = time.monotonic()
    shutil.rmtree(OUT_DIR, ignore_errors=True)
    OUT_DIR.mkdir(parents=True)
    install_log = OUT_DIR / "install.log"
    lab: Lab | None = None
    code, summary = 0, ""
    try:
        first = min((REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"), default=None)
        notebook = (args.notebook or first or REPO_ROOT / "notebooks").resolve()
        if not notebook.is_file():
            raise StageError("setup", f"no notebook {args.notebook or notebook}")
        ensure_playwright(install_log)  # first: its own Chromium download is the fallback
        executable, how = ensure_browser(install_log, args.browser, not args.no_install)
        _say(f"browser: {how}")
        # A copy of the notebooks' folder: Lab may save what it opens; the committed files stay clean.
        root = OUT_DIR / "notebooks"
        shutil.copytree(notebook.parent, root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        if not (root / notebook.name).is_file():
            shutil.copy2(notebook, root / notebook.name)
        lab = start_lab(root, OUT_DIR / "jupyter", args.lab_timeout)

        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import TimeoutError as PlaywrightTimeout
        from playwright.sync_api import sync_playwright

        with sync_playwright() as pw:
            try:
                browser = pw.chromium.launch(
                    executable_path=executable, headless=True, timeout=120_000,
                    args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
                )  # fmt: skip
            except PlaywrightError as exc:
                raise StageError(
                    "browser", f"Chromium did not start: {last_line(str(exc))}"
                ) from exc
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                summary = drive(page, lab, notebook.name, args.run_timeout)
            except PlaywrightError as exc:  # its TimeoutError included: a wait that ran out
                stage = "timeout" if isinstance(exc, PlaywrightTimeout) else "browser"
                raise StageError(stage, f"{type(exc).__name__}: {exc}") from exc
            finally:
                browser.close()
    except StageError as failure:
        print(failure.line(), flush=True)
        code = failure.exit_code
    except Exception as exc:  # a bug or a surprise in the page: still one line, still cleaned up
        print(one_line("internal", f"{type(exc).__name__}: {exc}"), flush=True)
        code = 1
    except KeyboardInterrupt as exc:
        print(one_line("interrupted", f"{exc or 'Ctrl-C'}; stopping what it started"), flush=True)
        code = 130
    finally:
        survivors = stop_lab(lab) if lab else []
        survivors += _stop(_tree(os.getpid()))  # the Playwright driver and browser, if any remain
        if survivors:
            print(one_line("cleanup", f"processes left running: {survivors}", HINTS["cleanup"]))
            code = code or EXIT_CODES["cleanup"]
        elif lab:
            _say("stopped JupyterLab, its kernels and the browser; no process left")
    if code == 0:
        _say(
            f"ok in {time.monotonic() - t0:.0f} s: {summary}; screenshots in {OUT_DIR.relative_to(REPO_ROOT)}/"
        )
    return code


if __name__ == "__main__":
    sys.exit(main())
