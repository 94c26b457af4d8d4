"""The embedded default: the recipe writes a pair vLLM loads; the shipped pair accepts drafts losslessly."""

from __future__ import annotations

import pytest

from helpers.common.counters import acceptance_stats, counters_of
from helpers.common.profiles import load_profile
from helpers.common.prompts import CATEGORIES, load_prompts
from helpers.engine.lifecycle import engine_kwargs, open_engine
from helpers.engine.runs import lossless_check, pooled, run_categories, sampling
from helpers.tiny.corpus import build_corpus
from kit.manifest import check_manifest
from kit.tiny_recipe import (
    SMOKE,
    _eval_loss,
    _held_out_prompts,
    _save_prompts,
    build_tiny_pair,
    local_profile,
)


@pytest.mark.vllm
def test_smoke_retrain_writes_a_pair_vllm_loads(tmp_path) -> None:
    log = build_tiny_pair(tmp_path, SMOKE)
    assert log["verifier"]["params"] > 1_000_000 and log["self_distill"]["exchanges"] == 16
    assert check_manifest(tmp_path) == {}, "the recipe writes the manifest of what it wrote"
    prompts = {"structured": load_prompts(2, tmp_path / "prompts")["structured"]}
    with open_engine(**engine_kwargs(local_profile(tmp_path), k=3)) as llm:
        runs = run_categories(llm, prompts, sampling(8))
    assert runs["structured"].output_tokens == 16
    assert runs["structured"].stats["spec_decode_num_drafts"] > 0


@pytest.mark.vllm
def test_shipped_pair_accepts_drafts_and_is_lossless() -> None:
    profile = load_profile("tiny")
    prompts = load_prompts(2)
    greedy = sampling(48)
    with open_engine(**engine_kwargs(profile, k=3)) as llm:
        spec = run_categories(llm, prompts, greedy)
    with open_engine(**engine_kwargs(profile, k=0)) as llm:
        plain = run_categories(llm, prompts, greedy)
    assert acceptance_stats(pooled(spec))["spec_decode_accepted_tokens"] > 0
    for cat in prompts:
        assert lossless_check(plain[cat].token_ids, spec[cat].token_ids).all_identical, cat
    # Per-request histograms add up to exactly the engine's counter delta (where vLLM keeps them).
    from dataclasses import fields

    from vllm.engine.arg_utils import EngineArgs

    if "per_request_spec_decode_metrics" in {f.name for f in fields(EngineArgs)}:
        for cat, run in spec.items():
            assert len(run.requests) == len(prompts[cat])
            assert counters_of(run.requests) == run.counters, cat


def test_held_out_prompts_exclude_training_requests_and_round_trip(tmp_path) -> None:
    seen = {ex.user for ex in build_corpus(200, seed=0)}
    prompts = _held_out_prompts(8, exclude=seen)
    assert set(prompts) == set(CATEGORIES)
    assert all(len(v) == 8 and not (set(v) & seen) for v in prompts.values())
    _save_prompts(prompts, tmp_path)
    assert load_prompts(3, tmp_path) == {c: v[:3] for c, v in prompts.items()}


def test_eval_loss_is_a_mean_next_token_loss() -> None:
    from helpers.common.paths import DATA_DIR
    from helpers.eagle3.checkpoint import load_verifier

    verifier = load_verifier(DATA_DIR / "tiny-qwen3-moe", device="cpu")
    loss = _eval_loss(verifier, [[1, 5, 9, 13, 2], [3, 4]])
    assert 0.0 < loss < 20.0
