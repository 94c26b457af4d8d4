"""chapters.ch03_acceptance.harness: datasets offline, vLLM CI's checks and row format, intervals."""

from __future__ import annotations

import pytest

from chapters.ch03_acceptance import harness
from helpers.common.counters import RequestAcceptance, counters_of
from helpers.engine.runs import CategoryRun


def test_humaneval_ships_its_164_prompts_offline() -> None:
    prompts = harness.dataset_prompts("humaneval")
    assert list(prompts) == ["HumanEval"] and len(prompts["HumanEval"]) == 164
    assert prompts["HumanEval"][0].lstrip().startswith("from typing import List")
    assert len(harness.dataset_prompts("humaneval", limit=5)["HumanEval"]) == 5
    assert set(harness.dataset_prompts("workbook", limit=2)) == {
        "structured", "code", "prose", "creative"
    }  # fmt: skip


def test_mt_bench_offline_fails_in_one_line(monkeypatch) -> None:
    from helpers.common import envinfo

    monkeypatch.setattr(envinfo, "hub_reachable", lambda timeout=3.0: False)
    with pytest.raises(RuntimeError, match="needs the model hub") as err:
        harness.dataset_prompts("mt-bench")
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="unknown dataset"):
        harness.dataset_prompts("gsm8k")


def test_the_recorded_ci_rows_add_up_as_vllm_defines_them() -> None:
    ci = harness.vllm_ci()
    assert ci["settings"]["num_speculative_tokens"] == 3 and ci["settings"]["num_prompts"] == 80
    for row in ci["rows"]:
        implied = 1 + sum(row["per_position"])
        assert abs(implied - row["acceptance_length"]) / row["acceptance_length"] < 0.02, row


def test_vllm_ci_checks_pass_a_baseline_and_catch_a_drop() -> None:
    row = harness.vllm_ci()["rows"][1]  # Qwen3-8B
    al, per = row["acceptance_length"], row["per_position"]
    assert harness.check_row(al, per, al, per, 0.05, 0.05) == []
    better = [p * 1.3 for p in per]
    assert harness.check_row(al, better, al, per, 0.05, 0.05) == [], "only a drop fails"
    dropped = harness.check_row(al * 0.9, [per[0] * 0.8, *per[1:]], al, per, 0.05, 0.05)
    assert len(dropped) == 2 and dropped[1].startswith("position 0")


def _run(hists: list[tuple[int, ...]], k: int = 3) -> CategoryRun:
    """A batch whose requests verified with these histograms (steps by accepted drafts)."""
    reqs = [RequestAcceptance(h, k * sum(h)) for h in hists]
    tokens = [[0] * (1 + sum(h) + sum(j * n for j, n in enumerate(h))) for h in hists]
    return CategoryRun(tokens, [""] * len(hists), 1.0, counters_of(reqs), requests=reqs)


def test_measure_pools_subsets_and_gives_intervals_over_prompts() -> None:
    runs = {"a": _run([(1, 1, 1, 5), (2, 2, 2, 2)]), "b": _run([(0, 0, 2, 6), (4, 2, 1, 1)])}
    table = harness.measure(runs, 3).set_index("subset")
    assert list(table.index) == ["a", "b", "all"] and table.loc["all", "prompts"] == 4
    pooled = counters_of([r for run in runs.values() for r in run.requests])
    assert table.loc["all", "acceptance_length"] == pytest.approx(
        1 + pooled.num_accepted_tokens / pooled.num_drafts
    )
    for subset in table.index:
        assert table.loc[subset, "al_low"] <= table.loc[subset, "acceptance_length"]
        assert table.loc[subset, "acceptance_length"] <= table.loc[subset, "al_high"]
    total = sum(table.loc["all", f"pos_{i}"] for i in range(3))
    assert 1 + total == pytest.approx(table.loc["all", "acceptance_length"])
    row = harness.ci_row(table.reset_index(), "v", "d", "x")
    assert row.startswith("Eagle3ModelConfig(") and "expected_acceptance_length=" in row
    assert f"{table.loc['all', 'acceptance_length']:.2f}" in row


def test_published_humaneval_rows_carry_their_conditions() -> None:
    table = harness.published_humaneval()
    assert len(table) >= 1 and table.k.notna().all() and table.date.notna().all()
    assert (table.acceptance_length > 1).all()


@pytest.mark.vllm
def test_the_command_prints_a_ci_row_for_the_tiny_pair(capsys) -> None:
    argv = ["--profile", "tiny", "--dataset", "humaneval", "--limit", "4", "--max-tokens", "32"]
    assert harness.main(argv) == 0
    out = capsys.readouterr().out
    assert "Eagle3ModelConfig(" in out and 'id="tiny-humaneval"' in out
    assert "qwen3-30b-moe-vl-eagle3" in out, "vLLM CI's rows printed beside it"


# --------------------------------------------------------------------------- vocabulary


def _figures(hists, tokens, k=3):
    reqs = [RequestAcceptance(h, k * sum(h)) for h in hists]
    table = harness.translate(counters_of(reqs), reqs, tokens, k)
    return {(r.engine, r.figure): r.value for r in table.itertuples()}


def test_the_definitions_name_their_sources() -> None:
    table = harness.definitions_table()
    assert {"vLLM", "speculators", "SGLang", "SpecForge", "TensorRT-LLM"} <= set(table.engine)
    assert table.source.str.len().gt(10).all()


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


@pytest.mark.vllm
def test_a_real_runs_counters_read_the_same_where_the_definitions_agree() -> None:
    from helpers.common.profiles import load_profile
    from helpers.engine import lifecycle, runs

    with lifecycle.open_engine(**lifecycle.engine_kwargs(load_profile("tiny"), k=3)) as llm:
        done = runs.merge_runs(
            list(
                runs.run_categories(
                    llm, harness.dataset_prompts("workbook", 1), runs.sampling(48)
                ).values()
            )
        )
    lengths = [len(ids) for ids in done.token_ids]
    f = {
        (r.engine, r.figure): r.value
        for r in harness.translate(done.counters, done.requests, lengths, 3).itertuples()
    }
    al = f[("vLLM", "mean acceptance length")]
    assert al == pytest.approx(done.stats["spec_decode_acceptance_length"])
    assert f[("SGLang", "spec_accept_length (scheduler)")] == pytest.approx(al)
    assert f[("SGLang", "spec_accept_rate (since PR #23530)")] == pytest.approx(
        f[("vLLM", "draft acceptance rate")]
    ), "no grammar: every step drafted k"
    assert f[("vLLM", "emitted_overcount (accepted, never emitted)")] >= 0


def test_bad_command_lines_answer_in_one_line(capsys) -> None:
    assert harness.main(["--profile", "nope"]) == 2
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and all("unknown profile 'nope'" in line for line in lines)
