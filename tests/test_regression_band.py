"""A regression band like vLLM's `spec_decode.py --test`: the shipped pair still accepts what it did.

`make bench` recorded τ and the per-position acceptance rates of the shipped pair at k=3, T=0 on
the bench prompts (data/tiny-pair-bench.json: 32 held-out prompts per category, up to 128 tokens,
natural length). This reruns exactly that setting in vLLM and fails, printing both numbers, when
τ moves by more than RTOL (vLLM's own example uses 0.02) or a position's rate by more than ATOL.
A drafter that fell from τ 3.6 to 1.2, or a verifier whose taps moved, fails here.
"""

from __future__ import annotations

import json

import pytest

from helpers.common.counters import acceptance_stats
from helpers.common.paths import DATA_DIR
from helpers.common.profiles import load_profile
from helpers.common.prompts import load_prompts
from helpers.engine.lifecycle import engine_kwargs, open_engine
from helpers.engine.runs import pooled, run_categories, sampling

BENCH = DATA_DIR / "tiny-pair-bench.json"
K = 3
RTOL = 0.02
ATOL = 0.03


def recorded() -> tuple[dict, dict]:
    """(settings, the k=3 'all' row) of the recorded bench."""
    bench = json.loads(BENCH.read_text())
    row = next(r for r in bench["acceptance"] if r["k"] == K)
    return bench["settings"], row["all"]


@pytest.mark.vllm
def test_shipped_pair_stays_in_its_band() -> None:
    settings, want = recorded()
    prompts = load_prompts(settings["prompts"])
    with open_engine(**engine_kwargs(load_profile("tiny"), k=K)) as llm:
        runs = run_categories(llm, prompts, sampling(settings["max_tokens"]))
    got = acceptance_stats(pooled(runs))
    tau, per_position = (
        got["spec_decode_acceptance_length"],
        got["spec_decode_per_position_acceptance_rates"],
    )
    print(f"τ: measured {tau:.4f}, recorded {want['tau']:.4f} (rtol {RTOL})")
    print(
        f"per position: measured {[round(p, 4) for p in per_position]}, "
        f"recorded {[round(p, 4) for p in want['per_position']]} (atol {ATOL})"
    )
    assert tau == pytest.approx(want["tau"], rel=RTOL), (tau, want["tau"])
    assert per_position == pytest.approx(want["per_position"], abs=ATOL)


def test_band_is_tight_enough_to_catch_a_collapse() -> None:
    _, want = recorded()
    assert 1.2 != pytest.approx(want["tau"], rel=RTOL)
    assert want["tau"] * (1 - RTOL) > 3.0  # a 0.6-token drop in τ would fail
