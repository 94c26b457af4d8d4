"""Notebook 03's exercises, each variant run at CI size by calling the same code its cells call
(what is not run here, and why, is listed in tests/test_exercises.py)."""

from __future__ import annotations

import math
import random

import pytest

from tests.support import needs_shipped

# ----------------------------------------------------------------------- notebooks 02 and 03, vLLM


@pytest.mark.vllm
@needs_shipped
def test_02_ex1_and_03_ex1_ex2_ex3_on_one_engine(tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    """One engine at k=1: 02 ex. 1 (K=1), 03 ex. 1 (low temperatures), 03 ex. 2 (max_tokens=16)
    against the reference decoder, and 03 ex. 3 (the late accept rule) caught by the same check."""
    from chapters.ch03_acceptance import reference
    from chapters.ch03_acceptance.experiments import _temperature_runs
    from helpers.common.counters import acceptance_stats
    from helpers.common.prompts import load_prompts
    from helpers.eagle3 import decode
    from helpers.engine.lifecycle import engine_kwargs, open_engine
    from helpers.engine.runs import pooled, run_categories, sampling

    k, max_tokens = 1, 16
    prompts = load_prompts(1)
    with open_engine(**engine_kwargs(tiny, k=k)) as llm:
        runs = run_categories(llm, prompts, sampling(max_tokens))
        flat = [p for c in runs for p in prompts[c]]
        temps = _temperature_runs(llm, flat, [0.0, 0.1, 0.2, 0.3], max_tokens, seed=0)

    tau = acceptance_stats(pooled(runs))["spec_decode_acceptance_length"]
    assert 1.0 < tau <= k + 1, tau  # 02 ex. 1: never above K + 1
    for t, run in temps.items():  # 03 ex. 1
        stats = run.stats
        assert stats["spec_decode_num_drafts"] > 0, t
        assert 1.0 <= stats["spec_decode_acceptance_length"] <= k + 1, (t, stats)

    vllm_ids = [ids for run in runs.values() for ids in run.token_ids]
    pair = decode.load_pair(tiny)
    on_time = decode._generate_all(pair, flat, k, max_tokens)
    agree = reference.agreement_table(on_time, vllm_ids, pooled(runs))
    assert (agree.difference == 0).all(), agree.to_string()  # 03 ex. 2: still exact

    accept = decode.accept_greedy

    def late(drafts, targets):  # 03 ex. 3, as the exercise writes it
        return accept(drafts, list(targets[1:]) + [targets[-1]])

    monkeypatch.setattr(decode, "accept_greedy", late)
    shifted = decode._generate_all(pair, flat, k, max_tokens)
    agree_late = reference.agreement_table(shifted, vllm_ids, pooled(runs))
    assert (agree_late.difference != 0).any(), agree_late.to_string()


# ------------------------------------------------------------------------------------ notebook 03


def test_03_ex4_implied_step_cost_column() -> None:
    from chapters.ch03_acceptance.experiments import _throughput_vs_k
    from helpers.common.tables import COLUMNS

    rows = {
        0: {"output_tokens_per_s": 10.0, "natural_output_tokens_per_s": 10.0,
            "spec_decode_acceptance_length": 1.0},
        3: {"output_tokens_per_s": 15.0, "natural_output_tokens_per_s": 14.0,
            "spec_decode_acceptance_length": 3.0},
    }  # fmt: skip
    cols = [COLUMNS.k, "spec_decode_acceptance_length", "speedup_vs_plain",
            "implied_relative_step_cost"]  # fmt: skip
    table = _throughput_vs_k(rows)[cols].set_index(COLUMNS.k)
    assert table.implied_relative_step_cost[3] == pytest.approx(3.0 / 1.5)


def test_03_ex5_intervals_shrink_about_one_over_sqrt2() -> None:
    """Doubling the requests narrows the interval of τ over requests by about 1/sqrt(2)."""
    from helpers.analytics.intervals import tau_interval
    from helpers.common.counters import RequestAcceptance

    rng = random.Random(0)

    def request() -> RequestAcceptance:
        p = rng.uniform(0.3, 0.9)  # requests differ in how well the drafter fits them
        hist = [0] * 4
        for _ in range(20):  # 20 steps of k = 3
            a = 0
            while a < 3 and rng.random() < p:
                a += 1
            hist[a] += 1
        return RequestAcceptance(tuple(hist), 60)

    def width(n: int) -> float:
        iv = tau_interval([request() for _ in range(n)])
        return iv.high - iv.low

    ratios = [width(200) / width(100) for _ in range(3)]
    ratio = sum(ratios) / len(ratios)
    assert abs(ratio - 1 / math.sqrt(2)) < 0.12, ratios


@pytest.mark.vllm
@needs_shipped
def test_03_ex9_the_first_rates_do_not_depend_on_k(tiny) -> None:
    """03 ex. 9 at CI size (2 prompts per task, 64 tokens): the k = 5 run's first three
    per-position rates pass vLLM CI's check (notebook 03's `check_row`) against the k = 3 run's."""
    from chapters.ch03_acceptance.tests.test_notebook03_cells import check_row
    from helpers.analytics import benchmark
    from helpers.engine import lifecycle, runs

    rates = {}
    for k in (3, 5):
        with lifecycle.open_engine(**lifecycle.engine_kwargs(tiny, k=k)) as llm:
            done = runs.run_categories(
                llm, benchmark.dataset_prompts("workbook", 2), runs.sampling(64)
            )
        row = benchmark.measure(done, k).set_index("subset").loc["all"]
        rates[k] = [float(row[f"pos_{i}"]) for i in range(k)]
    three, five = rates[3], rates[5][:3]
    assert check_row()(1 + sum(five), five, 1 + sum(three), three, 0.05, 0.05) == []
