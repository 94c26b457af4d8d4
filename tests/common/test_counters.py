"""helpers.metrics: counter deltas and vLLM's formulas."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from helpers.common.counters import (
    Meter,
    SpecCounters,
    _counters_from_values,
    acceptance_stats,
    snapshot,
)


def test_delta_and_pool() -> None:
    after, before = SpecCounters(10, 30, 20, (8, 7, 5)), SpecCounters(4, 12, 6, (3, 2, 1))
    assert after - before == SpecCounters(6, 18, 14, (5, 5, 4))
    assert (after - before) + before == after
    assert SpecCounters() + SpecCounters(1, 3, 2, (1, 1, 0)) == SpecCounters(1, 3, 2, (1, 1, 0))


def test_formulas_match_vllm_bench_serve() -> None:
    s = acceptance_stats(SpecCounters(6, 18, 14, (5, 5, 4)))
    assert s["spec_decode_acceptance_length"] == pytest.approx(1 + 14 / 6)
    assert s["spec_decode_acceptance_rate"] == pytest.approx(100 * 14 / 18)
    assert s["spec_decode_per_position_acceptance_rates"] == pytest.approx([5 / 6, 5 / 6, 4 / 6])
    assert acceptance_stats(SpecCounters())["spec_decode_acceptance_length"] == 0.0


def test_snapshot_reads_llm_metrics_and_zero_is_kept() -> None:
    metrics = [
        SimpleNamespace(name="vllm:spec_decode_num_drafts", value=19),
        SimpleNamespace(name="vllm:spec_decode_num_draft_tokens", value=57),
        SimpleNamespace(name="vllm:spec_decode_num_accepted_tokens", value=0),
        SimpleNamespace(name="vllm:spec_decode_num_accepted_tokens_per_pos", values=[0, 0, 0]),
        SimpleNamespace(name="vllm:num_requests_running", value=1),
    ]
    llm = SimpleNamespace(get_metrics=lambda: metrics)
    assert snapshot(llm) == SpecCounters(19, 57, 0, (0, 0, 0))
    assert _counters_from_values({"spec_decode_num_drafts": 2}) == SpecCounters(2, 0, 0, ())


def test_meter_measures_only_its_block() -> None:
    state = {"drafts": 5}
    llm = SimpleNamespace(
        get_metrics=lambda: [
            SimpleNamespace(name="vllm:spec_decode_num_drafts", value=state["drafts"])
        ]
    )
    with Meter(llm) as m:
        state["drafts"] = 12
    assert m.delta.num_drafts == 7


def test_request_histograms_add_up_to_counters() -> None:
    from helpers.common.counters import RequestAcceptance, counters_of, request_acceptance

    # two requests at k=3: steps accepting 0..3 drafts
    a, b = RequestAcceptance((1, 0, 2, 3), 18), RequestAcceptance((0, 1, 0, 1), 6)
    assert a.counters == SpecCounters(6, 18, 0 + 4 + 9, (5, 5, 3))
    assert counters_of([a, b]) == SpecCounters(8, 24, 13 + 4, (7, 6, 4))
    metrics = SimpleNamespace(histogram=[0, 2, 0, 15], num_draft_tokens=51)
    assert request_acceptance(SimpleNamespace(spec_decode_metrics=metrics)) == RequestAcceptance(
        (0, 2, 0, 15), 51
    )
    assert request_acceptance(SimpleNamespace(spec_decode_metrics=None)) is None
