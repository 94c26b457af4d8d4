"""`make doctor`: each check's verdict, every simulated problem as one line, the platform guard, the dev container.

Stage one runs here as `make doctor` runs it (a subprocess) against a fake .venv whose python is a
shell script, so the simulations (no venv, wrong Python, too little disk, no AVX2, macOS) take a
second each; the engine smoke test is mocked, except in the one `vllm`-marked test that runs the
whole doctor on this machine.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers.common import qwen_tokenizer
from helpers.common.counters import SpecCounters
from helpers.common.paths import REPO_ROOT
from helpers.engine.runs import CategoryRun
from kit import doctor
from kit import qwen_tokenizer as kit_qwen_tokenizer
from kit.doctor import _OK, _PROBLEM, _SKIPPED, _Row
from tests.support import load_script, run_module

#: Seconds the stage-one CLI may take against a fake .venv on a busy 2-core machine (~0.3 s idle).
STAGE_ONE_LIMIT = 20.0
#: The fake venv stage: one ok row between log lines.
FAKE_STAGE = 'echo "INFO vllm log noise"; echo \'@@doctor-row {"check": "packages", "status": "ok", "detail": "fake"}\''


def fake_python(path: Path, version: str = "3.11.7", stage: str = FAKE_STAGE) -> Path:
    """A shell script that answers the version query with `version` and `--stage venv` with `stage`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f'#!/bin/sh\ncase "$*" in\n  *--stage*) {stage} ;;\n  *) echo {version} ;;\nesac\n'
    )
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.fixture
def fake_venv(tmp_path: Path) -> Path:
    """A .venv whose python is a fake 3.11 that reports one ok row from the venv stage."""
    fake_python(tmp_path / "venv" / "bin" / "python")
    return tmp_path / "venv"


def run_doctor_cli(*args: str, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    """`python -m kit.doctor ARGS` as the Makefile runs it (PYTHONPATH=src); (result, seconds)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(doctor._ENV_PREFIX)}
    full_env.update({"PYTHONPATH": str(REPO_ROOT / "src"), **env})
    return run_module("kit.doctor", list(args), full_env, timeout=300)


def problem_lines(output: str) -> list[str]:
    """The table's PROBLEM lines."""
    return [line for line in output.splitlines() if line.split()[1:2] == [_PROBLEM]]


def assert_actionable(detail: str) -> None:
    """One line, one sentence ending in a full stop, with a what-to-do part after the colon."""
    assert "\n" not in detail and detail.endswith("."), detail
    assert ": " in detail and "Traceback" not in detail, detail


# --------------------------------------------------------------------------- the checks, one by one


def test_required_python_is_pyprojects_and_setup_envs() -> None:
    setup_env = load_script("setup_env")
    assert doctor._required_python() == setup_env.MIN_PYTHON == (3, 10)


def test_required_python_needs_the_line(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    with pytest.raises(ValueError, match="requires-python"):
        doctor._required_python(tmp_path / "pyproject.toml")


@pytest.mark.parametrize(
    ("system", "machine", "gpu", "status"),
    [
        ("Linux", "x86_64", False, _OK),
        ("Linux", "aarch64", True, _OK),
        ("Linux", "aarch64", False, _PROBLEM),
        ("Darwin", "arm64", False, _PROBLEM),
        ("Windows", "AMD64", False, _PROBLEM),
    ],
)
def test_platform(system: str, machine: str, gpu: bool, status: str) -> None:
    row = doctor._check_platform(system, machine, gpu)
    assert row.status == status, row
    if status == _PROBLEM:
        assert_actionable(row.detail)
        assert ".devcontainer/" in row.detail and "Linux x86-64" in row.detail


def test_the_doctor_counts_cores_with_envinfo(monkeypatch: pytest.MonkeyPatch) -> None:
    from helpers.common import envinfo

    monkeypatch.setattr(envinfo, "cpu_cores", lambda: 3)
    args = SimpleNamespace(assume_platform="", assume_no_avx2=False)
    assert doctor._machine(args)[4] == 3  # type: ignore[arg-type]


def test_cpu_needs_avx2_unless_a_gpu_runs_the_engine() -> None:
    assert doctor._check_cpu({"avx2", "avx512f"}, gpu=False).status == _OK
    slower = doctor._check_cpu({"avx2"}, gpu=False)
    assert slower.status == _OK and "slower" in slower.detail
    none = doctor._check_cpu({"sse4_2"}, gpu=False)
    assert none.status == _PROBLEM and "AVX2" in none.detail
    assert_actionable(none.detail)
    assert doctor._check_cpu({"sse4_2"}, gpu=True).status == _OK
    assert doctor._check_cpu(None, gpu=False).status == _SKIPPED


def test_memory_and_disk_thresholds(tmp_path: Path) -> None:
    assert doctor._check_memory(23.5).status == _OK
    low = doctor._check_memory(4.0)
    assert low.status == _PROBLEM and "8 GiB" in low.detail
    assert_actionable(low.detail)
    assert doctor._check_disk(tmp_path, 2.0, free_gib=70.0).status == _OK
    full = doctor._check_disk(tmp_path, 8.0, free_gib=3.5)
    assert full.status == _PROBLEM and "3.5 GiB" in full.detail and "8 GiB" in full.detail
    assert_actionable(full.detail)


def test_python_and_venv_versions() -> None:
    need = (3, 10)
    assert doctor._check_python("python3", need, (3, 11, 7)).status == _OK
    old = doctor._check_python("python3.8", need, (3, 8, 18))
    assert old.status == _PROBLEM and "3.8.18" in old.detail and "make venv PYTHON=" in old.detail
    gone = doctor._check_python("python9", need, "cannot run it (FileNotFoundError)")
    assert gone.status == _PROBLEM
    none = doctor._check_venv(Path(".venv"), need, None)
    assert none.status == _PROBLEM and "`make venv`" in none.detail
    broken = doctor._check_venv(
        Path(".venv"), need, "it exited with code 127 instead of printing its version"
    )
    assert broken.status == _PROBLEM and "rm -rf .venv" in broken.detail
    assert doctor._check_venv(Path(".venv"), need, (3, 9, 1)).status == _PROBLEM
    assert doctor._check_venv(Path(".venv"), need, (3, 11, 7)).status == _OK
    for row in (old, gone, none, broken):
        assert_actionable(row.detail)


def test_python_version_of_an_interpreter(tmp_path: Path) -> None:
    assert doctor._python_version(sys.executable) == tuple(sys.version_info[:3])
    assert doctor._python_version(str(fake_python(tmp_path / "py", "3.8.18"))) == (3, 8, 18)
    assert isinstance(doctor._python_version(str(tmp_path / "missing")), str)


def test_stage_one_parses_as_python_3_7() -> None:
    source = Path(doctor.__file__).read_text()
    ast.parse(source, feature_version=(3, 7))  # the system python3 runs it before .venv exists


# --------------------------------------------------------------------------- the venv stage


def test_parse_rows_reads_rows_between_log_lines() -> None:
    out = 'INFO noise\n@@doctor-row {"check": "a", "status": "ok", "detail": "d"}\n(EngineCore) @@doctor-row {"check": "b", "status": "PROBLEM", "detail": "x."}\n'
    assert doctor._parse_rows(out) == [_Row("a", _OK, "d"), _Row("b", _PROBLEM, "x.")]


def test_venv_stage_timeout_kills_its_process_group(tmp_path: Path) -> None:
    python = fake_python(
        tmp_path / "bin" / "python",
        stage=f"{FAKE_STAGE}; sleep 60 & echo $! > {tmp_path}/child; wait",
    )
    t0 = time.perf_counter()
    rows = doctor._run_venv_stage(
        python, "tiny", engine=True, timeout=2, log=tmp_path / "doctor.log"
    )
    assert time.perf_counter() - t0 < 30
    assert rows[0] == _Row("packages", _OK, "fake")
    assert (
        rows[-1].check == "engine"
        and rows[-1].status == _PROBLEM
        and "within 2 s" in rows[-1].detail
    )
    assert_actionable(rows[-1].detail)
    child = Path(f"/proc/{int((tmp_path / 'child').read_text())}/status")
    time.sleep(0.5)
    assert not child.exists() or "\tZ" in child.read_text(), (
        "the sleeping grandchild outlived its group"
    )
    assert "vllm log noise" in (tmp_path / "doctor.log").read_text()


def test_venv_stage_crash_is_one_line(tmp_path: Path) -> None:
    python = fake_python(tmp_path / "bin" / "python", stage="echo Segmentation fault; exit 139")
    rows = doctor._run_venv_stage(python, "tiny", engine=False, timeout=30)
    assert [r.status for r in rows] == [_PROBLEM]
    assert "exit 139" in rows[0].detail
    assert_actionable(rows[0].detail)


def test_stale_venv_is_a_problem_before_vllm_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = SimpleNamespace(
        STAMP_NAME=".workbook-stamp",
        choose_device=lambda env: "cpu",
        compute_stamp=lambda root, device: "new",
        stamp_is_current=lambda path, expected: False,
    )
    monkeypatch.setattr(doctor, "_load_setup_env", lambda: fake)
    row = doctor._packages_row()
    assert row.status == _PROBLEM and "`make venv`" in row.detail
    assert_actionable(row.detail)


def test_venv_stage_in_this_venv() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kit.doctor", "--stage", "venv", "--no-engine"],
        cwd=REPO_ROOT,
        env={**os.environ, "WORKBOOK_PROFILE": "tiny", "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    rows = doctor._parse_rows(done.stdout)
    assert done.returncode == 0, done.stderr[-2000:]
    built = all(
        qwen_tokenizer.status(f) is None
        for f in (qwen_tokenizer.TOKENIZER_DIR, kit_qwen_tokenizer.PADDED_DIR)
    )
    tokenizer = ("tokenizer", _OK if built else _PROBLEM)
    assert [(r.check, r.status) for r in rows] == [
        ("packages", _OK),
        tokenizer,
        ("preflight", _OK),
    ], rows


def test_tokenizer_row_missing_is_an_actionable_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(qwen_tokenizer, "TOKENIZER_DIR", tmp_path / "qwen3-tokenizer")
    row = doctor._tokenizer_row()
    assert row.check == "tokenizer" and row.status == _PROBLEM
    assert "is not built: `make venv` builds it" in row.detail and "toy tokenizer" in row.detail
    assert_actionable(row.detail)


@pytest.mark.usefixtures("qwen3_built")
def test_tokenizer_row_verifies_the_built_folders() -> None:
    row = doctor._tokenizer_row()
    assert row.status == _OK and "verified against qwen.tiktoken" in row.detail, row


@contextlib.contextmanager
def _fake_engine(**kwargs: object):
    """open_engine's stand-in: no vLLM."""
    yield object()


def _mock_engine(monkeypatch: pytest.MonkeyPatch, run: CategoryRun | Exception) -> None:
    """Replace the engine, the sampling params and the run of engine_row."""
    from helpers.engine import lifecycle, runs

    def fake_run(llm: object, prompts: list[str], params: object) -> CategoryRun:
        if isinstance(run, Exception):
            raise run
        assert len(prompts) == doctor._SMOKE_PROMPTS
        return run

    monkeypatch.setattr(lifecycle, "open_engine", _fake_engine)
    monkeypatch.setattr(runs, "sampling", lambda max_tokens: max_tokens)
    monkeypatch.setattr(runs, "run_prompts", fake_run)


def test_engine_row_ok(monkeypatch: pytest.MonkeyPatch) -> None:
    counters = SpecCounters(num_drafts=10, num_draft_tokens=30, num_accepted_tokens=24)
    _mock_engine(monkeypatch, CategoryRun([[1] * 16] * 4, ["x"] * 4, 0.5, counters))
    row = doctor._engine_row()
    assert row.status == _OK and "64 tokens" in row.detail and "tau 3.40" in row.detail, row


def test_engine_row_problems(monkeypatch: pytest.MonkeyPatch) -> None:
    _mock_engine(monkeypatch, CategoryRun([[1] * 16] * 4, ["x"] * 4, 0.5, SpecCounters()))
    idle = doctor._engine_row()
    assert idle.status == _PROBLEM and "drafter never proposed" in idle.detail
    _mock_engine(monkeypatch, RuntimeError("Engine core initialization failed\nsee above"))
    dead = doctor._engine_row()
    assert (
        dead.status == _PROBLEM and "RuntimeError: Engine core initialization failed" in dead.detail
    )
    for row in (idle, dead):
        assert_actionable(row.detail)


# --------------------------------------------------------------------------- the CLI, simulated problems


def test_all_ok_with_a_fake_venv(fake_venv: Path) -> None:
    done, seconds = run_doctor_cli(
        "--venv", str(fake_venv), "--min-free-gib", "0", "--min-ram-gib", "0"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("doctor: OK")
    assert "packages    ok       fake" in done.stdout
    assert seconds < STAGE_ONE_LIMIT


@pytest.mark.parametrize(
    ("args", "env", "check", "words"),
    [
        (["--venv", "{tmp}/no-venv"], {}, "venv", "`make venv`"),
        (["--python", "{py38}"], {}, "python", "3.8.18"),
        (["--min-free-gib", "900000"], {}, "disk", "900000 GiB"),
        ([], {"WORKBOOK_DOCTOR_MIN_FREE_GIB": "900000"}, "disk", "900000 GiB"),
        (["--assume-no-avx2"], {}, "cpu", "no AVX2"),
        ([], {"WORKBOOK_DOCTOR_ASSUME_NO_AVX2": "1"}, "cpu", "no AVX2"),
        (["--assume-platform", "Darwin/arm64"], {}, "platform", ".devcontainer/"),
    ],
)
def test_each_simulated_problem_is_one_line(
    tmp_path: Path, fake_venv: Path, args: list[str], env: dict[str, str], check: str, words: str
) -> None:
    py38 = fake_python(tmp_path / "python3.8", "3.8.18")
    args = [a.format(tmp=tmp_path, py38=py38) for a in args]
    base = ["--venv", str(fake_venv), "--min-ram-gib", "0"]
    if "--min-free-gib" not in args and "WORKBOOK_DOCTOR_MIN_FREE_GIB" not in env:
        base += ["--min-free-gib", "0"]
    done, seconds = run_doctor_cli(*base, *args, **env)
    problems = problem_lines(done.stdout)
    assert done.returncode == doctor._EXIT_FAIL, done.stdout + done.stderr
    assert len(problems) == 1 and problems[0].startswith(check), done.stdout
    assert words in problems[0], problems[0]
    assert_actionable(problems[0].split(_PROBLEM, 1)[1].strip())
    assert done.stdout.splitlines()[-1].startswith("doctor: 1 problem")
    assert "Traceback" not in done.stdout + done.stderr
    assert seconds < STAGE_ONE_LIMIT


def test_no_venv_skips_the_venv_stage(tmp_path: Path) -> None:
    done, _ = run_doctor_cli(
        "--venv", str(tmp_path / "none"), "--min-free-gib", "0", "--min-ram-gib", "0"
    )
    lines = done.stdout.splitlines()
    assert any(line.startswith("engine") and _SKIPPED in line for line in lines), lines
    assert not (tmp_path / "none").exists(), "the doctor must not create the venv"


def test_stage_one_imports_nothing_heavy(fake_venv: Path) -> None:
    code = (
        "import sys\nfrom kit import doctor\n"
        f"doctor.main(['--venv', {str(fake_venv)!r}, '--min-free-gib', '0', '--min-ram-gib', '0'])\n"
        "heavy = {'torch', 'vllm', 'transformers', 'huggingface_hub', 'numpy'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "src")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout


# --------------------------------------------------------------------------- Makefile and dev container


def make(*args: str) -> subprocess.CompletedProcess:
    """`make -n ARGS` in the repo (nothing runs), as a top-level make even under `make test`."""
    # An outer make (CI runs these tests through `make test`) exports MAKELEVEL and MAKEFLAGS,
    # which would make this one print "Entering directory" lines around its own output.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    return subprocess.run(
        ["make", "-n", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, env=env
    )


@pytest.mark.parametrize("target", ["venv", "run", "test", "lab", "prefetch"])
@pytest.mark.parametrize(
    "where", [("Darwin", "arm64"), ("Linux", "aarch64"), ("MINGW64_NT-10.0", "x86_64")]
)
def test_make_stops_off_linux_x86_64_in_one_line(target: str, where: tuple[str, str]) -> None:
    done = make(target, f"UNAME_S={where[0]}", f"UNAME_M={where[1]}")
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, lines
    assert ".devcontainer/" in lines[0] and "Linux x86-64" in lines[0], lines[0]


def test_make_help_doctor_and_the_override_work_everywhere() -> None:
    mac = ("UNAME_S=Darwin", "UNAME_M=arm64")
    assert make("help", *mac).returncode == 0
    doctor_cmd = make("doctor", *mac)
    assert doctor_cmd.returncode == 0 and "--assume-platform Darwin/arm64" in doctor_cmd.stdout
    assert "--assume-platform" not in make("doctor").stdout
    assert (
        make("venv", "UNAME_S=Linux", "UNAME_M=aarch64", "WORKBOOK_ALLOW_PLATFORM=1").returncode
        == 0
    )
    assert (
        "kit.prefetch --profile 'qwen3-30b-a3b'" in make("prefetch", "PROFILE=qwen3-30b-a3b").stdout
    )


def test_make_doctor_runs_on_the_system_python_before_the_venv() -> None:
    out = make("doctor").stdout
    assert "PYTHONPATH=src python3 -m kit.doctor" in out and ".venv/bin/python" not in out
    assert "setup_env.py" not in out, "make doctor must not create the venv"


def devcontainer() -> dict:
    """.devcontainer/devcontainer.json without its // comment lines (JSONC)."""
    text = (REPO_ROOT / ".devcontainer" / "devcontainer.json").read_text()
    return json.loads("\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("//")))


def test_devcontainer_is_linux_x86_64_set_up_by_make_venv() -> None:
    config = devcontainer()
    assert config["postCreateCommand"] == "make venv"  # what CI runs first (make test -> venv)
    assert "--platform=linux/amd64" in config["runArgs"]
    version = config["image"].split(":")[-1].split("-")[1]
    assert tuple(map(int, version.split("."))) >= doctor._required_python(), config["image"]
    assert int(config["hostRequirements"]["memory"].removesuffix("gb")) >= doctor._MIN_RAM_GIB


# --------------------------------------------------------------------------- the real thing


@pytest.mark.vllm
def test_doctor_passes_on_this_machine() -> None:
    done, seconds = run_doctor_cli(HF_HUB_OFFLINE="1", WORKBOOK_PROFILE="tiny")
    if not (REPO_ROOT / ".venv").is_dir():
        # Tests run from another environment (the GPU test stack on the lent H200 had none): the
        # doctor checks the .venv that `make venv` builds, so its one problem must be that.
        problems = [line for line in done.stdout.splitlines() if line.split()[1:2] == [_PROBLEM]]
        assert done.returncode == 2 and len(problems) == 1, done.stdout
        assert problems[0].startswith("venv"), done.stdout
        return
    assert done.returncode == 0, done.stdout + done.stderr
    engine = [line for line in done.stdout.splitlines() if line.startswith("engine")]
    assert engine and _OK in engine[0] and "tau" in engine[0], done.stdout
    assert seconds < doctor._ENGINE_TIMEOUT_S


# --------------------------------------------------------------------------- a path with a space


def test_a_path_with_a_space_is_a_problem_that_names_cause_and_fix() -> None:
    """A clone in "/home/a b/" passed `make venv`, preflight and "doctor: OK", then notebooks 02
    and 07 failed with torch inductor's CppCompileError (g++ and the libgomp LD_PRELOAD split at
    the space)."""
    repo = Path("/home/a b/eagle3-workbook")
    row = doctor._check_path(repo, repo / ".venv")
    assert row.check == "path" and row.status == _PROBLEM
    assert str(repo) in row.detail and "CppCompileError" in row.detail, row.detail
    assert "path without spaces" in row.detail and "make venv" in row.detail, row.detail
    assert_actionable(row.detail)
    assert doctor._check_path(Path("/home/ab/repo"), Path("/home/ab/repo/.venv")).status == _OK
    elsewhere = doctor._check_path(Path("/home/ab/repo"), Path("/opt/my envs/wb"))
    assert elsewhere.status == _PROBLEM and "/opt/my envs/wb" in elsewhere.detail


def test_a_venv_in_a_path_with_a_space_is_one_problem_line(tmp_path: Path) -> None:
    venv = tmp_path / "a b" / "venv"
    fake_python(venv / "bin" / "python")
    done, _ = run_doctor_cli("--venv", str(venv), "--min-free-gib", "0", "--min-ram-gib", "0")
    problems = problem_lines(done.stdout)
    assert done.returncode == doctor._EXIT_FAIL, done.stdout + done.stderr
    assert len(problems) == 1 and problems[0].startswith("path"), done.stdout


def test_the_venv_stages_preflight_does_not_repeat_the_path_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = tmp_path / "a b" / "venv"
    fake_python(venv / "bin" / "python")
    said = doctor.path_problem(REPO_ROOT, venv)
    assert said is not None
    stage = [_Row("preflight", _PROBLEM, f"tiny: {said}"), _Row("packages", _OK, "fake")]
    monkeypatch.setattr(doctor, "_run_venv_stage", lambda *args: stage)
    args = doctor._parse_args(["--venv", str(venv), "--min-free-gib", "0", "--min-ram-gib", "0"])
    rows = doctor._run_doctor(args)
    assert [r.check for r in rows if r.status == _PROBLEM] == ["path"], rows
