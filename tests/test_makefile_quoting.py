"""The Makefile hands PROFILE, EXERCISES and NOTEBOOKS to its commands as the words they are: a
value with a space, a quote, a `;` or a backquote reaches the command whole (NOTEBOOKS: each of
its words whole) and runs nothing else; GRADER_FLAGS reaches the grader as flags. Each target is
run for real, with `.venv/bin/python` replaced by a stub that records its arguments."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.common.paths import REPO_ROOT


def hostile(canary: Path) -> str:
    """A value a shell would split, and run the rest of, were it not quoted: each part touches
    `canary`. (No `$`: make itself expands that, before any shell.)"""
    return (
        f"my exercises; touch {canary} & touch {canary} | `touch {canary}` 'single' \"double\" "
        f"&& touch {canary}"
    )


def make(tmp_path: Path, *args: str) -> tuple[list[list[str]], str]:
    """Run `make ARGS` with a stub for the venv's python (and none for setup): the argument lists
    the stub got, one per command, and make's output."""
    calls = tmp_path / "calls.jsonl"
    stub = tmp_path / "python"
    stub.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"with open({str(calls)!r}, 'a') as f:\n    f.write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    stub.chmod(0o755)
    done = subprocess.run(
        ["make", "--no-print-directory", *args, "PYTHON=true", f"VPY={stub}"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = calls.read_text().splitlines() if calls.is_file() else []
    return [json.loads(line) for line in lines], done.stdout


@pytest.mark.parametrize(
    "goal, variable, command",
    [
        ("check-exercises", "EXERCISES", ["-m", "kit.grader"]),
        ("preflight", "PROFILE", ["-m", "kit.preflight", "--profile"]),
        ("prefetch", "PROFILE", ["-m", "kit.prefetch", "--profile"]),
    ],
)
def test_a_value_reaches_the_command_as_one_word_and_runs_nothing_else(
    tmp_path: Path, goal: str, variable: str, command: list[str]
) -> None:
    canary = tmp_path / "ran"
    value = hostile(canary)
    calls, _ = make(tmp_path, goal, f"{variable}={value}")
    assert calls[-1] == [*command, value], calls
    assert not canary.exists(), f"make {goal} ran part of {variable} as a command"


def test_the_dry_run_shows_the_value_as_one_word(tmp_path: Path) -> None:
    value = hostile(tmp_path / "ran")
    done = subprocess.run(
        ["make", "-n", "check-exercises", f"EXERCISES={value}"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    grader = [shlex.split(line) for line in done.stdout.splitlines() if "kit.grader" in line]
    assert len(grader) == 1 and grader[0][-1] == value, done.stdout


def test_notebooks_reach_the_runner_word_by_word_and_run_nothing_else(tmp_path: Path) -> None:
    canary = tmp_path / "ran"
    value = f"notebooks/01_intro.ipynb x.ipynb;touch`touch\t{canary}`"
    calls, _ = make(tmp_path, "run", f"NOTEBOOKS={value}")
    assert calls[-1] == ["-m", "kit.runner", *value.split()], calls
    assert not canary.exists(), "make run ran part of NOTEBOOKS as a command"


def test_the_help_line_shows_the_profile_and_runs_nothing(tmp_path: Path) -> None:
    canary = tmp_path / "ran"
    value = hostile(canary)
    _, out = make(tmp_path, "help", f"PROFILE={value}")
    assert f"(PROFILE={value})" in out.splitlines()[0], out
    assert not canary.exists(), "make help ran part of PROFILE as a command"


@pytest.mark.parametrize(
    "args, words",
    [
        ([], ["exercises"]),
        (["EXERCISES="], []),  # the grader's own default, exercises/: never the reference
        (["EXERCISES=reference"], ["--reference"]),
        (
            ["GRADER_FLAGS=--timeout 300 --memory-gib 4", "EXERCISES=mine"],
            ["--timeout", "300", "--memory-gib", "4", "mine"],
        ),
    ],
    ids=["default", "empty", "reference", "grader-flags"],
)
def test_check_exercises_passes_the_folder_and_the_grader_flags(
    tmp_path: Path, args: list[str], words: list[str]
) -> None:
    calls, _ = make(tmp_path, "check-exercises", *args)
    assert calls == [["-m", "kit.grader", *words]], calls
