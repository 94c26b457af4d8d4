"""The no-progress watchdog of notebook runs: how long a cell may stay silent, from its measured
time, and the one line a stalled cell fails with.

A cell may go without output for 10 × its last measured time, at least 120 s, or 600 s when it was
never measured (a fixed limit replaces both when given); past that the run fails with the
notebook, the cell and its last output instead of waiting out the notebook's budget. kit.runner
watches the kernel's output as it comes; kit.nbval_watchdog holds nbval's cells to the same limits
(nbval reads a cell's output only when the cell ends, so there the limit caps the cell's running
time). The measured times live in build/cell-times.json: per notebook, each code cell's seconds by
cell id, written after every run by both (writers at once take turns on it).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import secrets
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = []  # kit.runner and kit.nbval_watchdog use it, nothing outside the kit

#: The measured times' file, in the build folder.
TIMES_NAME = "cell-times.json"
#: The least silence any cell is allowed (seconds): imports and engine starts vary a lot on a
#: loaded 2-core machine (10× seen with three runs at once).
_FLOOR = 120.0
#: A measured cell may stay silent this many times its last measured time.
_FACTOR = 10.0
#: A cell never measured (a first run, a new cell) may stay silent this long.
_DEFAULT = 600.0
#: At most this many characters of a cell's last output go into the stall line.
_LAST_OUTPUT_CHARS = 160


@dataclass(frozen=True)
class CellLimit:
    """How long one cell may stay silent, and why (for the stall line)."""

    seconds: float
    reason: str


def cell_key(cell: Mapping[str, Any], index: int) -> str:
    """A code cell's key in the times record: its nbformat id, else '#<index>' (0-based, among
    all cells)."""
    cell_id = cell.get("id")
    return str(cell_id) if cell_id else f"#{index}"


def _limit(measured: float | None, fixed: float | None) -> CellLimit:
    """One cell's limit: `fixed` when given, else from its measured seconds."""
    if fixed is not None:
        return CellLimit(fixed, "the limit given")
    if measured is None:
        return CellLimit(_DEFAULT, "never measured")
    seconds = max(_FLOOR, _FACTOR * measured)
    return CellLimit(seconds, f"{_FACTOR:.0f} × its last {measured:.1f} s, at least {_FLOOR:.0f} s")


def cell_limit(
    cell: Mapping[str, Any], index: int, times: Mapping[str, float], fixed: float | None = None
) -> CellLimit:
    """One cell's silence limit (`index`: its place among all cells), from its notebook's
    measured times; `fixed` instead when given."""
    return _limit(times.get(cell_key(cell, index)), fixed)


def cell_limits(
    cells: Sequence[Mapping[str, Any]], times: Mapping[str, float], fixed: float | None = None
) -> list[CellLimit]:
    """Each cell's silence limit (by index), from a notebook's measured times."""
    return [cell_limit(cell, i, times, fixed) for i, cell in enumerate(cells)]


def _valid_times(record: Any) -> dict[str, float]:
    """A notebook's record with every entry that is not a finite, non-negative number dropped."""
    if not isinstance(record, dict):
        return {}
    return {
        str(key): float(value)
        for key, value in record.items()
        if isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    }


def read_times(build_dir: Path, notebook: str) -> dict[str, float]:
    """The measured seconds of `notebook`'s cells by key ({} when none, or the file is damaged:
    a damaged record only makes every cell 'never measured')."""
    try:
        data = json.loads((build_dir / TIMES_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return _valid_times(data.get(notebook)) if isinstance(data, dict) else {}


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on `path`'s sidecar lock file (<path>.lock) for the block, so
    writers at once take turns at reading and rewriting `path` (OSError when it cannot be
    opened)."""
    lock_path = path.with_name(f"{path.name}.lock")
    with lock_path.open("a", encoding="utf-8") as handle:  # closing it releases the lock
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield


def record_times(build_dir: Path, notebook: str, times: Mapping[str, float]) -> Path:
    """Merge `times` (seconds by cell key) into `notebook`'s record in build_dir/cell-times.json,
    under its lock, replacing the file whole; OSError when build_dir cannot be written."""
    build_dir.mkdir(parents=True, exist_ok=True)
    path = build_dir / TIMES_NAME
    with locked(path):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        if not isinstance(data, dict):
            data = {}
        data[notebook] = _valid_times(data.get(notebook)) | _valid_times(dict(times))
        partial = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.partial")
        try:
            partial.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
            os.replace(partial, path)
        finally:
            partial.unlink(missing_ok=True)
    return path


def _output_text(output: Mapping[str, Any]) -> str:
    """One output as text: a stream's text, an error's name and value, else its plain text or its
    type and MIME types."""
    kind = output.get("output_type", "?")
    if kind == "stream":
        return str(output.get("text", ""))
    if kind == "error":
        return f"{output.get('ename', '')}: {output.get('evalue', '')}"
    data = output.get("data") or {}
    if "text/plain" in data:
        text = data["text/plain"]
        return "".join(text) if isinstance(text, list) else str(text)
    return f"{kind} ({', '.join(sorted(data)) or 'empty'})"


def last_output(outputs: Sequence[Mapping[str, Any]]) -> str:
    """The last non-empty line of a cell's outputs, shortened ('(none)' when it printed
    nothing)."""
    for output in reversed(outputs):
        lines = [line.strip() for line in _output_text(output).splitlines() if line.strip()]
        if lines:
            line = lines[-1]
            cut = len(line) > _LAST_OUTPUT_CHARS
            return repr(line[:_LAST_OUTPUT_CHARS] + ("…" if cut else ""))
    return "(none)"


def stall_line(notebook: str, cell: int, what: str, limit: CellLimit, last: str) -> str:
    """The one line a stalled cell fails with: notebook, cell (1-based, among all cells), what
    happened ('silent for 130 s'), the limit and why, the last output."""
    return (
        f"{notebook} cell {cell}: {what} (limit {limit.seconds:.0f} s: {limit.reason}); "
        f"last output: {last}"
    )
