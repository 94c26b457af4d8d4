"""Outcome sentences come from the run: the typed ones found in review must not come back.

Rankings, directions and "best k" are printed by the notebooks from their tables, with intervals
(helpers.analytics.intervals); a sentence that states an outcome in prose would outlive the run
that justified it. This list is the ones reviewers found; add any new one here when removing it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers.common.paths import DATA_DIR, NOTEBOOKS_DIR, REPO_ROOT
from tests.test_readme_contract import README_DOCS

TYPED_OUTCOMES = [
    r"structured text is easiest",
    r"largest for one request at a time",
    r"about as (much|expensive) as one",
    r"code below prose",
    r"easier to guess than a poem",
    r"shrinks as concurrency",
    r"speed-?up (falls|shrinks) (as|with) (the )?(batch|concurrency)",
    r"prose turned out slightly more predictable than code",
    # recorded numbers are computed from data/measurements/ (helpers.analytics.speedup), not typed
    r"(tau|τ) ?(>|exceeds|must exceed) ?\d\.\d\d",
    r"\d\.\d+ plain steps",
    r"\d\.\d\d ?[-–] ?\d\.\d\d ?[x×] (the )?plain",
]


def _texts() -> list[tuple[str, str]]:
    """(name, text) of every notebook cell, the README and the docs it moved to, the model cards
    and their generator, and every profile note."""
    out = []
    for nb in sorted(NOTEBOOKS_DIR.glob("*.ipynb")):
        for i, cell in enumerate(json.loads(nb.read_text())["cells"]):
            out.append((f"{nb.name} cell {i}", "".join(cell["source"])))
    files = [REPO_ROOT / "README.md", *(REPO_ROOT / "docs" / f"{n}.md" for n in README_DOCS)]
    files += DATA_DIR.glob("*/README.md")
    files.append(REPO_ROOT / "src" / "helpers" / "tiny" / "model_cards.py")
    out += [(str(p.relative_to(REPO_ROOT)), p.read_text()) for p in files if p.is_file()]
    for path in sorted((DATA_DIR / "profiles").glob("*.json")):
        notes = json.loads(path.read_text()).get("notes", [])
        out += [(f"{path.relative_to(REPO_ROOT)} note {i}", note) for i, note in enumerate(notes)]
    return out


@pytest.mark.parametrize("pattern", TYPED_OUTCOMES)
def test_no_typed_outcome_sentence(pattern: str) -> None:
    hits = [name for name, text in _texts() if re.search(pattern, text, re.IGNORECASE)]
    assert not hits, f"typed outcome /{pattern}/ in {hits}: compute it from the run's table"


def test_the_scan_sees_the_files() -> None:
    names = [name for name, _ in _texts()]
    assert any(n.startswith("README.md") for n in names)
    assert all(f"docs/{n}.md" in names for n in README_DOCS)
    assert sum(".ipynb cell" in n for n in names) > 100
    assert Path(REPO_ROOT / "README.md").is_file()
