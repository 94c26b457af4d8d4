"""Sentences an expert review found wrong (issue #32) must not come back, in any notebook, the
glossary, the guides, the README or a helper's docstring.

Each entry is the wrong sentence and what is right instead; the right wording lives in one place
(the glossary's entries, `helpers.analytics.intervals`, `helpers.eagle3.taps`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers.common.paths import REPO_ROOT

#: (pattern, what is right instead)
WRONG = [
    (
        r"which is why the tiny drafter states its layers|fewer than 8 layers",
        "for L = 8 the default (2, 4, 5) is the tiny drafter's own list; it repeats a layer at "
        "L = 4-6 (notebook 02 computes it)",
    ),
    (
        r"after the tapped layers|between layer i and layer i\s?\+\s?1",
        "tap k is the residual stream after k layers: the output of 0-based layer k - 1, "
        "transformers' hidden_states[k] (helpers.eagle3.taps)",
    ),
    (
        r"never schedules a partial draft",
        "the scheduler trims drafts to its token budget and the model length; n-gram proposes "
        "fewer than k",
    ),
    (r"minus what drafting costs", "the speed-up is a ratio, τ / c"),
    (
        r"each step is cheap: one small layer",
        "the drafter's first pass covers the positions the last step added (up to k + 1)",
    ),
    (
        r"predicts position t\s?\+\s?1\s?\+\s?j",
        "step j predicts token t+2+j, scored against the verifier's distribution at t+1+j",
    ),
    (
        r"decode steps read all the weights",
        "a MoE step at a small batch reads only the experts its tokens route to",
    ),
    (
        r"95 % bootstrap|request-bootstrap|resamples? whole requests with replacement",
        "intervals over requests are jackknife t-intervals (helpers.analytics.intervals)",
    ),
]


def _texts() -> list[tuple[str, str]]:
    """(where, text) of every notebook cell and every markdown and Python file we ship."""
    out = []
    for nb in sorted((REPO_ROOT / "notebooks").glob("*.ipynb")):
        for i, cell in enumerate(json.loads(nb.read_text())["cells"]):
            out.append((f"{nb.name} cell {i}", "".join(cell["source"])))
    files: list[Path] = [REPO_ROOT / "README.md"]
    for folder in ("notebooks", "docs", "exercises", "src"):
        files += sorted((REPO_ROOT / folder).rglob("*.md"))
        files += sorted((REPO_ROOT / folder).rglob("*.py"))
    out += [(str(p.relative_to(REPO_ROOT)), p.read_text()) for p in files if p.is_file()]
    return out


@pytest.mark.parametrize(("pattern", "right"), WRONG, ids=[w[0][:40] for w in WRONG])
def test_a_known_wrong_sentence_is_gone(pattern: str, right: str) -> None:
    found = [where for where, text in _texts() if re.search(pattern, text, re.IGNORECASE)]
    assert not found, f"{found}: '{pattern}' is wrong; {right}"


def test_the_patterns_catch_the_sentences_they_were_written_for() -> None:
    sentences = [
        "For fewer than 8 layers the default can repeat a layer",
        "collect the residual stream after the tapped layers",
        "the tensor between layer i and layer i+1",
        "(vLLM never schedules a partial draft)",
        "tokens per verifier pass, minus what drafting costs",
        "(each step is cheap: one small layer)",
        "Step j predicts position t+1+j",
        "Decode steps read all the weights for little compute",
        "every τ comes with a 95 % bootstrap interval",
    ]
    for sentence in sentences:
        assert any(re.search(p, sentence, re.IGNORECASE) for p, _ in WRONG), sentence
