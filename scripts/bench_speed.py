"""Time the workbook the way a learner meets it, from a fresh clone, against the speed targets.

    python3 scripts/bench_speed.py [--workdir /tmp/speed-clone] [--skip-test]

Clones this repository into --workdir (deleted first) and, in that clone: `make run` (which creates
.venv on first use), watching for notebook 02's acceptance plot; three engine starts of the tiny pair
(plain, k=3, k=3 again); then `CI=true make test` and `make browser-test`, exactly what .ci/run does.
Prints each figure next to its target, writes build/speed-bench.json and build/speed-bench.md in the
clone and copies both to this repo's build/. A measurement, not a test: it always exits 0 once every
step ran (a failing step exits 1 with its log's tail).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
#: (name, target seconds): issue "Speed on a learner's laptop", with issue #43's tighter two
#: (make run, make test).
TARGETS: dict[str, float] = {
    "first acceptance plot (fresh clone, install included)": 300,
    "each notebook": 180,
    "notebook 05": 240,
    "make run, all notebooks": 600,
    "make test": 900,
    "engine start": 12,
}
FIRST_PLOT = "build/figures/02_tau_by_task.png"
#: How the table names the clone's workbook: its commit's date and subject in UTC, not the hash,
#: which goes stale when history is reworded.
WORKBOOK_LOG = ["log", "-1", "--date=format-local:%Y-%m-%d %H:%M UTC", "--format=%cd (%s)"]
ENGINE_PROBE = """
import json, time
from helpers.common.profiles import load_profile
from helpers.engine.lifecycle import engine_kwargs, open_engine
profile, out = load_profile("tiny"), []
for k in (0, 3, 3):
    t0 = time.perf_counter()
    with open_engine(**engine_kwargs(profile, k=k)) as llm:
        out.append({"k": k, "start_s": round(time.perf_counter() - t0, 1)})
print("STARTS", json.dumps(out))
"""


def run_step(name: str, cmd: list[str], cwd: Path, env: dict[str, str], watch: str = "") -> dict:
    """Run one step with its output in build/speed-bench-<name>.log; seconds, and when `watch` appeared."""
    log = cwd / "build" / f"speed-bench-{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    t0, seen = time.monotonic(), None
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        while proc.poll() is None:
            if watch and seen is None and (cwd / watch).exists():
                seen = time.monotonic() - t0
            time.sleep(1)
    result = {"step": name, "seconds": round(time.monotonic() - t0, 1), "rc": proc.returncode}
    if watch:
        result["watched_seconds"] = None if seen is None else round(seen, 1)
    print(f"[bench] {name}: rc {proc.returncode}, {result['seconds']} s", flush=True)
    if proc.returncode != 0:
        tail = log.read_text().splitlines()[-15:]
        print("\n".join(tail))
    return result


def table_rows(res: dict[str, Any]) -> list[tuple[str, float, float | None]]:
    """(what, target s, measured s) for every target; None where the run did not measure it."""
    run, notebooks = res["make_run"], res["notebooks"]
    rows: list[tuple[str, float, float | None]] = [
        (
            "first acceptance plot (fresh clone, install included)",
            TARGETS["first acceptance plot (fresh clone, install included)"],
            run.get("watched_seconds"),
        )
    ]
    for nb in notebooks:
        is05 = nb["notebook"].startswith("05")
        rows.append(
            (
                f"notebook {nb['notebook'].removesuffix('.ipynb')}",
                TARGETS["notebook 05" if is05 else "each notebook"],
                nb["seconds"],
            )
        )
    rows.append(
        ("make run, all notebooks", TARGETS["make run, all notebooks"], res["notebooks_seconds"])
    )
    rows += [
        (f"engine start (k={s['k']})", TARGETS["engine start"], s["start_s"])
        for s in res["engine_starts"]
    ]
    test = res.get("make_test")
    rows.append(("make test", TARGETS["make test"], test["seconds"] if test else None))
    return rows


def markdown(res: dict[str, Any]) -> str:
    """The result as a table for docs/measurements.md: measured next to target, met or missed."""
    lines = [
        f"Measured by `python3 scripts/bench_speed.py` on {res['date']} ({res['machine']}), from a "
        f"fresh clone of the workbook as of {res['workbook']}.",
        "",
        "| what | target | measured | |",
        "|---|---|---|---|",
    ]
    for what, target, got in table_rows(res):
        verdict = "not measured" if got is None else ("met" if got <= target else "**missed**")
        shown = "—" if got is None else f"{got:.0f} s"
        lines.append(f"| {what} | ≤ {target:.0f} s | {shown} | {verdict} |")
    extra = res.get("browser_test")
    if extra:
        lines.append(
            f"| make browser-test (after make test, as in .ci/run) | — | {extra['seconds']:.0f} s | |"
        )
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags."""
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--workdir", type=Path, default=Path("/tmp/speed-clone"))
    p.add_argument("--skip-test", action="store_true", help="only make run and the engine starts")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Clone, time every step, print and save the table."""
    args = parse_args(argv)
    shutil.rmtree(args.workdir, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", str(REPO), str(args.workdir)], check=True)
    clone = args.workdir
    workbook = subprocess.run(
        ["git", *WORKBOOK_LOG],
        cwd=clone,
        capture_output=True,
        text=True,
        env={**os.environ, "TZ": "UTC"},
    ).stdout.strip()
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "WORKBOOK_PROFILE")}
    res: dict[str, Any] = {
        "workbook": workbook,
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()} cores, {os.uname().sysname} {os.uname().machine}",
    }
    res["make_run"] = run_step("make-run", ["make", "run"], clone, env, watch=FIRST_PLOT)
    summary_path = clone / "build" / "run-summary.json"
    if not summary_path.is_file():  # make run stopped before any notebook ran (setup, preflight)
        print(f"[bench] make run wrote no {summary_path}: see its log above; nothing to time")
        return 1
    summary = json.loads(summary_path.read_text())
    res["notebooks"] = [
        {k: nb[k] for k in ("notebook", "seconds", "peak_rss_gib", "ok")}
        for nb in summary["notebooks"]
    ]
    res["notebooks_seconds"] = round(sum(nb["seconds"] for nb in res["notebooks"]), 1)
    probe = subprocess.run(
        [str(clone / ".venv/bin/python"), "-c", ENGINE_PROBE],
        cwd=clone,
        env={**env, "HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": "ERROR"},
        capture_output=True,
        text=True,
    )
    starts = [line for line in probe.stdout.splitlines() if line.startswith("STARTS ")]
    res["engine_starts"] = json.loads(starts[-1][7:]) if starts else []
    if not args.skip_test:
        res["make_test"] = run_step("make-test", ["make", "test"], clone, {**env, "CI": "true"})
        res["browser_test"] = run_step("browser-test", ["make", "browser-test"], clone, env)
    text = markdown(res)
    for folder in (clone / "build", REPO / "build"):
        folder.mkdir(exist_ok=True)
        (folder / "speed-bench.json").write_text(json.dumps(res, indent=2) + "\n")
        (folder / "speed-bench.md").write_text(text)
    print(text)
    failed = [s for s in ("make_run", "make_test", "browser_test") if res.get(s, {}).get("rc")]
    return 1 if failed or not starts else 0


if __name__ == "__main__":
    sys.exit(main())
