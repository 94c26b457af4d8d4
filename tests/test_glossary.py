"""The glossary (notebooks/00_glossary.md): every required term has an anchor, every notebook header
links to it, every glossary link lands on an anchor, and each required term is linked from a
notebook (the terms that one notebook alone linked are linked from a second too, so that dropping a
chapter leaves them linked). The last holds for the whole workbook: a fork of a few chapters may not
meet every term (`whole_workbook`; kit.drop_check notes it)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from helpers.common.paths import NOTEBOOKS_DIR

GLOSSARY = NOTEBOOKS_DIR / "00_glossary.md"
#: Notebooks whose header must link to the glossary (07 is edited elsewhere; its links are still checked).
CHAPTERS = sorted(p for p in NOTEBOOKS_DIR.glob("0[1-6]_*.ipynb"))
ALL_NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
#: Terms the workbook uses before or without defining them: anchor -> what it defines.
REQUIRED = {
    "taps": "taps / aux hidden states",
    "residual-stream": "residual stream",
    "ttt": "TTT, training-time test",
    "step-cost": "c(k), the step-cost ratio",
    "alpha": "α vs vLLM's acceptance rate",
    "tau": "τ, mean acceptance length",
    "prefill": "prefill",
    "decode": "decode",
    "ignore-eos": "ignore_eos",
    "k": "k / num_speculative_tokens",
    "draft-vocabulary": "draft vocabulary, d2t, t2d",
    "verifier": "verifier",
    "drafter": "drafter",
    "moe": "MoE, expert union",
    "bonus-token": "bonus token",
    "rejection-sampling": "rejection sampling",
    "nbval": "nbval",
    "sources": "named sources",
}
#: Required terms a learner meets in the notebooks; each must be linked from at least one.
LINKED_FROM_NOTEBOOKS = set(REQUIRED) - {"nbval", "sources"}
LINK = re.compile(r"\]\(00_glossary\.md(?:#([^)\s]*))?\)")


def anchors() -> set[str]:
    return set(re.findall(r'<a id="([^"]+)"></a>', GLOSSARY.read_text()))


def markdown(path: Path) -> str:
    nb = nbformat.read(str(path), as_version=4)
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def test_glossary_defines_every_required_term() -> None:
    missing = sorted(set(REQUIRED) - anchors())
    assert not missing, f"00_glossary.md has no anchor for: {[REQUIRED[m] for m in missing]}"


def test_glossary_links_land_on_its_own_anchors() -> None:
    text, have = GLOSSARY.read_text(), anchors()
    broken = sorted({a for a in re.findall(r"\]\(#([^)\s]+)\)", text)} - have)
    assert not broken, f"00_glossary.md links to missing anchors: {broken}"


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_header_links_to_the_glossary(path: Path) -> None:
    nb = nbformat.read(str(path), as_version=4)
    header = next(c for c in nb.cells if c.cell_type == "markdown")
    assert "](00_glossary.md)" in header.source, f"{path.name}: header does not link 00_glossary.md"


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=[p.name for p in ALL_NOTEBOOKS])
def test_every_glossary_link_target_exists(path: Path) -> None:
    have = anchors()
    broken = sorted({a for a in LINK.findall(markdown(path)) if a and a not in have})
    assert not broken, f"{path.name} links to glossary anchors that do not exist: {broken}"


@pytest.mark.whole_workbook
def test_required_terms_are_linked_where_used() -> None:
    linked = {a for p in ALL_NOTEBOOKS for a in LINK.findall(markdown(p))}
    missing = sorted(LINKED_FROM_NOTEBOOKS - linked)
    assert not missing, f"no notebook links these glossary terms: {missing}"


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_no_unnamed_documents(path: Path) -> None:
    """Sources are named and linked, never "the documents" the learner never saw."""
    hits = re.findall(r"[Tt]he documents\b", markdown(path))
    assert not hits, f"{path.name} cites 'the documents': name and link the source instead"
