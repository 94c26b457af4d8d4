"""Notebook 03's own functions, written in its cells because they are the lesson: vLLM CI's check
of a run against a baseline (`check_row`) and one run read in every engine's acceptance vocabulary
(`translate`). Each is read from the notebook's cells and run as written."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest

from chapters.ch03_acceptance import harness
from helpers.analytics import benchmark
from helpers.common.counters import RequestAcceptance, counters_of
from tests.support import notebook_defs

NOTEBOOK = "03_acceptance_analytics.ipynb"


def cell_function(name: str) -> Callable[..., Any]:
    """The function `name` that notebook 03's cells define."""
    return notebook_defs(NOTEBOOK, name)[name]


def check_row() -> Callable[..., list[str]]:
    """vLLM CI's check, as notebook 03 writes it."""
    return cell_function("check_row")


def translate() -> Callable[..., pd.DataFrame]:
    """One run in every engine's vocabulary, as notebook 03 writes it."""
    return cell_function("translate")


def test_vllm_ci_checks_pass_a_baseline_and_catch_a_drop() -> None:
    check = check_row()
    row = harness.vllm_ci()["rows"][1]  # Qwen3-8B
    al, per = row["acceptance_length"], row["per_position"]
    assert check(al, per, al, per, 0.05, 0.05) == []
    better = [p * 1.3 for p in per]
    assert check(al, better, al, per, 0.05, 0.05) == [], "only a drop fails"
    dropped = check(al * 0.9, [per[0] * 0.8, *per[1:]], al, per, 0.05, 0.05)
    assert len(dropped) == 2 and dropped[1].startswith("position 0")


def _figures(hists, tokens, k=3):
    reqs = [RequestAcceptance(h, k * sum(h)) for h in hists]
    table = translate()(counters_of(reqs), reqs, tokens, k)
    return {(r.engine, r.figure): r.value for r in table.itertuples()}


def test_the_engines_agree_where_their_definitions_do_and_differ_where_not() -> None:
    hists = [(1, 1, 1, 5), (2, 2, 2, 2)]
    emitted = [1 + sum(h) + sum(j * n for j, n in enumerate(h)) for h in hists]
    f = _figures(hists, emitted)
    al = f[("vLLM", "mean acceptance length")]
    assert f[("SGLang", "spec_accept_length (scheduler)")] == pytest.approx(al)
    assert f[("speculators", "acceptance_length")] == al
    # every step drafted k: SGLang's fixed rate is vLLM's, the old one is biased upward
    fixed = f[("SGLang", "spec_accept_rate (since PR #23530)")]
    assert fixed == pytest.approx(f[("vLLM", "draft acceptance rate")])
    assert f[("SGLang", "spec_accept_rate (before PR #23530)")] > fixed
    # counting emitted tokens adds the prefill's token: one more per request over its steps
    steps = sum(sum(h) for h in hists)
    assert f[("SpecForge", "accept_length (benchmark)")] == pytest.approx(al + len(hists) / steps)
    assert f[("vLLM", "emitted_overcount (accepted, never emitted)")] == 0
    cut = _figures(hists, [emitted[0] - 2, emitted[1]])  # the first stopped inside its drafts
    assert cut[("vLLM", "emitted_overcount (accepted, never emitted)")] == 2
    assert cut[("vLLM", "mean acceptance length")] == al, "vLLM's counters do not see the cut"


def test_without_paired_requests_only_the_counters_figures_are_given() -> None:
    hists = [(1, 1, 1, 5)]
    reqs = [RequestAcceptance(h, 3 * sum(h)) for h in hists]
    table = translate()(counters_of(reqs), reqs, [], 3)
    assert "emitted_overcount (accepted, never emitted)" not in set(table.figure)
    assert table.engine.value_counts()["vLLM"] == 2 + 3, "two pooled figures, three positions"


@pytest.mark.vllm
def test_a_real_runs_counters_read_the_same_where_the_definitions_agree() -> None:
    from helpers.common.profiles import load_profile
    from helpers.engine import lifecycle, runs

    with lifecycle.open_engine(**lifecycle.engine_kwargs(load_profile("tiny"), k=3)) as llm:
        done = runs.merge_runs(
            list(
                runs.run_categories(
                    llm, benchmark.dataset_prompts("workbook", 1), runs.sampling(48)
                ).values()
            )
        )
    lengths = [len(ids) for ids in done.token_ids]
    f = {
        (r.engine, r.figure): r.value
        for r in translate()(done.counters, done.requests, lengths, 3).itertuples()
    }
    al = f[("vLLM", "mean acceptance length")]
    assert al == pytest.approx(done.stats["spec_decode_acceptance_length"])
    assert f[("SGLang", "spec_accept_length (scheduler)")] == pytest.approx(al)
    assert f[("SGLang", "spec_accept_rate (since PR #23530)")] == pytest.approx(
        f[("vLLM", "draft acceptance rate")]
    ), "no grammar: every step drafted k"
    assert f[("vLLM", "emitted_overcount (accepted, never emitted)")] >= 0
