"""The table of a scripts/gpu_check.sh run: per step and per notebook, seconds, peak GPU memory,
engine starts and the model runner that ran them, read from what the run left in its folder.

    python scripts/gpu_check_table.py build/gpu-check          (gpu_check.sh runs it at the end)

Inputs, all written by the run: summary.txt ("STEP rc=N START END lane=L" lines), gpumem.csv
(nvidia-smi samples), tiny/ and shape-NN/nbval-times.json (kit.nbval_keep) and
lane-L-engine-starts.jsonl (helpers.engine.lifecycle.journal_start, one line per engine or server
start). Peak memory is the whole GPU's: with several lanes at once it counts every lane.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any


def kept_folder(step: str) -> str | None:
    """Where gpu_check.sh keeps a step's executed notebooks: tiny/ for nb, tiny-NN/ for nb-NN,
    shape-NN/ for its own."""
    if step == "nb":
        return "tiny"
    if step.startswith("nb-"):
        return "tiny-" + step[3:]
    return step if step.startswith("shape-") else None


def read_steps(summary: Path) -> list[dict[str, Any]]:
    """Every finished step of summary.txt: name, rc, start, end, lane."""
    steps = []
    for line in summary.read_text().splitlines():
        parts = line.split()
        if len(parts) == 5 and parts[1].startswith("rc=") and parts[4].startswith("lane="):
            steps.append(
                {
                    "step": parts[0],
                    "rc": int(parts[1][3:]),
                    "start": int(parts[2]),
                    "end": int(parts[3]),
                    "lane": parts[4][5:],
                }
            )
    return steps


def read_memory(csv: Path) -> list[tuple[float, int]]:
    """(epoch seconds, MiB in use) per nvidia-smi sample; lines cut short are skipped."""
    samples = []
    for line in csv.read_text().splitlines() if csv.is_file() else []:
        try:
            stamp, used = (x.strip() for x in line.split(","))
            when = dt.datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f").timestamp()
            samples.append((when, int(used)))
        except ValueError:
            continue
    return samples


def peak_gib(memory: list[tuple[float, int]], start: float, end: float) -> float | None:
    """The most GPU memory in use between start and end (one sample's slack after), in GiB."""
    inside = [mib for when, mib in memory if start <= when <= end + 1]
    return round(max(inside) / 1024, 1) if inside else None


def read_journal(path: Path) -> list[dict[str, Any]]:
    """The engine-start records of one lane."""
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def starts_between(journal: list[dict[str, Any]], start: float, end: float) -> str:
    """The engine starts in [start, end]: how many, first and later seconds, the runners."""
    inside = [r for r in journal if start <= r["time"] <= end + 1]
    if not inside:
        return "–"
    runners = sorted({str(r.get("model_runner")) for r in inside})
    later = sorted(r["seconds"] for r in inside[1:])
    later_text = f", then {later[0]:.0f}–{later[-1]:.0f} s" if later else ""
    return (
        f"{len(inside)}: first {inside[0]['seconds']:.0f} s{later_text}; runner {'/'.join(runners)}"
    )


def rows(folder: Path) -> list[str]:
    """The markdown table, a line each."""
    steps = read_steps(folder / "summary.txt")
    memory = read_memory(folder / "gpumem.csv")
    out = [
        "| step · notebook | rc · cells failed | seconds | peak GPU memory (GiB) | engine starts |",
        "|---|---|---|---|---|",
    ]
    for step in steps:
        journal = read_journal(folder / f"lane-{step['lane']}-engine-starts.jsonl")
        peak = peak_gib(memory, step["start"], step["end"])
        started = starts_between(journal, step["start"], step["end"])
        out.append(
            f"| {step['step']} (lane {step['lane']}) | {step['rc']} | "
            f"{step['end'] - step['start']} | {peak} | {started} |"
        )
        kept = kept_folder(step["step"])
        times = folder / (kept or "-") / "nbval-times.json"
        if not kept or not times.is_file():
            continue
        for nb in json.loads(times.read_text()):
            if not step["start"] <= nb["start"] <= step["end"] + 1:
                continue
            started = starts_between(journal, nb["start"], nb["end"])
            out.append(
                f"| · {kept} {nb['notebook']} | {nb['failed']} of "
                f"{nb['passed'] + nb['failed']} | {nb['seconds']:.0f} | "
                f"{peak_gib(memory, nb['start'], nb['end'])} | {started} |"
            )
    return out


def main(argv: list[str]) -> int:
    """Print the table of the run folder argv[1]."""
    if len(argv) != 2 or not (Path(argv[1]) / "summary.txt").is_file():
        print("usage: python scripts/gpu_check_table.py RUN_FOLDER (with its summary.txt)")
        return 2
    print("\n".join(rows(Path(argv[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
