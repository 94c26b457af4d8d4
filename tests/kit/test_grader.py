"""kit.grader (make check-exercises): the reference solutions pass every check, the
starters and typical wrong answers fail with a one-line hint that points at the mistake."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from helpers.common.paths import REPO_ROOT
from kit import grader


@pytest.fixture(scope="module")
def tiny(_tiny_pair_source) -> grader._TinyPair:
    return grader._TinyPair(_tiny_pair_source.verifier, _tiny_pair_source.drafter)


def test_the_reference_solutions_pass_every_check(tiny: grader._TinyPair) -> None:
    results = grader._grade_all(None, tiny=tiny)
    assert results == {e.name: None for e in grader._EXERCISES}, results


def test_every_starter_fails_in_one_line(tiny: grader._TinyPair) -> None:
    results = grader._grade_all(grader._EXERCISES_DIR, tiny=tiny)
    assert set(results) == {e.name for e in grader._EXERCISES}
    for name, hint in results.items():
        assert hint is not None and "\n" not in hint and "NotImplementedError" in hint, (name, hint)


def test_the_starters_declare_the_reference_parameters() -> None:
    import inspect

    def params(fn) -> list[tuple[str, object]]:
        return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]

    for exercise in grader._EXERCISES:
        ref = grader._reference_functions(exercise)
        mine = grader._load_functions(exercise, grader._EXERCISES_DIR)
        for name in exercise.functions:
            assert params(getattr(mine, name)) == params(getattr(ref, name)), name


WRONG = {
    "accept_greedy": (
        """
        from helpers.eagle3 import decode

        def accept_greedy(drafts, targets):  # counts every match, not a prefix
            a = sum(d == t for d, t in zip(drafts, targets))
            return decode.Round(tuple(drafts), a, tuple(drafts[:a]) + (targets[a],))
        """,
        "first mismatch",
    ),
    "draft_step": (
        """
        import torch
        from helpers.eagle3 import drafter
        from helpers.eagle3.drafter import draft_step  # the step is right, draft() is not

        @torch.no_grad()
        def draft(pair, ids, aux, k):  # forgets d2t
            d, embed = pair.drafter, pair.verifier.get_input_embeddings()
            cache = drafter.KVCache(d)
            embeds = embed(torch.tensor([list(ids[1:])]))
            hidden = d.fc(aux[:, : len(ids) - 1])
            drafts = []
            for _ in range(k):
                logits, prenorm = draft_step(d, embeds, hidden, cache.attend)
                token = logits[:, -1:].argmax(-1)
                drafts.append(int(token))
                embeds, hidden = embed(token), prenorm[:, -1:]
            return drafts
        """,
        "d2t",
    ),
    "accept_sampled": (
        """
        import torch
        from helpers.eagle3 import decode

        def accept_sampled(drafts, probs, draft_probs=None, generator=None):
            for i, d in enumerate(drafts):  # on rejection, redraws from p (d included)
                if torch.rand((), generator=generator) < probs[i, d]:
                    continue
                t = int(torch.multinomial(probs[i], 1, generator=generator))
                return decode.Round(tuple(drafts), i, tuple(drafts[:i]) + (t,))
            t = int(torch.multinomial(probs[len(drafts)], 1, generator=generator))
            return decode.Round(tuple(drafts), len(drafts), tuple(drafts) + (t,))
        """,
        "differ from vLLM's rejection sampler",
    ),
    "ttt_loss": (
        """
        import torch
        from helpers.eagle3 import drafter, taps

        def ttt_loss(d, verifier, x, aux_layers, steps, decay=0.8):  # targets one position late
            aux, vlogits = taps.verifier_taps(verifier, x, aux_layers)
            answers = vlogits.argmax(-1)
            vlogits = d.draft_scores(vlogits)
            embed = verifier.get_input_embeddings()
            with torch.no_grad():
                first = embed(torch.cat([x[:, 1:], torch.zeros_like(x[:, :1])], 1))
            logits = drafter.draft_chain(d, first, aux, steps, drafter.teacher_forced(embed, x))
            loss, agree = torch.zeros(()), []
            for j, lg in enumerate(logits):
                n = x.shape[1] - 3 - j
                target = vlogits[:, 2 + j : 2 + j + n]
                logp = lg[:, :n].log_softmax(-1)
                loss = loss + decay**j * -(target.softmax(-1) * logp).sum(-1).mean()
                drafted = d.target_ids(lg[:, :n].argmax(-1))
                agree.append((drafted == answers[:, 2 + j : 2 + j + n]).float().mean().item())
            return loss, agree
        """,
        "t + 1",
    ),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_a_typical_mistake_gets_its_hint(name: str, tmp_path: Path, tiny) -> None:
    code, expected = WRONG[name]
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(code))
    hint = grader._grade_all(tmp_path, [name], tiny)[name]
    assert hint is not None and "\n" not in hint and expected in hint, hint


def test_a_file_that_does_not_import_is_one_line(tmp_path: Path, tiny) -> None:
    (tmp_path / "accept_greedy.py").write_text("def accept_greedy(:\n")
    hint = grader._grade_all(tmp_path, ["accept_greedy"], tiny)["accept_greedy"]
    assert hint.startswith("accept_greedy.py does not import: SyntaxError"), hint


def test_the_command_line_exits_1_on_the_starters_and_0_on_the_reference(capsys) -> None:
    assert grader.main(["--only", "accept_greedy"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("FAIL accept_greedy") and out[-1].startswith("0/1 exercises pass")
    assert grader.main(["--reference", "--only", "accept_greedy"]) == 0
    assert grader.main(["--only", "nope"]) == 2


@pytest.mark.whole_workbook
def test_the_notebooks_and_the_makefile_point_to_the_exercises() -> None:
    import nbformat

    from helpers.common.paths import NOTEBOOKS_DIR, REPO_ROOT

    text = "\n".join(
        c.source
        for nb in sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
        for c in nbformat.read(str(nb), as_version=4).cells
        if c.cell_type == "markdown"
    )
    for exercise in grader._EXERCISES:
        assert f"exercises/{exercise.file}" in text, exercise.file
    assert "make check-exercises" in text
    assert "check-exercises:" in (REPO_ROOT / "Makefile").read_text()


# --------------------------------------------------------------------------- a grader not fooled

#: A right answer to accept_greedy (the prefix rule, written out).
GOOD_ACCEPT_GREEDY = """
from helpers.eagle3 import decode

def accept_greedy(drafts, targets):
    a = 0
    while a < len(drafts) and drafts[a] == targets[a]:
        a += 1
    return decode.Round(tuple(drafts), a, tuple(drafts[:a]) + (targets[a],))
"""


def hang(pid_file: Path) -> str:
    """A learner's file that records its process id, then never returns from its import (asleep:
    a spinning loop hangs the same way and burned a core of make test for the whole limit)."""
    return (
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "while True:\n    time.sleep(1)\n"
    )


def write_exercises(folder: Path, files: dict[str, str]) -> Path:
    """A learner's folder holding `files` (exercise name -> source)."""
    folder.mkdir(exist_ok=True)
    for name, code in files.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(code))
    return folder


def grader_command(folder: Path, tiny: grader._TinyPair, *args: str) -> list[str]:
    """`python -m kit.grader FOLDER ARGS` on the test's tiny pair."""
    pair = ["--verifier-dir", str(tiny.verifier_dir), "--drafter-dir", str(tiny.drafter_dir)]
    return [sys.executable, "-m", "kit.grader", str(folder), *pair, *args]


def lines_of(out: str) -> dict[str, str]:
    """exercise name -> its line of the grader's table."""
    return {
        line.split()[1]: line for line in out.splitlines() if line[:4] in ("ok  ", "FAIL", "----")
    }


def is_gone(pid: int) -> bool:
    """True when no process has this id any more, or only a dead one not yet reaped (a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat[stat.rfind(")") + 2 :].startswith("Z")


def gone_within(pids: list[int], seconds: float) -> bool:
    """True once every one of pids is gone, polled for up to `seconds`."""
    deadline = time.monotonic() + seconds
    while not all(is_gone(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def kill_leftovers(pids: list[int]) -> None:
    """SIGKILL whatever of pids a failing test left running."""
    for pid in pids:
        if not is_gone(pid):
            os.kill(pid, signal.SIGKILL)


def default_signals() -> None:
    """In a child: the stop signals' default actions, as a program started from a terminal has."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def wait_for_pid(pid_file: Path, proc: subprocess.Popen, seconds: float = 120) -> int:
    """The pid a learner's file wrote into pid_file, once it is being graded."""
    deadline = time.monotonic() + seconds
    while not (pid_file.is_file() and pid_file.read_text().strip()):
        assert proc.poll() is None and time.monotonic() < deadline, "the exercise never started"
        time.sleep(0.05)
    return int(pid_file.read_text())


def test_a_hang_and_early_exits_fail_with_their_reason_and_the_rest_is_graded(
    tmp_path: Path, tiny
) -> None:
    pid_file = tmp_path / "hang.pid"
    folder = write_exercises(
        tmp_path / "mine",
        {
            "accept_greedy": GOOD_ACCEPT_GREEDY,
            "draft_step": hang(pid_file),
            "accept_sampled": "import sys\nsys.exit(0)\n",
            "ttt_loss": "import os\nos._exit(0)\n",
        },
    )
    limit = 20  # the good exercise takes ~6 s on 2 busy cores, start-up included
    done = subprocess.run(
        grader_command(folder, tiny, "--timeout", str(limit)),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    rows = lines_of(done.stdout)
    assert done.returncode == 1, done.stdout + done.stderr
    assert rows["accept_greedy"].startswith("ok  "), rows
    assert (
        rows["draft_step"].startswith("FAIL") and f"timed out after {limit} s" in rows["draft_step"]
    )
    assert "exits when imported (sys.exit(0))" in rows["accept_sampled"], rows
    assert "ended the grading" in rows["ttt_loss"] and "exited with code 0" in rows["ttt_loss"]
    assert done.stdout.splitlines()[-1].startswith("1/4 exercises pass"), done.stdout
    assert is_gone(int(pid_file.read_text())), "the endless loop was left running"


def test_exits_and_files_that_do_not_import_are_failures_in_one_line(tmp_path: Path, tiny) -> None:
    folder = write_exercises(
        tmp_path / "mine",
        {
            "accept_greedy": "import os\n\ndef accept_greedy(drafts, targets):\n    os._exit(0)\n",
            "draft_step": "def draft_step(:\n",
            "accept_sampled": "import no_such_module_of_the_workbook\n",
        },
    )
    only = ["--only", "accept_greedy", "--only", "draft_step", "--only", "accept_sampled"]
    done = subprocess.run(
        grader_command(folder, tiny, *only),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    rows = lines_of(done.stdout)
    assert done.returncode == 1, done.stdout + done.stderr
    assert all(row.startswith("FAIL") for row in rows.values()) and len(rows) == 3, rows
    assert "exited with code 0" in rows["accept_greedy"], rows
    assert "draft_step.py does not import: SyntaxError" in rows["draft_step"], rows
    assert "does not import: ModuleNotFoundError" in rows["accept_sampled"], rows
    assert done.stdout.splitlines()[-1].startswith("0/3 exercises pass"), done.stdout


@pytest.mark.parametrize("code", [0, 3, None])
def test_sys_exit_is_a_failure_whatever_its_code(tmp_path: Path, tiny, code: int | None) -> None:
    body = f"def accept_greedy(drafts, targets):\n    raise SystemExit({code})\n"
    (tmp_path / "accept_greedy.py").write_text(body)
    hint = grader._grade_all(tmp_path, ["accept_greedy"], tiny)["accept_greedy"]
    assert hint is not None and f"sys.exit({code!r})" in hint, hint
    (tmp_path / "accept_greedy.py").write_text(f"raise SystemExit({code})\n")
    hint = grader._grade_all(tmp_path, ["accept_greedy"], tiny)["accept_greedy"]
    assert hint is not None and "exits when imported" in hint, hint


def test_ctrl_c_prints_what_was_graded_and_exits_130(tmp_path: Path, tiny) -> None:
    pid_file = tmp_path / "hang.pid"
    folder = write_exercises(
        tmp_path / "mine", {"accept_greedy": GOOD_ACCEPT_GREEDY, "draft_step": hang(pid_file)}
    )
    proc = subprocess.Popen(
        grader_command(folder, tiny, "--timeout", "300"),
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as from a terminal
    )
    try:
        deadline = time.monotonic() + 120
        while not (pid_file.is_file() and pid_file.read_text()):  # draft_step is being graded
            assert proc.poll() is None and time.monotonic() < deadline, "draft_step never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    rows = lines_of(out)
    assert proc.returncode == 130, out
    assert rows["accept_greedy"].startswith("ok  "), out
    assert rows["draft_step"].startswith("----") and "not graded (interrupted)" in out, out
    assert "interrupted (Ctrl-C) after 1 of 4 exercises: 1/1 graded pass" in out, out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    assert is_gone(int(pid_file.read_text())), "the exercise being graded was left running"


@pytest.mark.parametrize(
    "flag, unit", [("--timeout", "seconds"), ("--memory-gib", "GiB")], ids=["timeout", "memory"]
)
def test_a_limit_that_is_not_positive_is_one_line(capsys, flag: str, unit: str) -> None:
    assert grader.main([flag, "0"]) == 2
    assert (
        capsys.readouterr().out.strip()
        == f"grader: {flag} must be a positive number of {unit}, not 0"
    )


# ---------------------------------------------------------------- nothing left running, any ending


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM], ids=["SIGHUP", "SIGTERM"])
def test_a_closed_terminal_or_sigterm_kills_the_grading_and_removes_its_folder(
    tmp_path: Path, tiny, sig: signal.Signals
) -> None:
    pid_file, temp = tmp_path / "hang.pid", tmp_path / "tmp"
    temp.mkdir()
    folder = write_exercises(tmp_path / "mine", {"draft_step": hang(pid_file)})
    proc = subprocess.Popen(
        grader_command(folder, tiny, "--only", "draft_step", "--timeout", "300"),
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "TMPDIR": str(temp)},
        preexec_fn=default_signals,
    )
    looping = []
    try:
        looping.append(wait_for_pid(pid_file, proc))
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 128 + sig, out
        assert f"stopped by {sig.name}" in out and "after 0 of 1 exercises" in out, out
        assert "Traceback" not in out, out
        assert is_gone(looping[0]), f"the endless loop was left running after {sig.name}"
        assert not list(temp.glob("grader-*")), f"the temporary folder was left after {sig.name}"
    finally:
        kill_leftovers(looping)
        proc.kill()  # a no-op once it has exited
        proc.communicate()


def test_the_grading_process_dies_with_a_killed_grader(tmp_path: Path, tiny) -> None:
    pid_file = tmp_path / "hang.pid"
    folder = write_exercises(tmp_path / "mine", {"draft_step": hang(pid_file)})
    proc = subprocess.Popen(
        grader_command(folder, tiny, "--only", "draft_step", "--timeout", "300"),
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(tmp_path)},  # SIGKILL leaves its folder: tmp_path's
    )
    looping = []
    try:
        looping.append(wait_for_pid(pid_file, proc))
        proc.kill()  # nothing can catch SIGKILL: the kernel's parent-death signal must act
        proc.wait(timeout=60)
        assert gone_within(looping, 10), "the endless loop outlived the grader's SIGKILL"
    finally:
        kill_leftovers(looping)
        proc.kill()
        proc.wait()


#: A right accept_greedy whose file, when imported, starts two background processes (one in
#: a process group of its own) that would outlive the grading, holding its output open, and
#: records their pids.
BACKGROUND = """
import subprocess, sys
from pathlib import Path

sleep = [sys.executable, "-c", "import time; time.sleep(600)"]
kids = [subprocess.Popen(sleep), subprocess.Popen(sleep, process_group=0)]
Path({pids!r}).write_text(" ".join(str(k.pid) for k in kids))
"""


def test_what_an_exercise_left_running_is_killed_when_it_is_graded(tmp_path: Path, tiny) -> None:
    pid_file = tmp_path / "kids.pid"
    code = BACKGROUND.format(pids=str(pid_file)) + GOOD_ACCEPT_GREEDY
    folder = write_exercises(tmp_path / "mine", {"accept_greedy": code})
    proc = subprocess.Popen(
        grader_command(folder, tiny, "--only", "accept_greedy"),
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,  # as `make check-exercises | grep ...`: EOF only once all are gone
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        out, _ = proc.communicate(timeout=90)
        assert proc.returncode == 0 and lines_of(out)["accept_greedy"].startswith("ok  "), out
        kids = [int(pid) for pid in pid_file.read_text().split()]
        assert len(kids) == 2 and all(is_gone(pid) for pid in kids), "background processes left"
    finally:
        kill_leftovers([int(p) for p in pid_file.read_text().split()] if pid_file.is_file() else [])
        proc.kill()
        proc.communicate()


def test_running_out_of_memory_is_named_with_the_cap(tmp_path: Path, tiny) -> None:
    folder = write_exercises(
        tmp_path / "mine",
        {
            "accept_greedy": "def accept_greedy(drafts, targets):\n    return bytearray(4 << 30)\n",
            "draft_step": "import torch\n\nx = torch.empty(4 << 30, dtype=torch.uint8)\n",
            "accept_sampled": (  # as the out-of-memory killer ends a process
                "import os, signal\n\n"
                "def accept_sampled(drafts, probs, draft_probs=None, generator=None):\n"
                "    os.kill(os.getpid(), signal.SIGKILL)\n"
            ),
        },
    )
    only = ["--only", "accept_greedy", "--only", "draft_step", "--only", "accept_sampled"]
    done = subprocess.run(
        grader_command(folder, tiny, "--memory-gib", "1.5", *only),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    rows = lines_of(done.stdout)
    assert done.returncode == 1 and len(rows) == 3, done.stdout + done.stderr
    cap = "under the grader's cap of 1.5 GiB per exercise, --memory-gib"
    assert f"your code ran out of memory (MemoryError {cap})" in rows["accept_greedy"], rows
    assert (
        f"draft_step.py ran out of memory when imported (RuntimeError {cap})" in rows["draft_step"]
    ), rows
    assert (
        "killed by SIGKILL, most likely by the system's out-of-memory killer"
        in rows["accept_sampled"]
        and "cap of 1.5 GiB per exercise (--memory-gib)" in rows["accept_sampled"]
    ), rows


def test_the_default_memory_cap_leaves_the_heaviest_reference_exercise_room(tiny) -> None:
    pair = ["--verifier-dir", str(tiny.verifier_dir), "--drafter-dir", str(tiny.drafter_dir)]
    done = subprocess.run(
        [sys.executable, "-m", "kit.grader", "--reference", "--only", "accept_sampled", *pair],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert lines_of(done.stdout)["accept_sampled"].startswith("ok  "), done.stdout
