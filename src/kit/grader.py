"""Graded exercises: you write the algorithm, and the checks that hold the reference grade it.

    python -m kit.grader [FOLDER]       (make check-exercises; FOLDER: exercises/)
    python -m kit.grader --reference    (the library's own solutions: all must pass)

Each exercise is a starter file in `exercises/` with the function's signature and docstring and a
body that raises NotImplementedError; the learner writes the body. The grader imports the file,
runs the exercise's checks in order against its functions and prints one line per exercise: `ok`,
or the first failed check's one-line hint. The same checks run against the reference solutions in
CI (tests/kit/test_grader.py), so a check fails only on code that behaves differently.

Each exercise is graded in its own Python process, so a learner's file cannot take the grader
with it: past `--timeout` seconds it is "timed out" and killed, and the next one is graded; an
exit (sys.exit of any code, os._exit, a crash) before its checks finished is a failure with its
reason, never a pass. Each grading process may allocate `--memory-gib` GiB (RLIMIT_DATA): past
that its code gets MemoryError, reported as memory, as is a process the out-of-memory killer ends
(SIGKILL). However grading ends (a pass, a failure, a timeout, Ctrl-C, SIGTERM, a closed terminal:
SIGHUP), the grading process's whole session is killed, so nothing the learner's code started is
left running, and its temporary folder is removed; should the grader itself be killed (SIGKILL),
the grading process dies with it (Linux's parent-death signal). Ctrl-C prints what was graded so
far and exits 130; SIGTERM and SIGHUP exit 143 and 129.

| file | write | taught in | reference |
|---|---|---|---|
| accept_greedy.py | the greedy accept rule | 03 §4 | decode.accept_greedy |
| draft_step.py | one EAGLE-3 draft step, and k of them | 03 §4 | drafter.draft_step, decode.draft |
| accept_sampled.py | rejection sampling, T > 0 | 03 ex. 8 | decode.accept_sampled, vLLM's sampler |
| ttt_loss.py | the training-time-test loss | 05 §4 | train.ttt_loss |

The checks use the tiny pair in data/ (the verifier in transformers, float32, on the CPU);
accept_sampled is compared in distribution with vLLM's rejection sampler (`kit.sampler`)
by a permutation test on a few thousand rounds, which also tells apart the usual mistakes.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib.util
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from helpers.common.paths import REPO_ROOT

__all__ = [
    "main",
]

#: Where the learner's files are (the starters ship there).
_EXERCISES_DIR = REPO_ROOT / "exercises"
#: Seconds one exercise may take (`--timeout`) before it counts as an endless loop: the slowest
#: reference exercise (accept_sampled: vLLM's sampler, 6000 rounds) takes 10 s in its own process
#: on 2 busy cores, start-up included; 12 times that leaves room for a slow laptop.
_TIMEOUT_S = 120.0
#: GiB of data one exercise's process may allocate (`--memory-gib`, its RLIMIT_DATA): the
#: reference exercises use at most 0.44 GiB (accept_sampled, vLLM imported; here, 2026-12-06), so
#: an allocation that grows without end meets MemoryError long before it starves the machine.
#: RLIMIT_DATA, not RLIMIT_AS: address space that is reserved but not written (torch's thread
#: arenas, CUDA's mappings, mapped files) does not count.
_MEMORY_GIB = 8.0
#: The signals that stop the grader: Ctrl-C, `kill`, and a closed terminal.
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: Linux's prctl option that sends a process a signal when its parent ends (<linux/prctl.h>).
_PR_SET_PDEATHSIG = 1
#: Seconds the grader waits for a grading session's processes to die after SIGKILL.
_KILL_WAIT_S = 5.0


class _Hint(Exception):  # noqa: N818 - a hint to the learner, not an error of the grader
    """A failed check: one line saying what to look at."""


def _check(condition: bool, hint: str) -> None:
    """Raise Hint(hint) unless condition holds."""
    if not condition:
        raise _Hint(hint)


@dataclass
class _TinyPair:
    """The tiny verifier and drafter, loaded once for the checks that need them."""

    verifier_dir: Path | None = None
    drafter_dir: Path | None = None
    _pair: Any = field(default=None, repr=False)

    def pair(self) -> Any:
        """A decode.ReferencePair of the tiny pair (no tokenizer, no stop ids)."""
        if self._pair is None:
            from helpers.common.profiles import load_profile
            from helpers.eagle3 import decode
            from helpers.eagle3.checkpoint import load_drafter, load_verifier
            from helpers.eagle3.taps import drafter_aux_layer_ids

            tiny = load_profile("tiny")
            vdir = Path(self.verifier_dir or tiny.verifier_path())
            ddir = Path(self.drafter_dir or tiny.drafter_path())
            _check(
                (vdir / "model.safetensors").is_file() and (ddir / "model.safetensors").is_file(),
                f"the checks need the tiny pair in {vdir.parent}: run `make tiny-models`",
            )
            d, config = load_drafter(ddir)
            verifier = load_verifier(vdir, device="cpu")
            self._pair = decode.ReferencePair(
                verifier, d, list(drafter_aux_layer_ids(config)), set(), None
            )
        return self._pair

    def reduced(self, seed: int = 0) -> Any:
        """The same verifier with a fresh drafter over a reduced draft vocabulary (every 3rd id)."""
        from helpers.eagle3 import decode, train

        pair = self.pair()
        keep = list(range(1, pair.verifier.config.vocab_size, 3))
        d = train.new_drafter(pair.verifier, pair.aux_layers, seed, keep=keep).eval()
        return decode.ReferencePair(pair.verifier, d, pair.aux_layers, set(), None)


# ------------------------------------------------------------------------------------ the checks


def _accept_greedy(f: SimpleNamespace, _tiny: _TinyPair) -> None:
    from helpers.eagle3 import decode

    r = f.accept_greedy([5, 6, 7], [5, 9, 7, 8])
    _check(isinstance(r, decode.Round), "return a decode.Round(drafted, accepted, emitted)")
    _check(r.drafted == (5, 6, 7), "Round.drafted is the k drafts, as a tuple")
    _check(
        f.accept_greedy([5, 6, 7], [5, 6, 7, 8]) == decode.Round((5, 6, 7), 3, (5, 6, 7, 8)),
        "when all k drafts equal the verifier's argmax, accept all k and add the verifier's "
        "(k+1)-th token (the bonus)",
    )
    _check(
        r == decode.Round((5, 6, 7), 1, (5, 9)),
        "stop at the first mismatch and emit the verifier's token there (the correction)",
    )
    _check(
        f.accept_greedy([4, 6, 7], [5, 6, 7, 8]) == decode.Round((4, 6, 7), 0, (5,)),
        "acceptance is a prefix: after the first mismatch, later matches do not count",
    )
    rng = random.Random(0)
    for _ in range(300):
        k = rng.randint(1, 6)
        drafts = [rng.randint(0, 3) for _ in range(k)]
        targets = [rng.randint(0, 3) for _ in range(k + 1)]
        _check(
            f.accept_greedy(drafts, targets) == decode.accept_greedy(drafts, targets),
            f"differs from the rule on drafts {drafts}, targets {targets}",
        )


def _draft_step(f: SimpleNamespace, tiny: _TinyPair) -> None:
    import torch

    from helpers.eagle3 import decode, drafter

    torch.manual_seed(0)
    shape = drafter.DrafterShape(
        hidden_size=32,
        vocab_size=50,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        intermediate_size=64,
    )
    d = drafter.Eagle3Drafter(shape).eval()
    embeds, hidden = torch.randn(1, 5, 32), torch.randn(1, 5, 32)
    with torch.no_grad():
        out = f.draft_step(d, embeds, hidden, drafter.KVCache(d).attend)
        want_logits, want_prenorm = drafter.draft_step(d, embeds, hidden, drafter.KVCache(d).attend)
    _check(isinstance(out, tuple) and len(out) == 2, "draft_step returns (logits, prenorm)")
    logits, prenorm = out
    _check(
        tuple(logits.shape) == (1, 5, 50) and tuple(prenorm.shape) == (1, 5, 32),
        "shapes: logits [B, T, draft vocabulary], prenorm [B, T, H]",
    )
    _check(
        torch.allclose(prenorm, want_prenorm, atol=1e-5),
        "the pre-norm output: hidden_norm(hidden) is both the hidden half of [embed ‖ hidden] and "
        "the residual; attention output + residual, then + the MLP of post_attention_layernorm",
    )
    _check(torch.allclose(logits, want_logits, atol=1e-5), "the logits are lm_head(norm(prenorm))")

    pair = tiny.pair()
    for ids in ([1, 17, 33, 250, 9], [5, 40, 41, 42, 43, 44, 45, 46]):
        _, aux = decode.verify(pair, ids)
        _check(
            f.draft(pair, ids, aux, 1) == decode.draft(pair, ids, aux, 1),
            "the first draft: fc over the taps of positions 0..root (aux[:, : len(ids) - 1]) "
            "and the embeddings of ids[1:] (the input shifted by one), the last position's argmax",
        )
        _check(
            f.draft(pair, ids, aux, 4) == decode.draft(pair, ids, aux, 4),
            "later drafts: feed back the pre-norm output of the last position and the embedding "
            "of the token just drafted, through the same KVCache",
        )
    reduced = tiny.reduced()
    ids = [1, 17, 33, 250, 9]
    _, aux = decode.verify(reduced, ids)
    _check(
        f.draft(reduced, ids, aux, 3) == decode.draft(reduced, ids, aux, 3),
        "with a draft vocabulary, map each drafted id to a verifier id (d.target_ids: d2t) "
        "before you keep it and embed it",
    )


def _accept_sampled(f: SimpleNamespace, _tiny: _TinyPair) -> None:
    import torch

    from helpers.analytics.permutation import permutation_test
    from helpers.eagle3 import decode
    from kit.sampler import vllm_rounds

    targets = [5, 9, 7, 8]
    one_hot = torch.nn.functional.one_hot(torch.tensor(targets), 12).float()
    for drafts in ([5, 9, 7], [5, 6, 7], [4, 9, 7]):
        _check(
            f.accept_sampled(drafts, one_hot) == decode.accept_greedy(drafts, targets),
            "with a one-hot p (T -> 0) the rule must be the greedy one: accept d with "
            "probability p(d), and on rejection draw from p without d",
        )
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05], [0.2, 0.6, 0.1, 0.1], [0.1, 0.1, 0.3, 0.5]])
    g = torch.Generator().manual_seed(0)
    ours = [f.accept_sampled([0, 1], probs, generator=g) for _ in range(3000)]
    _check(
        all(r.emitted[: r.accepted] == (0, 1)[: r.accepted] for r in ours)
        and all(len(r.emitted) == r.accepted + 1 for r in ours),
        "emit the accepted drafts, then exactly one token (a replacement or the bonus)",
    )
    tvd, p = permutation_test(vllm_rounds([0, 1], probs, 3000), [r.emitted for r in ours])
    _check(
        p >= 0.001,
        f"your rounds differ from vLLM's rejection sampler (TVD {tvd:.3f}, p {p:.4f}): accept "
        "d with probability p(d), on rejection draw from p with d removed, after k accepted "
        "drafts a bonus from p_k",
    )
    q = torch.tensor([[0.7, 0.1, 0.1, 0.1], [0.1, 0.7, 0.1, 0.1]])
    ours_q = [f.accept_sampled([0, 1], probs, q, g).emitted for _ in range(3000)]
    tvd, p = permutation_test(vllm_rounds([0, 1], probs, 3000, draft_probs=q, seed=1), ours_q)
    _check(
        p >= 0.001,
        f"with draft probabilities q your rounds differ from vLLM's (TVD {tvd:.3f}, p {p:.4f}): "
        "accept with probability min(1, p(d) / q(d)), on rejection draw from max(p - q, 0)",
    )


def _ttt_loss(f: SimpleNamespace, tiny: _TinyPair) -> None:
    import torch

    from helpers.eagle3 import train

    pair = tiny.pair()
    verifier, aux = pair.verifier, pair.aux_layers
    x = torch.randint(
        0, verifier.config.vocab_size, (2, 40), generator=torch.Generator().manual_seed(0)
    )
    d = train.new_drafter(verifier, aux, seed=0)
    out = f.ttt_loss(d, verifier, x, aux, 1)
    _check(
        isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], torch.Tensor),
        "ttt_loss returns (loss tensor, [top-1 agreement of each step])",
    )
    loss, agree = out
    _check(
        loss.requires_grad and loss.dim() == 0,
        "the loss is one number that keeps its graph (no .item(), no torch.no_grad around the "
        "drafter)",
    )
    want, want_agree = train.ttt_loss(d, verifier, x, aux, 1)
    _check(
        torch.allclose(loss, want, rtol=1e-5),
        "step 0 at root t is scored against the verifier at position t + 1: soft cross-entropy "
        "-sum(softmax(verifier) * log_softmax(drafter)), the mean over roots and rows",
    )
    _check(
        len(agree) == 1 and abs(agree[0] - want_agree[0]) < 1e-6,
        "agreement: the drafter's argmax, as a verifier id, equals the verifier's argmax at t + 1",
    )
    loss, agree = f.ttt_loss(d, verifier, x, aux, 3, 0.5)
    want, want_agree = train.ttt_loss(d, verifier, x, aux, 3, 0.5)
    _check(
        torch.allclose(loss, want, rtol=1e-5) and len(agree) == 3,
        "step j targets position t + 1 + j over the n = T - 2 - j roots that have one, weighted "
        "decay**j, fed the true token (drafter.teacher_forced)",
    )
    reduced = tiny.reduced().drafter.train()
    loss, _ = f.ttt_loss(reduced, verifier, x, aux, 2)
    want, _ = train.ttt_loss(reduced, verifier, x, aux, 2)
    _check(
        torch.allclose(loss, want, rtol=1e-5),
        "with a draft vocabulary, score the verifier over the draft ids only (d.draft_scores) and "
        "map drafted ids back (d.target_ids) before comparing argmaxes",
    )


@dataclass(frozen=True)
class _Exercise:
    """One graded exercise: the learner's file, the functions it defines, and its checks."""

    name: str
    functions: tuple[str, ...]
    taught: str
    checks: Callable[[SimpleNamespace, _TinyPair], None]

    @property
    def file(self) -> str:
        """The learner's file name."""
        return f"{self.name}.py"


_EXERCISES: tuple[_Exercise, ...] = (
    _Exercise("accept_greedy", ("accept_greedy",), "notebook 03 §4", _accept_greedy),
    _Exercise("draft_step", ("draft_step", "draft"), "notebook 03 §4", _draft_step),
    _Exercise("accept_sampled", ("accept_sampled",), "notebook 03, exercise 8", _accept_sampled),
    _Exercise("ttt_loss", ("ttt_loss",), "notebook 05 §4", _ttt_loss),
)


def _reference_functions(exercise: _Exercise) -> SimpleNamespace:
    """The library's own solution of an exercise."""
    from helpers.eagle3 import decode, drafter, train

    where = {
        "accept_greedy": decode,
        "draft_step": drafter,
        "draft": decode,
        "accept_sampled": decode,
        "ttt_loss": train,
    }
    return SimpleNamespace(**{name: getattr(where[name], name) for name in exercise.functions})


def _load_functions(exercise: _Exercise, folder: Path) -> SimpleNamespace:
    """The learner's functions of an exercise, imported from folder/<name>.py."""
    path = Path(folder) / exercise.file
    _check(path.is_file(), f"no {path}: copy the starter from the repository's exercises/")
    spec = importlib.util.spec_from_file_location(f"exercise_{exercise.name}", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    except SystemExit as err:
        raise _Hint(
            f"{path.name} exits when imported (sys.exit({err.code!r})): the grader imports your "
            "file, so nothing at its top level may exit"
        ) from err
    except Exception as err:
        if _out_of_memory(err):
            raise _Hint(_memory_hint(f"{path.name} ran out of memory when imported", err)) from err
        raise _Hint(f"{path.name} does not import: {type(err).__name__}: {err}") from err
    missing = [n for n in exercise.functions if not callable(getattr(module, n, None))]
    _check(not missing, f"{path.name} defines no {', '.join(missing)}")
    return SimpleNamespace(**{n: getattr(module, n) for n in exercise.functions})


def _out_of_memory(err: BaseException) -> bool:
    """True for an allocation that failed: MemoryError, or torch's CPU allocator's RuntimeError."""
    return isinstance(err, MemoryError) or (
        isinstance(err, RuntimeError) and "can't allocate memory" in str(err)
    )


def _memory_hint(what: str, err: BaseException) -> str:
    """One line for code that ran out of memory, with this process's cap (--memory-gib)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_DATA)
    cap = (
        "with no cap set"
        if soft == resource.RLIM_INFINITY
        else f"under the grader's cap of {soft / 2**30:g} GiB per exercise, --memory-gib"
    )
    return f"{what} ({type(err).__name__} {cap}): does a list or a tensor grow without end?"


def _one_line(text: str) -> str:
    """The first line of a message, shortened."""
    line = str(text).strip().splitlines()[0] if str(text).strip() else ""
    return line if len(line) <= 200 else line[:197] + "..."


def _grade(
    exercise: _Exercise, functions: SimpleNamespace, tiny: _TinyPair | None = None
) -> str | None:
    """Run an exercise's checks: None when they all pass, else the one-line hint."""
    try:
        exercise.checks(functions, tiny or _TinyPair())
    except _Hint as hint:
        return _one_line(str(hint))
    except NotImplementedError:
        return f"not written yet: exercises/{exercise.file} still raises NotImplementedError"
    except SystemExit as err:
        return (
            f"your code called sys.exit({err.code!r}): an exercise returns its answer, it does "
            "not exit"
        )
    except Exception as err:
        if _out_of_memory(err):
            return _memory_hint("your code ran out of memory", err)
        return _one_line(f"your code raised {type(err).__name__}: {err}")
    return None


def _grade_all(
    folder: Path | None = None,
    names: Sequence[str] = (),
    tiny: _TinyPair | None = None,
) -> dict[str, str | None]:
    """Grade every exercise (or those named) from folder, or the reference solutions (None)."""
    tiny = tiny or _TinyPair()
    results: dict[str, str | None] = {}
    for exercise in _EXERCISES:
        if names and exercise.name not in names:
            continue
        try:
            fns = (
                _reference_functions(exercise)
                if folder is None
                else _load_functions(exercise, folder)
            )
        except _Hint as hint:
            results[exercise.name] = _one_line(str(hint))
            continue
        results[exercise.name] = _grade(exercise, fns, tiny)
    return results


# ------------------------------------------------------------------------ one process per exercise


@dataclass(frozen=True)
class _Limits:
    """What one exercise's process may take: seconds (--timeout) and GiB of data (--memory-gib)."""

    timeout: float = _TIMEOUT_S
    memory_gib: float = _MEMORY_GIB


class _Stopped(Exception):  # noqa: N818 - the grader was told to stop, not an error of its own
    """A stop signal came while grading: Ctrl-C (SIGINT), SIGTERM, or a closed terminal (SIGHUP)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _StopSignals:
    """While grading, the stop signals are recorded, not obeyed at once: the grader's wait sees the
    first and stops in order (the grading session killed, its temporary folder removed), and no
    clean-up is cut short. A signal ignored when the grader started (nohup) stays ignored."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._before: dict[int, Any] = {}

    def __enter__(self) -> _StopSignals:
        for sig in _STOP_SIGNALS:
            if signal.getsignal(sig) != signal.SIG_IGN:
                self._before[sig] = signal.signal(sig, self._record)
        return self

    def __exit__(self, *_exc: object) -> None:
        for sig, handler in self._before.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)

    def _record(self, signum: int, _frame: object) -> None:
        """The signal handler: keep the first stop signal."""
        if self.received is None:
            self.received = signum

    def check(self) -> None:
        """Raise _Stopped once a stop signal has come."""
        if self.received is not None:
            raise _Stopped(self.received)


def _write_result(path: Path, hint: str | None) -> None:
    """Record a graded exercise's hint (None: passed) for the parent, whole or not at all."""
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps({"hint": hint}), encoding="utf-8")
    os.replace(partial, path)


def _ended_early(code: int, memory_gib: float) -> str:
    """The hint for a grading process that ended before it recorded a result."""
    if code == -signal.SIGKILL:
        return (
            "your code's process was killed by SIGKILL, most likely by the system's out-of-memory "
            f"killer: the machine ran out of memory below the grader's cap of {memory_gib:g} GiB "
            "per exercise (--memory-gib); does a list or a tensor grow without end?"
        )
    if code < 0:
        try:
            how = f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
    else:
        how = f"exited with code {code}"
    return (
        f"your code ended the grading before its checks finished (the process {how}: os._exit, "
        "or a crash): an exercise returns its answer, it does not exit"
    )


def _session_members(sid: int) -> list[int]:
    """Pids of the live (not zombie) processes of session `sid`, read from /proc (none without)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    found = []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp sid
        if len(fields) > 3 and fields[0] != "Z" and int(fields[3]) == sid:
            found.append(int(entry))
    return found


def _kill_session(sid: int) -> None:
    """SIGKILL every process of session `sid` (a grading process and whatever it started, in its
    process group or another) until none is left alive, for at most _KILL_WAIT_S seconds."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(sid, signal.SIGKILL)  # the session leader's process group at once
    deadline = time.monotonic() + _KILL_WAIT_S
    while (alive := _session_members(sid)) and time.monotonic() < deadline:
        for pid in alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def _stop(child: subprocess.Popen) -> None:
    """Kill a grading process and everything it started (its session), and reap it."""
    _kill_session(child.pid)
    child.wait()


def _die_with_parent(parent: int) -> None:
    """In a grading process: have the kernel SIGKILL it when the grader that started it (`parent`)
    ends, however that ends (PR_SET_PDEATHSIG), and end now if it already has. Linux only."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (AttributeError, OSError):
        return  # not Linux: the grader's own clean-up is all
    prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # the grader ended before the line above
        os.kill(os.getpid(), signal.SIGKILL)


def _cap_memory(gib: float) -> None:
    """In a grading process: cap its data (heap, anonymous memory) at `gib` GiB (RLIMIT_DATA), so
    an allocation past it raises MemoryError."""
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    cap = int(gib * 2**30)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))


def _child_command(
    exercise: _Exercise, folder: Path | None, result: Path, tiny: _TinyPair, memory_gib: float
) -> list[str]:
    """The command that grades one exercise and records its hint in `result`."""
    command = [sys.executable, "-m", "kit.grader", "--only", exercise.name]
    command += ["--reference"] if folder is None else [str(Path(folder).resolve())]
    command += ["--record", str(result), "--parent-pid", str(os.getpid())]
    command += ["--memory-gib", repr(memory_gib)]
    for flag, value in (("--verifier-dir", tiny.verifier_dir), ("--drafter-dir", tiny.drafter_dir)):
        command += [flag, str(value)] if value is not None else []
    return command


def _wait(child: subprocess.Popen, timeout: float, stop: _StopSignals) -> int | None:
    """The grading process's exit status; None past `timeout` s; _Stopped once a stop signal
    came (looked at every 0.1 s)."""
    deadline = time.monotonic() + timeout
    while True:
        stop.check()
        try:
            return child.wait(timeout=min(0.1, max(0.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                return None


def _grade_isolated(
    exercise: _Exercise, folder: Path | None, tiny: _TinyPair, limits: _Limits, stop: _StopSignals
) -> str | None:
    """Grade one exercise in its own process and session: its hint, None when it passed; a hang,
    an exit or a crash is a hint too. However it ends (a stop signal included, which then
    propagates), the session is killed and the temporary folder removed."""
    with tempfile.TemporaryDirectory(prefix="grader-") as tmp:
        result = Path(tmp) / "result.json"
        command = _child_command(exercise, folder, result, tiny, limits.memory_gib)
        child = subprocess.Popen(command, start_new_session=True)  # stop signals reach us only
        try:
            code = _wait(child, limits.timeout, stop)
        finally:
            _stop(child)  # what the learner's code left running, too
        if result.is_file():  # past the timeout too: the checks finished, something held the exit
            return json.loads(result.read_text(encoding="utf-8"))["hint"]
        if code is None:
            return (
                f"timed out after {limits.timeout:g} s and was stopped: an endless loop? "
                "(on a slow machine: --timeout SECONDS)"
            )
        return _ended_early(code, limits.memory_gib)


def _line(exercise: _Exercise, hint: str | None) -> str:
    """One exercise's line of the table."""
    mark = "ok  " if hint is None else "FAIL"
    return f"{mark} {exercise.name:15s} ({exercise.taught}){'' if hint is None else ': ' + hint}"


def _say(line: str) -> None:
    """Print a line now; once the terminal is gone (SIGHUP), say nothing more."""
    try:
        print(line, flush=True)
    except OSError:
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # until the grader exits


def _grade_each(
    exercises: Sequence[_Exercise],
    folder: Path | None,
    tiny: _TinyPair,
    limits: _Limits,
    stop: _StopSignals,
) -> tuple[dict[str, str | None], int | None]:
    """Grade and print each exercise in turn: (hints so far, the stop signal that ended it)."""
    results: dict[str, str | None] = {}
    try:
        for exercise in exercises:
            stop.check()
            results[exercise.name] = _grade_isolated(exercise, folder, tiny, limits, stop)
            _say(_line(exercise, results[exercise.name]))
    except _Stopped as stopped:
        return results, stopped.signum
    return results, None


def _record(args: argparse.Namespace, folder: Path | None) -> int:
    """The grading process: grade the one exercise of --only, record its hint in --record."""
    if args.parent_pid is not None:
        _die_with_parent(args.parent_pid)
    _cap_memory(args.memory_gib)
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # the tiny verifier loads in a blink
    tiny = _TinyPair(args.verifier_dir, args.drafter_dir)
    (name,) = args.only
    _write_result(Path(args.record), _grade_all(folder, [name], tiny)[name])
    return 0


def _stopped_line(signum: int, graded: int, chosen: int, passed: int, where: str) -> str:
    """The closing line of a grading a stop signal ended."""
    how = {
        signal.SIGINT: "interrupted (Ctrl-C)",
        signal.SIGHUP: "stopped by SIGHUP (the terminal closed)",
    }.get(signum, f"stopped by {signal.Signals(signum).name}")
    return f"{how} after {graded} of {chosen} exercises: {passed}/{graded} graded pass ({where})"


def main(argv: Sequence[str] | None = None) -> int:
    """Print one line per exercise; exit 0 when all pass, 1 otherwise, 128 + N on stop signal N
    (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP)."""
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument(
        "folder", nargs="?", default=str(_EXERCISES_DIR), help="your exercise files"
    )
    parser.add_argument("--reference", action="store_true", help="grade the library's solutions")
    parser.add_argument("--only", action="append", default=[], help="an exercise name (repeatable)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=_TIMEOUT_S,
        help=f"seconds one exercise may take (default {_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--memory-gib",
        type=float,
        default=_MEMORY_GIB,
        help=f"GiB of memory one exercise may allocate (default {_MEMORY_GIB:g})",
    )
    # Internal: the grading process of one exercise, and the tiny pair it loads (tests: a copy).
    parser.add_argument("--record", help=argparse.SUPPRESS)
    parser.add_argument("--parent-pid", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--verifier-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--drafter-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = set(args.only) - {e.name for e in _EXERCISES}
    if unknown:
        print(f"grader: no exercise named {', '.join(sorted(unknown))}")
        return 2
    for flag, value, unit in (
        ("--timeout", args.timeout, "seconds"),
        ("--memory-gib", args.memory_gib, "GiB"),
    ):
        if not value > 0:  # NaN too
            print(f"grader: {flag} must be a positive number of {unit}, not {value:g}")
            return 2
    folder = None if args.reference else Path(args.folder)
    if args.record:
        return _record(args, folder)
    chosen = [e for e in _EXERCISES if not args.only or e.name in args.only]
    tiny = _TinyPair(args.verifier_dir, args.drafter_dir)
    limits = _Limits(args.timeout, args.memory_gib)
    with _StopSignals() as stop:
        results, signum = _grade_each(chosen, folder, tiny, limits, stop)
    where = "the reference solutions" if folder is None else str(folder)
    passed = sum(h is None for h in results.values())
    if signum is not None:
        for exercise in chosen[len(results) :]:
            _say(f"---- {exercise.name:15s} ({exercise.taught}): not graded (interrupted)")
        _say(_stopped_line(signum, len(results), len(chosen), passed, where))
        return 128 + signum
    _say(f"{passed}/{len(results)} exercises pass ({where})")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
