"""Notebook 02 shows vLLM's own API before the workbook's helper wraps it: `LLM(...)` with a
speculative_config, `SamplingParams(...)`, `llm.chat` and `llm.get_metrics()`, literally, in a code
cell that comes before the first `lifecycle.open_engine`."""

from __future__ import annotations

import json

from helpers.common.paths import NOTEBOOKS_DIR

NOTEBOOK = NOTEBOOKS_DIR / "02_eagle3_engine.ipynb"


def code_cells() -> list[str]:
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def test_vllms_own_calls_come_first_and_literally() -> None:
    cells = code_cells()
    literal = [
        i
        for i, src in enumerate(cells)
        if "LLM(" in src and "speculative_config={" in src and "SamplingParams(" in src
    ]
    assert literal, "no code cell writes LLM(..., speculative_config={...}) and SamplingParams("
    cell = cells[literal[0]]
    for call in (
        '"method": "eagle3"',
        '"num_speculative_tokens": k',
        "llm.chat(",
        "llm.get_metrics()",
    ):
        assert call in cell, call
    helper = min(i for i, src in enumerate(cells) if "lifecycle.open_engine(" in src)
    assert literal[0] < helper, "vLLM's own call comes before the helper that wraps it"


def test_the_hand_written_engine_starts_inside_engine_process() -> None:
    cell = next(src for src in code_cells() if "LLM(" in src and "speculative_config={" in src)
    lines = cell.splitlines()
    opened = next(i for i, line in enumerate(lines) if "lifecycle.engine_process(" in line)
    call = next(i for i, line in enumerate(lines) if "LLM(" in line)
    assert lines[opened].startswith("with ") and call == opened + 1
    assert lines[call].startswith("    "), "LLM(...) runs inside the with block"
