"""chapters.ch06_moe.schedule: a k-by-batch schedule vLLM reads as meant (k = 0 where plain
decoding wins), and the acceptance traces notebook 06's cells replay."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from chapters.ch06_moe import schedule

#: c(k, B) with speculation losing at batch 16 only (a non-monotonic lab).
COSTS = {
    1: {1: 1.2, 3: 1.5, 5: 1.9},
    4: {1: 1.0, 3: 1.1, 5: 1.3},
    16: {1: 1.45, 3: 1.9, 5: 2.4},
    64: {1: 1.1, 3: 1.3, 5: 1.6},
}
ALPHA = 0.4


def expected_tokens_per_step(k: int, alpha: float) -> float:
    """E[tokens per speculative step] when every draft is accepted with probability α, i.i.d.
    (Leviathan et al. 2023): 1 + α + … + α^k = (1 − α^{k+1}) / (1 − α)."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def taus(alpha: float = ALPHA) -> dict[int, float]:
    return {k: expected_tokens_per_step(k, alpha) for k in (1, 3, 5)}


def test_best_k_is_zero_where_plain_wins() -> None:
    best = {b: schedule.best_k(taus(), c)[0] for b, c in COSTS.items()}
    assert best[16] == 0 and best[4] > 0
    assert schedule.best_k(taus(), COSTS[16])[1] == 1.0


def test_the_schedule_emits_k_zero_where_plain_wins_and_vllm_reads_it() -> None:
    best = {b: schedule.best_k(taus(), c)[0] for b, c in COSTS.items()}
    ranges = schedule.schedule_ranges(best)
    assert ranges[0][0] == 1 and (5, 16, 0) in ranges
    assert all(a[1] + 1 == b[0] for a, b in zip(ranges, ranges[1:])), ranges
    lookup = schedule.dense_lookup(ranges, 128, 5)
    for b, k in best.items():
        assert lookup[b] == k, (b, lookup[b], k)
    assert lookup[10] == best[16] == 0  # between measured sizes: the k of the size above
    assert lookup[100] == best[64]  # above the last range: vLLM repeats the last k


def test_dropping_the_plain_ranges_makes_vllm_speculate_there() -> None:
    ranges = [(1, 4, 1), (5, 16, 0), (17, 64, 1)]
    kept = schedule.dense_lookup(ranges, 64, 3)
    dropped = schedule.dense_lookup([r for r in ranges if r[2] > 0], 64, 3)
    assert kept[10] == 0 and dropped[10] == 1  # the gap takes the previous range's k
    tail = schedule.dense_lookup([(1, 8, 3), (9, 16, 0)], 64, 3)
    assert tail[40] == 0
    assert schedule.dense_lookup([(1, 8, 3)], 64, 3)[40] == 3


def test_vllm_refuses_a_schedule_that_does_not_start_at_one() -> None:
    with pytest.raises(ValueError, match="start at 1"):
        schedule.dense_lookup([(2, 8, 3)], 64, 3)


def iid_trace(alpha: float, steps: int, k_max: int = 5, seed: int = 0) -> list[int]:
    return schedule.iid_traces(alpha, 1, steps, k_max, seed)[0]


def test_request_trace_reads_full_length_steps_only() -> None:
    import types

    from helpers.common import vllm_names

    metrics = types.SimpleNamespace(
        **{
            vllm_names.PER_REQUEST.per_step_accepted: [5, 1, 0, 2],
            vllm_names.PER_REQUEST.per_step_drafted: [5, 5, 5, 2],
        }
    )
    output = types.SimpleNamespace(**{vllm_names.PER_REQUEST.output_attr: metrics})
    assert schedule._request_trace(output, 5) == [5, 1, 0]
    assert schedule._request_trace(types.SimpleNamespace(), 5) is None


def test_counters_trace_keeps_the_per_position_mix() -> None:
    from helpers.common.counters import SpecCounters

    counters = SpecCounters(1000, 3000, 1300, (700, 400, 200))
    trace = schedule._counters_trace(counters, 20000, seed=1)
    for i, expected in enumerate((0.7, 0.4, 0.2)):
        assert sum(j > i for j in trace) / len(trace) == pytest.approx(expected, abs=0.02)


def test_on_the_recorded_lab_plain_batches_get_k_zero() -> None:
    from chapters.ch06_moe import lab
    from helpers.analytics import speedup

    table = speedup.lab_step_costs(lab.load_lab())
    by = table.pivot_table(
        index="num_speculative_tokens", columns="concurrency", values="measured_c", aggfunc="median"
    )
    costs = {int(b): {int(k): float(v) for k, v in by[b].dropna().items()} for b in by.columns}
    for alpha in (0.1, 0.3, 0.6):
        flat = [j for t in schedule.iid_traces(alpha, 8, 64, 5, seed=2) for j in t]
        taus = {k: schedule.trace_tau(flat, k) for k in costs[min(costs)]}
        best = {b: schedule.best_k(taus, c)[0] for b, c in costs.items()}
        lookup = schedule.dense_lookup(schedule.schedule_ranges(best), max(costs), 5)
        for b, by_k in costs.items():
            plain_wins = all(taus[k] / c < 1 for k, c in by_k.items())
            assert (lookup[b] == 0) == plain_wins, (alpha, b, lookup[b], taus, by_k)


@pytest.mark.parametrize("k", [1, 3, 5])
def test_alpha_zero_gives_one_token_per_step(k: int) -> None:
    assert expected_tokens_per_step(k, 0.0) == 1.0


@pytest.mark.parametrize("k", [1, 3, 5])
def test_alpha_to_one_gives_k_plus_one_tokens_per_step(k: int) -> None:
    assert expected_tokens_per_step(k, 1 - 1e-9) == pytest.approx(k + 1, rel=1e-6)


def test_expected_tokens_is_the_geometric_sum() -> None:
    for k in range(1, 6):
        for a in (0.1, 0.5, 0.8):
            assert expected_tokens_per_step(k, a) == pytest.approx(sum(a**i for i in range(k + 1)))


def test_monotonic_pieces() -> None:
    alphas = [i / 20 for i in range(21)]
    for k in range(1, 6):
        e = [expected_tokens_per_step(k, a) for a in alphas]
        assert all(x < y for x, y in zip(e, e[1:])), "E[tokens/step] rises with α"
    for a in (0.3, 0.8):
        e = [expected_tokens_per_step(k, a) for k in range(1, 8)]
        assert all(x < y for x, y in zip(e, e[1:])), "E[tokens/step] rises with k for α > 0"


def test_alpha_out_of_range_rejected() -> None:
    with pytest.raises(ValueError):
        expected_tokens_per_step(3, 1.2)


class _FakeEngine:
    """An engine whose worker counts passes: `drafts` drafter passes per verifier pass, and
    counters of `scheduled` draft tokens per verify step."""

    def __init__(self, drafts: float, scheduled: int) -> None:
        self.drafts, self.scheduled, self.steps, self.counting = drafts, scheduled, 0, False

    def collective_rpc(self, method: str, args: tuple = ()) -> list:
        assert method == "ch06_count_forwards"
        if args[0]:
            self.steps, self.counting = 0, True
            return [{"verifier": 0, "drafter": 0}]
        self.counting = False
        return [{"verifier": self.steps, "drafter": round(self.steps * self.drafts)}]

    def chat(self, messages, params, use_tqdm=False) -> list:
        self.steps += 10 * len(messages)
        return []


def test_forwards_by_batch_counts_what_the_drafter_computed(monkeypatch) -> None:
    from helpers.common import counters

    engine = _FakeEngine(drafts=5, scheduled=1)
    reads = iter(
        [counters.SpecCounters(), counters.SpecCounters(num_drafts=10, num_draft_tokens=10)] * 2
    )
    monkeypatch.setattr(counters, "snapshot", lambda llm: next(reads))
    seen = schedule.forwards_by_batch(engine, ["a", "b", "c"], params=None)
    assert set(seen) == {1, 3}
    assert seen[1] == {"drafter_per_step": 5.0, "scheduled_per_step": 1.0}


def test_a_failed_start_is_named_by_where_vllm_raised_it() -> None:
    from vllm.v1.worker.gpu import input_batch

    # a function whose frame names input_batch.py, as the assert of vLLM #48494 does
    code = compile("def make_dummy():\n    raise AssertionError\n", input_batch.__file__, "exec")
    ns: dict = {}
    exec(code, ns)
    try:
        ns["make_dummy"]()
    except AssertionError as err:
        said = schedule.start_failure(err)
    assert said == "AssertionError at v1/worker/gpu/input_batch.py:make_dummy"
    assert schedule.start_failure(ValueError("a\nlast line")) == "ValueError: last line"


def test_the_recorded_gpu_check_shows_both_mrv2_behaviours() -> None:
    recorded = schedule.recorded_runners()
    assert recorded.attrs["gpu"].startswith("NVIDIA") and recorded.attrs["date"]
    by = recorded.set_index("runner")
    assert by.drafter_per_step["V2, eager"] == by.k_max["V2, eager"] > by.schedule_k["V2, eager"]
    assert by.drafter_per_step["V1"] == by.schedule_k["V1"]
    assert not by.started["V2, CUDA graphs"] and "make_dummy" in by.error["V2, CUDA graphs"]


def test_forward_passes_are_counted_on_either_runners_drafter() -> None:
    import torch

    from chapters.ch06_moe.schedule import _ForwardCounter

    count = _ForwardCounter.ch06_count_forwards  # called with a stand-in worker as self

    verifier, drafter = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    for attr in ("drafter", "speculator"):  # the V1 (and CPU) runner's, Model Runner V2's
        runner = SimpleNamespace(
            get_model=lambda: verifier, **{attr: SimpleNamespace(model=drafter)}
        )
        worker = SimpleNamespace(model_runner=runner)
        assert count(worker, True) == {"verifier": 0, "drafter": 0}
        x = torch.zeros(1, 2)
        verifier(x)
        for _ in range(5):
            drafter(x)
        assert count(worker, False) == {"verifier": 1, "drafter": 5}
        drafter(x)  # hooks removed: no longer counted
        assert worker._ch06_counts == {"verifier": 1, "drafter": 5}
    plain = SimpleNamespace(model_runner=SimpleNamespace(get_model=lambda: verifier))
    count(plain, True)
    verifier(torch.zeros(1, 2))
    assert count(plain, False) == {"verifier": 1, "drafter": 0}
