"""chapters.ch03_acceptance.harness: vLLM CI's checks and row format, intervals."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from chapters.ch03_acceptance import harness
from helpers.analytics import benchmark
from helpers.common.counters import RequestAcceptance, counters_of
from helpers.common.paths import DATA_DIR
from helpers.engine.runs import CategoryRun


def test_the_recorded_ci_rows_add_up_as_vllm_defines_them() -> None:
    ci = harness.vllm_ci()
    assert ci["settings"]["num_speculative_tokens"] == 3 and ci["settings"]["num_prompts"] == 80
    for row in ci["rows"]:
        implied = 1 + sum(row["per_position"])
        assert abs(implied - row["acceptance_length"]) / row["acceptance_length"] < 0.02, row


def _run(hists: list[tuple[int, ...]], k: int = 3) -> CategoryRun:
    """A batch whose requests verified with these histograms (steps by accepted drafts)."""
    reqs = [RequestAcceptance(h, k * sum(h)) for h in hists]
    tokens = [[0] * (1 + sum(h) + sum(j * n for j, n in enumerate(h))) for h in hists]
    return CategoryRun(tokens, [""] * len(hists), 1.0, counters_of(reqs), requests=reqs)


def test_measure_pools_subsets_and_gives_intervals_over_prompts() -> None:
    runs = {"a": _run([(1, 1, 1, 5), (2, 2, 2, 2)]), "b": _run([(0, 0, 2, 6), (4, 2, 1, 1)])}
    table = benchmark.measure(runs, 3).set_index("subset")
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


def test_the_definitions_name_their_sources() -> None:
    table = harness.definitions_table()
    assert {"vLLM", "speculators", "SGLang", "SpecForge", "TensorRT-LLM"} <= set(table.engine)
    assert table.source.str.len().gt(10).all() and table.bonus.map(type).eq(bool).all()
    vllm = table[table.engine == "vLLM"].source
    read = {s.split(" ")[0].rstrip(":") for s in vllm}
    assert read == {"vllm/v1/spec_decode/metrics.py"}, read
    installed = Path(importlib.util.find_spec("vllm").origin).parent.parent
    assert (installed / read.pop()).is_file(), "vLLM's definitions are read in the installed vLLM"
    record = json.loads((DATA_DIR / "published" / "acceptance-definitions.json").read_text())
    assert {"what", "source", "date", "read", "conditions"} <= set(record), "its provenance"


def test_every_figure_notebook_03_computes_is_defined() -> None:
    """translate (notebook 03's cell) reports only figures the definitions table names."""
    from chapters.ch03_acceptance.tests.test_notebook03_cells import translate

    hist = (1, 1, 1, 5)
    reqs = [RequestAcceptance(hist, 3 * sum(hist))]
    emitted = 1 + sum(hist) + sum(j * n for j, n in enumerate(hist))
    table = translate()(counters_of(reqs), reqs, [emitted], 3)
    defined = harness.definitions_table()
    for engine, figure in zip(table.engine, table.figure):
        if figure.startswith("emitted_overcount"):
            continue  # no engine's figure: what separates accepted from emitted tokens
        head = re.sub(r"position \d+", "position i", figure.split(" (")[0])
        names = defined[defined.engine == engine].figure
        assert names.str.contains(head, regex=False).any(), (engine, figure)


def test_bad_command_lines_answer_in_one_line(capsys) -> None:
    assert harness.main(["--profile", "nope"]) == 2
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and all("unknown profile 'nope'" in line for line in lines)
