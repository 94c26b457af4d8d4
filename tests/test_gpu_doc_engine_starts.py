"""docs/gpu.md's engine-start table is the recorded file's numbers, not typed ones."""

from __future__ import annotations

import json
import re

from helpers.common.paths import DATA_DIR, REPO_ROOT

RECORD = json.loads((DATA_DIR / "measurements" / "h200-engine-starts.json").read_text())
GPU_DOC = (REPO_ROOT / "docs" / "gpu.md").read_text()


def test_each_row_of_the_engine_start_table_is_a_recorded_run() -> None:
    table = GPU_DOC.split("| configuration | starts (s)")[1].split("\n\n")[0]
    rows = [line for line in table.splitlines()[2:] if line.startswith("|")]
    assert len(rows) == len(RECORD["runs"])
    for line, run in zip(rows, RECORD["runs"]):
        starts, rates = (re.findall(r"\d[\d,]*(?:\.\d+)?", c) for c in line.split("|")[2:4])
        assert [float(x) for x in starts] == [round(e["start_s"], 1) for e in run["engines"]]
        recorded = [round(e["output_tokens_per_s"]) for e in run["engines"]]
        assert [int(x.replace(",", "")) for x in rates] == recorded, run["config"]
        assert run["greedy_identical"] in line
