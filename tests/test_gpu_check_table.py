"""scripts/gpu_check_table.py on a synthetic run folder: steps, kept notebooks, peak memory and
engine starts fall in the right rows."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from tests.support import load_script

table = load_script("gpu_check_table")


def _run_folder(root: Path, now: int) -> Path:
    """A folder as gpu_check.sh leaves it: one nb step in lane 1 with two notebooks."""
    (root / "tiny").mkdir(parents=True)
    (root / "summary.txt").write_text(f"commit x start {now}\nnb rc=0 {now} {now + 100} lane=1\n")
    notebooks = [
        {"notebook": "01_a.ipynb", "start": now + 1, "end": now + 40, "seconds": 39.0},
        {"notebook": "02_b.ipynb", "start": now + 41, "end": now + 99, "seconds": 58.0},
    ]
    for nb, failed in zip(notebooks, (0, 1)):
        nb |= {"passed": 9, "failed": failed, "skipped": 0, "first_failed_cell": None}
    (root / "tiny" / "nbval-times.json").write_text(json.dumps(notebooks))
    starts = [(45, 30.2, "V2"), (60, 5.1, "V2"), (70, 4.0, "V1")]
    journal = [{"time": now + t, "seconds": s, "model_runner": r} for t, s, r in starts]
    (root / "lane-1-engine-starts.jsonl").write_text("\n".join(map(json.dumps, journal)))
    stamp = "%Y/%m/%d %H:%M:%S.%f"
    samples = [
        f"{dt.datetime.fromtimestamp(now + i).strftime(stamp)}, {1024 * i}" for i in (10, 50)
    ]
    (root / "gpumem.csv").write_text("\n".join(samples + ["2026/12/02 10:00"]) + "\n")
    return root


def test_rows_put_memory_and_engine_starts_in_their_notebook(tmp_path: Path) -> None:
    now = int(dt.datetime(2026, 12, 2, 10).timestamp())
    lines = table.rows(_run_folder(tmp_path, now))
    step, first, second = lines[2:]
    assert step.startswith(
        "| nb (lane 1) | 0 | 100 | 50.0 | 3: first 30 s, then 4–5 s; runner V1/V2"
    )
    assert first == "| · tiny 01_a.ipynb | 0 of 9 | 39 | 10.0 | – |"
    assert second.startswith("| · tiny 02_b.ipynb | 1 of 10 | 58 | 50.0 | 3: first 30 s")


def test_a_folder_without_a_summary_is_a_one_line_refusal(tmp_path: Path, capsys) -> None:
    assert table.main(["x", str(tmp_path)]) == 2
    assert capsys.readouterr().out.startswith("usage: ")
