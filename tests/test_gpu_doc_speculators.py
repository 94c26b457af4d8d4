"""docs/gpu.md's speculators side-by-side table is the recorded file's numbers, not typed ones."""

from __future__ import annotations

import json

from helpers.common.paths import DATA_DIR, REPO_ROOT

RECORD = json.loads((DATA_DIR / "measurements" / "h200-speculators-side-by-side.json").read_text())
GPU_DOC = (REPO_ROOT / "docs" / "gpu.md").read_text()


def _cell(row: dict) -> str:
    """One table cell: acceptance length and its 95 % interval, two decimals."""
    return f"{row['acceptance_length']:.2f} [{row['al_low']:.2f}, {row['al_high']:.2f}]"


def test_each_row_is_a_measured_drafter() -> None:
    table = GPU_DOC.split("| drafter | 128 held-out workbook prompts")[1].split("\n\n")[0]
    rows = [line for line in table.splitlines()[2:] if line.strip().startswith("|")]
    assert len(rows) == len(RECORD["measured"])
    for line, measured in zip(rows, RECORD["measured"]):
        assert _cell(measured["workbook"]) in line and _cell(measured["humaneval"]) in line
        assert measured["workbook"]["prompts"] == 128 and measured["humaneval"]["prompts"] == 164


def test_the_doc_ranks_the_trainers_only_where_their_intervals_separate() -> None:
    ours, theirs = RECORD["measured"][1], RECORD["measured"][2]
    assert (ours["label"], theirs["label"]) == ("workbook trainer", "speculators trainer")
    overlap = all(
        ours[s]["al_low"] <= theirs[s]["al_high"] and theirs[s]["al_low"] <= ours[s]["al_high"]
        for s in ("workbook", "humaneval")
    )
    assert overlap == ("intervals overlap on both sets, so this run does not rank them" in GPU_DOC)
