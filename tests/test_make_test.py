"""`make test` runs everything it ran one step at a time before, now in two lanes at once: every
notebook under nbval, and every test in pytest's testpaths (tests/ and the chapters' own; the
`vllm` selection and its complement) and every chapter dropped (kit.drop_check), each lane's processes with one OpenMP thread and vLLM's
engines left unpinned (docs/commands.md says why); the notebooks under the watchdog
(kit.nbval_watchdog). Under `make test` the two lanes share the notebooks (kit.nbval_queue): the
tests lane takes them from the end once its tests are done, so the lanes end together."""

from __future__ import annotations

import os
import re
import subprocess

from helpers.common.paths import REPO_ROOT

#: Where the tests live: tests/ and each chapter's own tests/ (pyproject's testpaths).
TESTPATHS = "tests src/chapters"


#: How `make test` wraps each lane's command (LANE_TAGS=1): pipefail before, its lane's tag after.
LANE_WRAP = re.compile(r"^set -o pipefail; (.*) 2>&1 \| sed -u 's/\^/\[(test-\w+)\] /'$")


def dry_run(*goals: str) -> list[str]:
    """The commands `make -n GOALS` would run (recursive makes print theirs too), each lane's
    command without the wrapping that names its lines."""
    done = run_make("-n", *goals)
    assert done.returncode == 0, done.stderr
    return [m[1] if (m := LANE_WRAP.match(line)) else line for line in done.stdout.splitlines()]


def test_under_make_test_each_lane_names_its_lines_and_keeps_its_failures() -> None:
    wrapped = [LANE_WRAP.match(line) for line in run_make("-n", "test").stdout.splitlines()]
    assert sorted({m[2] for m in wrapped if m}) == ["test-notebooks", "test-tests"]
    # the notebooks, and the tests lane's four (its three, then the notebooks from the end)
    assert sum(bool(m) for m in wrapped) == 5
    # a lane alone is not wrapped; wrapped, a failing command still fails make (pipefail)
    ok = run_make("-o", "venv", "test-notebooks", "VPY=echo", "LANE_TAGS=1")
    assert ok.returncode == 0 and "[test-notebooks] -m pytest --nbval-lax" in ok.stdout, ok
    failed = run_make("-o", "venv", "test-notebooks", "VPY=false", "LANE_TAGS=1")
    assert failed.returncode != 0, failed
    assert run_make("-o", "venv", "test-notebooks", "VPY=echo").stdout.startswith("echo -m pytest")


def run_make(*args: str) -> subprocess.CompletedProcess[str]:
    """make ARGS in the repo, its output captured; never as a sub-make of the make running these
    tests (that one's MAKEFLAGS would pass it LANE_TAGS=1 and its jobserver)."""
    outer = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "LANE_TAGS", "NBVAL_CLAIMS")
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k not in outer},
    )


def test_the_two_lanes_run_at_once_with_one_thread_each() -> None:
    lines = dry_run("test")
    lanes = [line for line in lines if "test-notebooks test-tests" in line]
    assert len(lanes) == 1, lines
    assert "-j 2" in lanes[0] and "OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1" in lanes[0], lanes
    assert "VLLM_CPU_OMP_THREADS_BIND=nobind" in lanes[0], lanes
    assert "PYTHONDONTWRITEBYTECODE= " in lanes[0], lanes  # the lanes write bytecode
    assert lines.index(lanes[0]) > max(i for i, line in enumerate(lines) if "ruff" in line)


def test_every_notebook_and_every_test_is_run() -> None:
    lines = dry_run("test")
    pytest_runs = [line.split(" -m pytest ", 1)[1] for line in lines if " -m pytest " in line]
    selections = {run for run in pytest_runs if run.startswith(f"{TESTPATHS} ")}
    assert any(run.startswith(f"{TESTPATHS} -m vllm") for run in selections), selections
    assert any(run.startswith(f'{TESTPATHS} -m "not vllm"') for run in selections), selections
    assert len(pytest_runs) == 2, pytest_runs  # the notebooks: through kit.nbval_queue, below
    listed = '", "'.join(TESTPATHS.split())
    assert f'testpaths = ["{listed}"]' in (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_under_make_test_the_lanes_share_the_notebooks_and_every_one_is_verified() -> None:
    lines = dry_run("test")
    on_disk = [f"notebooks/{p.name}" for p in sorted(REPO_ROOT.glob("notebooks/*.ipynb"))]
    queues = [
        line.split(" -m kit.nbval_queue ", 1)[1].split() for line in lines if "nbval_queue" in line
    ]
    claims = [q[q.index("--claims") + 1] for q in queues]
    assert len(queues) == 3 and len(set(claims)) == 1, queues  # both lanes, then --verify
    assert all(q[-len(on_disk) :] == on_disk for q in queues), queues
    (first, from_end, check) = (["--from-end" in q, "--verify" in q] for q in queues)
    assert first == [False, False] and from_end == [True, False] and check == [False, True]
    drop = next(i for i, line in enumerate(lines) if " -m kit.drop_check " in line)
    shared = [i for i, line in enumerate(lines) if "nbval_queue" in line]
    assert shared[1] > drop and shared[2] == max(shared), lines  # the tests lane's, after its drop
    assert lines.index(f"rm -rf {claims[0]} && mkdir -p {claims[0]}") < shared[0], lines  # emptied


def test_each_lane_runs_alone_too() -> None:
    lane = dry_run("test-notebooks")
    assert any("--nbval-lax" in line and line.endswith(" notebooks") for line in lane), lane
    assert not any("--nbval-lax" in line for line in dry_run("test-tests"))
    tests = [line for line in dry_run("test-tests") if " -m pytest " in line]
    selections = [line.split(" -m pytest ", 1)[1].split(" -n ")[0] for line in tests]
    assert [run.split(" --durations")[0] for run in selections] == [
        f"{TESTPATHS} -m vllm",
        f'{TESTPATHS} -m "not vllm"',
    ]


def test_the_tests_lane_drops_every_chapter_last() -> None:
    lane = dry_run("test-tests")
    drops = [i for i, line in enumerate(lane) if " -m kit.drop_check" in line]
    assert len(drops) == 1, lane
    assert drops[0] == len(lane) - 1, lane  # no chapter named: every one, each on its own
    assert lane[-1].split(" -m kit.drop_check ", 1)[1] == "--jobs 1 --no-trim", lane


def test_the_notebooks_run_under_the_watchdog() -> None:
    lane = [line for line in dry_run("test-notebooks") if "--nbval-lax" in line]
    assert len(lane) == 1 and "-p kit.nbval_watchdog" in lane[0], lane
