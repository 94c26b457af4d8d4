"""kit.nbval_keep: nbval's own execution kept (outputs, a traceback) and timed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """nbval with the plugin on one notebook whose third code cell raises: (DIR, the run)."""
    root = tmp_path_factory.mktemp("nbval_keep")
    cells = [
        new_markdown_cell("# kept"),
        new_code_cell("print('hello')\n40 + 2"),
        new_code_cell("import sys\nprint('to stderr', file=sys.stderr)"),
        new_code_cell("raise ValueError('boom')"),
        new_code_cell("print('after')"),
    ]
    nbformat.write(new_notebook(cells=cells), str(root / "kept.ipynb"))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax"]
        + ["--nbval-current-env", "kept.ipynb", "-p", "kit.nbval_keep"]
        + ["--nbval-keep", "out"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return root / "out", done


def test_the_executed_notebook_keeps_each_cells_outputs(kept) -> None:
    out, done = kept
    assert done.returncode == 1, done.stdout  # the raising cell fails the run
    nb = nbformat.read(str(out / "kept.ipynb"), as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == [1, 2, 3, 4]
    first = {o.output_type: o for o in code[0].outputs}
    assert first["stream"].text == "hello\n" and first["execute_result"].data["text/plain"] == "42"
    assert code[1].outputs[0].name == "stderr"
    assert code[2].outputs[0].output_type == "error" and code[2].outputs[0].evalue == "boom"
    assert code[3].outputs[0].text == "after\n"


def test_the_times_record_counts_cells_and_names_the_first_failure(kept) -> None:
    out, _ = kept
    (record,) = json.loads((out / "nbval-times.json").read_text())
    assert record["notebook"] == "kept.ipynb"
    assert (record["passed"], record["failed"], record["skipped"]) == (3, 1, 0)
    assert record["first_failed_cell"] == 2
    assert 0 < record["seconds"] == round(record["end"] - record["start"], 1)


def test_without_the_option_nothing_is_written(tmp_path: Path) -> None:
    nbformat.write(new_notebook(cells=[new_code_cell("1")]), str(tmp_path / "one.ipynb"))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax"]
        + ["--nbval-current-env", "one.ipynb", "-p", "kit.nbval_keep"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.ipynb"]
