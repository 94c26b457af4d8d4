"""The acceptance-doctor lab without an engine: mismatched inputs, dropped drafts, damage intervals
and rankings from synthetic runs, the reported cases, and the instructor guide's copy of the table."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace

import pandas as pd
import pytest
from matplotlib.figure import Figure

from chapters.ch08_low_acceptance import mismatch
from helpers.analytics.intervals import Interval
from helpers.common import vllm_names
from helpers.common.chat import render
from helpers.common.counters import RequestAcceptance, counters_of
from helpers.common.paths import NOTEBOOKS_DIR, REPO_ROOT
from helpers.common.prompts import as_messages
from helpers.engine.runs import CategoryRun

K = 3


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    from helpers.common.profiles import load_profile

    return AutoTokenizer.from_pretrained(load_profile("tiny").verifier_path())


def run_of(histograms: list[tuple[int, ...]], tokens: list[int] | None = None) -> CategoryRun:
    """A fake run whose counters pool its requests (k draft tokens per drafted step), and whose
    answers are exactly as long as the steps explain (1 prefill token + 1 + accepted per step)."""
    reqs = [RequestAcceptance(h, K * sum(h)) for h in histograms]
    lengths = tokens or [1 + sum((1 + j) * n for j, n in enumerate(h)) for h in histograms]
    return CategoryRun(
        [[0] * n for n in lengths],
        ["x"] * len(lengths),
        0.1,
        counters_of(reqs),
        requests=reqs,
    )


GOOD = [(0, 1, 2, 7), (1, 1, 1, 6), (0, 0, 3, 5), (0, 2, 2, 6)] * 4
BAD = [(6, 2, 1, 1), (5, 3, 1, 0), (7, 1, 1, 1), (6, 2, 2, 0)] * 4


# --------------------------------------------------------------------------- inputs


def test_thinking_off_template_adds_the_block_after_the_generation_prompt(tok) -> None:
    chat = as_messages("Convert to JSON: name Ada Moreno, age 41.")
    plain = render(tok, chat)
    for template in (tok.chat_template, tok.chat_template.replace("\n", "\\n")):
        changed = mismatch.thinking_off_template(template)
        assert render(tok, chat, chat_template=changed) == plain + mismatch.THINK_OFF_BLOCK
    with pytest.raises(ValueError, match="generation prompt"):
        mismatch.thinking_off_template("{{ messages }}")


def test_prompt_variants(tok) -> None:
    chats = {
        "baseline": as_messages("hi"),
        "double templating": mismatch.double_templated(tok, ["hi"])[0],
        "unseen system prompt": mismatch.with_system(["hi"], "Be brief.")[0],
    }
    table = mismatch.prompt_table(tok, chats).set_index("condition")
    assert table.text["double templating"].count("<|im_start|>") == 4
    assert table.text["unseen system prompt"].startswith("<|im_start|>system\nBe brief.")
    assert (table.tokens > 0).all()
    assert table.tokens["double templating"] > table.tokens["baseline"]


def test_with_field_order_keeps_the_fields_and_requires_them_in_order() -> None:
    other = mismatch.with_field_order(mismatch.RECORDS_SCHEMA, mismatch.OTHER_FIELD_ORDER)
    items = other["items"]
    assert tuple(items["properties"]) == mismatch.OTHER_FIELD_ORDER
    assert items["required"] == list(mismatch.OTHER_FIELD_ORDER)
    assert set(items["properties"]) == set(mismatch.RECORDS_SCHEMA["items"]["properties"])
    assert tuple(mismatch.RECORDS_SCHEMA["items"]["properties"])[0] == "name"  # unchanged


def test_schema_sampling_carries_the_schema() -> None:
    pytest.importorskip("vllm")
    params = mismatch.schema_sampling(8)
    assert params.structured_outputs.json == mismatch.RECORDS_SCHEMA
    assert params.temperature == 0.0 and params.max_tokens == 8


# --------------------------------------------------------------------------- dropped drafts


def test_no_draft_dropped_when_every_step_verified_k() -> None:
    run = run_of(GOOD)
    assert mismatch._steps_without_draft(run) == 0
    assert mismatch.drafts_invalidated(run, K) == 0


def test_trimmed_and_wiped_proposals_are_counted_back() -> None:
    run = run_of(GOOD)
    # a grammar cut 10 draft tokens from verified proposals and wiped 5 proposals entirely:
    # 5 plain steps add 5 tokens, and 10 fewer draft tokens were verified
    counters = replace(run.counters, num_draft_tokens=run.counters.num_draft_tokens - 10)
    wiped = replace(run, counters=counters, token_ids=run.token_ids[:-1] + [[0] * 105])
    longer_by = 105 - len(run.token_ids[-1])
    assert mismatch._steps_without_draft(wiped) == longer_by
    assert mismatch.drafts_invalidated(wiped, K) == 10 + K * longer_by


def test_tokens_lost_to_a_stop_string_do_not_count_as_steps() -> None:
    run = run_of(GOOD, tokens=[3] * len(GOOD))
    assert mismatch._steps_without_draft(run) == 0


# --------------------------------------------------------------------------- damage


def test_damage_is_the_difference_of_taus_with_a_paired_interval() -> None:
    base, cond = run_of(GOOD), run_of(BAD)
    d = mismatch._damage_interval(base, cond)
    tau_base, tau_cond = (r.stats[vllm_names.STATS.tau] for r in (base, cond))
    assert d.estimate == pytest.approx(tau_base - tau_cond)
    assert d.low < d.estimate < d.high and d.low > 0
    same = mismatch._damage_interval(base, run_of(GOOD))
    assert (same.estimate, same.low, same.high) == (0.0, 0.0, 0.0)  # paired: identical runs cancel


def test_unpaired_damage_adds_each_runs_variance() -> None:
    d = mismatch._damage_interval(run_of(GOOD), run_of(BAD[:12]))
    assert d.bounded and d.low < d.estimate < d.high and d.n == 12


def test_run_interval_is_the_counters_tau_with_nan_ends_without_requests() -> None:
    bare = CategoryRun([[1]], ["a"], 0.1, counters_of([RequestAcceptance((1, 1, 1, 7), 27)]))
    tau = mismatch._run_interval(bare)
    assert tau.estimate == pytest.approx(3.4) and not tau.bounded and tau.n == 1
    full = mismatch._run_interval(run_of(GOOD))
    assert full.bounded and full.n == len(GOOD) and full.low <= full.estimate <= full.high


def test_no_per_request_data_gives_no_interval() -> None:
    base = replace(run_of(GOOD), requests=[])
    d = mismatch._damage_interval(base, run_of(BAD))
    assert not d.bounded and d.estimate > 0
    assert mismatch._verdict(d) == "no interval from this vLLM"


@pytest.mark.parametrize(
    ("low", "high", "says"),
    [(0.1, 0.5, "lowers τ"), (-0.5, -0.1, "raises τ"), (-0.1, 0.3, "not separated")],
)
def test_verdict(low: float, high: float, says: str) -> None:
    assert mismatch._verdict(Interval(0.2, low, high)).startswith(says)


def table():
    """A damage table of three conditions: one large, two close to each other."""
    runs = {
        "baseline": run_of(GOOD),
        "large": run_of(BAD),
        "small": run_of(GOOD[:-2] + BAD[:2]),
        "tiny": run_of(GOOD[:-1] + BAD[:1]),
    }
    return mismatch.damage_table(
        runs, {"large": "baseline", "small": "baseline", "tiny": "baseline"}, K
    )


def test_damage_table_is_sorted_and_complete() -> None:
    t = table()
    assert t.condition.tolist() == ["large", "small", "tiny"]
    assert t.damage.is_monotonic_decreasing
    assert (t.baseline == "baseline").all() and (t.n_requests == 16).all()
    assert (t.drafts_invalidated == 0).all()
    assert t.verdict.iloc[0] == "lowers τ"


def ranking_lines(t) -> dict[str, str]:
    """Each condition's line of damage_ranking, by condition (the header line left out)."""
    lines = mismatch.damage_ranking(t).splitlines()[1:]
    return {c: next(line for line in lines if line.strip().startswith(c)) for c in t.condition}


def test_ranking_marks_separated_and_overlapping_conditions() -> None:
    t = table()
    lines = ranking_lines(t)
    assert mismatch.damage_of(t.iloc[0]).above(mismatch.damage_of(t.iloc[1]))
    assert lines["large"].endswith("separated from every other"), lines
    assert lines["small"].endswith("≈ tiny") and lines["tiny"].endswith("≈ small"), lines
    assert re.search(r"large +[\d.]+ \[[\d.]+, [\d.]+\]", lines["large"]), lines


def test_ranking_ties_only_what_overlaps_not_neighbours_in_a_chain() -> None:
    # A ≈ B and B ≈ C, but A lies above C: A and C must not read as tied.
    t = pd.DataFrame(
        {
            "condition": ["C", "A", "B"],
            "damage": [0.2, 1.0, 0.6],
            "damage_ci_low": [0.0, 0.8, 0.3],
            "damage_ci_high": [0.4, 1.2, 0.9],
            "n_requests": [16, 16, 16],
        }
    )
    lines = ranking_lines(t)
    body = mismatch.damage_ranking(t).splitlines()[1:]
    assert [line.split()[0] for line in body] == ["A", "B", "C"]
    assert lines["A"].endswith("≈ B") and lines["C"].endswith("≈ B"), lines
    assert lines["B"].endswith("≈ A, C"), lines


def test_ranking_without_intervals_says_so() -> None:
    t = table().assign(damage_ci_low=math.nan, damage_ci_high=math.nan)
    assert all(line.endswith("no interval: not ranked") for line in ranking_lines(t).values())


def test_plot_damage() -> None:
    fig = mismatch.plot_damage(table(), K)
    assert isinstance(fig, Figure) and len(fig.axes[0].patches) == 6


# --------------------------------------------------------------------------- symptom → cause → fix


def test_every_case_is_complete_and_sourced() -> None:
    cases = mismatch.load_cases()
    assert len(cases) >= 8
    for case in cases:
        assert all(case[k] for k in ("symptom", "cause", "fix", "sources"))
        for source in case["sources"]:
            assert source.startswith("https://github.com/") or "notebook" in source, source
        assert case["condition"] is not None or case.get("not_here")


def test_each_reported_issue_of_the_brief_is_a_case() -> None:
    sources = " ".join(s for c in mismatch.load_cases() for s in c["sources"])
    for ref in (
        "z-lab/dflash/issues/60",
        "SpecForge/issues/296",
        "vllm/pull/50170",
        "vllm/issues/42004",
        "vllm/issues/40551",
    ):
        assert ref in sources, ref


def test_the_temperature_fix_names_the_drafting_notebook_07_measures() -> None:
    case = next(c for c in mismatch.load_cases() if c["condition"] == "higher temperature")
    nb07 = json.loads((NOTEBOOKS_DIR / "07_eagle3_in_the_field.ipynb").read_text())
    code = "".join("".join(c["source"]) for c in nb07["cells"] if c["cell_type"] == "code")
    assert '("probabilistic", "standard")' in code  # the variant notebook 07 runs
    assert "probabilistic" in case["fix"], case["fix"]
    assert any(s.startswith("notebook 07") for s in case["sources"]), case["sources"]


def test_measured_column_joins_the_run() -> None:
    cases = [
        {
            "symptom": "s",
            "cause": "c",
            "fix": "f",
            "sources": ["notebook 08"],
            "condition": "large",
        },
        {"symptom": "s", "cause": "c", "fix": "f", "sources": ["notebook 08"], "condition": "gone"},
        {
            "symptom": "s",
            "cause": "c",
            "fix": "f",
            "sources": ["x"],
            "condition": None,
            "not_here": "GPU only",
        },
    ]
    rows = mismatch._symptom_table(cases, table())["measured here"].tolist()
    assert rows[0].startswith("large: τ ") and "lowers τ" in rows[0]
    assert rows[1] == "gone: not measured in this run" and rows[2] == "GPU only"
    text = mismatch.symptom_markdown(cases, table())
    assert text.splitlines()[0].endswith("| measured here |") and len(text.splitlines()) == 5


def test_load_cases_names_a_case_without_its_fields(tmp_path) -> None:
    path = tmp_path / "cases.json"
    path.write_text('{"cases": [{"symptom": "s"}]}')
    with pytest.raises(ValueError, match="lacks"):
        mismatch.load_cases(path)


def test_the_instructor_guide_holds_the_same_table() -> None:
    guide = (REPO_ROOT / "docs" / "instructors.md").read_text()
    assert mismatch.symptom_markdown(mismatch.load_cases()) in guide, (
        "docs/instructors.md's symptom → cause → fix table differs from the chapter's data/acceptance-doctor.json: "
        "paste chapters.ch08_low_acceptance.mismatch.symptom_markdown(mismatch.load_cases()) there"
    )


# --------------------------------------------------------------------------- context length


def _words(chat) -> int:
    """A stand-in token count: words in every message."""
    return sum(len(m["content"].split()) for m in chat)


def test_with_history_adds_earlier_turns_until_the_length_is_reached() -> None:
    turns = [(f"question {i}", "an answer of five words") for i in range(4)]
    chats, lengths = mismatch.with_history(["the target question"], turns, 20, _words)
    assert lengths == [_words(chats[0])] and lengths[0] >= 20
    assert chats[0][-1] == as_messages("the target question")[0]
    assert [m["role"] for m in chats[0][:4]] == ["user", "assistant", "user", "assistant"]
    none, short = mismatch.with_history(["q", "r"], turns, 0, _words)
    assert none == [as_messages("q"), as_messages("r")] and short == [1, 1]
    second, _ = mismatch.with_history(["a", "b"], turns, 5, _words)
    assert second[0][0]["content"] == "question 0" and second[1][0]["content"] == "question 1"
    capped, at = mismatch.with_history(["q"], turns, 10_000, _words)
    assert len(capped[0]) == 2 * len(turns) + 1, "stops when the turns run out"
    assert at[0] < 10_000


def test_context_table_reads_tau_and_rates_per_length() -> None:
    def run(hists):
        reqs = [RequestAcceptance(h, 3 * sum(h)) for h in hists]
        return CategoryRun(
            [[0]] * len(hists), [""] * len(hists), 1.0, counters_of(reqs), requests=reqs
        )

    runs = {0: run([(0, 0, 1, 7), (0, 1, 1, 6)]), 512: run([(5, 2, 1, 0), (4, 3, 1, 0)])}
    table = mismatch.context_table(runs, {0: [40, 44], 512: [520, 530]})
    assert list(table.history_tokens) == [0, 512] and list(table.prompt_tokens) == [42, 525]
    assert table[vllm_names.STATS.tau].iloc[0] > table[vllm_names.STATS.tau].iloc[1]
    assert (table.tau_ci_low <= table[vllm_names.STATS.tau]).all() and "pos_2_high" in table


def test_the_published_context_curve_carries_its_source() -> None:
    curve, about = mismatch.published_context_curve()
    assert len(curve) == 10 and curve.acceptance_length.iloc[0] > curve.acceptance_length.iloc[-1]
    assert about["date"] and "speculators PR #684" in about["source"]
    table = mismatch.context_table(
        {0: CategoryRun([[0]], [""], 1.0, counters_of([RequestAcceptance((1, 1), 2)]))}, {0: [10]}
    )
    assert isinstance(mismatch.plot_context(table, 384, curve, "x"), Figure)
