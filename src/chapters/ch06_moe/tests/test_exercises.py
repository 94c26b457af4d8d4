"""Notebook 06's exercises, each variant run at CI size by calling the same code its cells call
(what is not run here, and why, is listed in tests/test_exercises.py)."""

from __future__ import annotations

from tests.support import needs_shipped

# ------------------------------------------------------------------------------------ notebook 06


@needs_shipped
def test_06_ex1_wider_windows(tiny, tok) -> None:
    from chapters.ch06_moe.moe import _router_choices, union_table
    from helpers.common.prompts import as_messages, load_prompts
    from helpers.eagle3.checkpoint import load_verifier

    verifier = load_verifier(tiny.verifier_path())
    E, A = verifier.config.num_experts, verifier.config.num_experts_per_tok
    choices = []
    for p in [ps[0] for ps in load_prompts(1).values()][:2]:
        ids = tok.apply_chat_template(
            as_messages(p), add_generation_prompt=True, return_tensors="pt", return_dict=True
        )["input_ids"]
        out = verifier.generate(ids, max_new_tokens=24, do_sample=False)[0].tolist()
        choices.append((_router_choices(verifier, out), ids.shape[1]))
    windows = union_table(choices, [1, 2, 4, 8, 12, 16], E, A)
    assert len(windows) == 6
    assert (windows.measured_union <= windows.independent_union + 1e-9).all(), windows
    assert (windows.measured_union >= windows.shared_bound - 1e-9).all(), windows


def _lab_costs() -> dict[int, dict[int, float]]:
    """Notebook 06 section 6's costs[C][k]: the recorded lab's c(k, C), median over the trusted cells."""
    from chapters.ch06_moe import lab
    from helpers.analytics import speedup
    from helpers.common.tables import COLUMNS

    table = speedup.lab_step_costs(lab.load_lab())
    by = table.pivot_table(
        index=COLUMNS.k, columns="concurrency", values="measured_c", aggfunc="median"
    )
    return {int(b): {int(k): float(v) for k, v in by[b].dropna().items()} for b in by.columns}


def _schedule(alpha: float) -> list[tuple[int, int, int]]:
    """Section 6's schedule for the i.i.d. drafter of acceptance `alpha`."""
    from chapters.ch06_moe import schedule

    costs = _lab_costs()
    flat = [j for t in schedule.iid_traces(alpha, 8, 64, 5, seed=0) for j in t]
    taus = {k: schedule.trace_tau(flat, k) for k in costs[min(costs)]}
    return schedule.schedule_ranges({b: schedule.best_k(taus, c)[0] for b, c in costs.items()})


def test_06_ex2_alpha_moves_the_schedule_and_k_zero_ranges_matter() -> None:
    from chapters.ch06_moe import schedule

    high, low = _schedule(0.6), _schedule(0.15)
    assert high != low, (high, low)
    assert sum(r[2] == 0 for r in low) >= sum(r[2] == 0 for r in high), (low, high)
    if any(r[2] == 0 for r in low):  # delete the k = 0 ranges: vLLM speculates there
        last = max(r[1] for r in low)
        kept = schedule.dense_lookup(low, last, 5)
        dropped = [r for r in low if r[2] > 0]
        if dropped and dropped[0][0] == 1:
            gone = schedule.dense_lookup(dropped, last, 5)
            assert any(a == 0 and b > 0 for a, b in zip(kept[1:], gone[1:]))


def test_06_ex3_a_smaller_draft_vocabulary_lowers_c() -> None:
    import dataclasses

    from chapters.ch06_moe import lab
    from chapters.ch06_moe.tests.test_notebook06_cells import fitted_model

    record = lab.load_lab()
    shape, context = lab.lab_shape(record)
    model = fitted_model(record)  # section 4's fit, as its cell writes it
    cs = [
        lab.model_c(model, dataclasses.replace(shape, draft_vocab=v), 3, conc, 0.0, context)
        for v in (8000, 32000, 151936)
        for conc in (1,)
    ]
    assert cs[0] <= cs[1] <= cs[2], cs  # equal only if the fit gave bytes no weight


def test_06_ex4_probing_less_often() -> None:
    from chapters.ch06_moe import schedule
    from chapters.ch06_moe.tests.test_notebook06_cells import defs

    replay_table = defs()["replay_table"]  # section 6's, as its cell writes it
    costs = _lab_costs()
    traces = {"weak": schedule.iid_traces(0.15, 4, 64, 5, seed=1)}
    ranges = {"weak": [(1, max(costs), 0)]}
    often = replay_table(traces, costs, ranges, probe_every=16)
    rarely = replay_table(traces, costs, ranges, probe_every=64)
    assert (rarely.speculated_share <= often.speculated_share + 1e-9).all()
