"""helpers.tools.grader (make check-exercises): the reference solutions pass every check, the
starters and typical wrong answers fail with a one-line hint that points at the mistake."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from helpers.tools import grader


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


def test_the_notebooks_and_the_makefile_point_to_the_exercises() -> None:
    import nbformat

    from helpers.common.paths import NOTEBOOKS_DIR, REPO_ROOT

    text = "\n".join(
        c.source
        for nb in ("03_acceptance_analytics.ipynb", "05_train_your_own_drafter.ipynb")
        for c in nbformat.read(str(NOTEBOOKS_DIR / nb), as_version=4).cells
        if c.cell_type == "markdown"
    )
    for exercise in grader._EXERCISES:
        assert f"exercises/{exercise.file}" in text, exercise.file
    assert "make check-exercises" in text
    assert "check-exercises:" in (REPO_ROOT / "Makefile").read_text()
