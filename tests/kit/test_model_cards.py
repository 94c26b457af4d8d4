"""helpers.model_cards: targets are judged from measurements; shipped cards match the shipped numbers."""

from __future__ import annotations

import json

from helpers.common.paths import DATA_DIR, RECIPE_LOG
from helpers.common.prompts import CATEGORIES
from kit.model_cards import _drafter_card, _verifier_card, check_targets
from kit.tiny_recipe import DRAFTER_NAME, VERIFIER_NAME


def fake_results(
    taus: list[float], identical: int = 4, ratio: float = 0.8, speed: float = 2.0
) -> dict:
    row = {c: {"tau": t, "per_position": [0.8]} for c, t in zip(CATEGORIES, taus)}
    row |= {"k": 3, "all": {"tau": sum(taus) / len(taus), "per_position": [0.8]}}
    tp = lambda x: {"1": {"output_tokens_per_s": x}, "16": {"output_tokens_per_s": x}}  # noqa: E731
    return {
        "acceptance": [row],
        "lossless": {"3": {"identical": identical, "total": 4}},
        "quality": {
            c: {"distinct_4gram_ratio": ratio, "max_repeated_line_run": 1, "mean_tokens": 9}
            for c in CATEGORIES
        },
        "throughput": {"plain": tp(100.0), "spec": tp(100.0 * speed)},
    }


def test_targets_met_and_missed() -> None:
    assert all(ok for ok, _ in check_targets(fake_results([3.5, 3.0, 2.8, 2.6])).values())
    missed = check_targets(fake_results([2.0, 2.5, 2.2, 2.1], identical=3, ratio=0.4, speed=1.2))
    assert not any(ok for ok, _ in missed.values())
    assert missed["lossless"][1] == "3/4 outputs over k=1..5"


def test_shipped_cards_are_rendered_from_the_shipped_measurements() -> None:
    res = json.loads((DATA_DIR / "tiny-pair-bench.json").read_text())
    log = json.loads((DATA_DIR / RECIPE_LOG).read_text())
    assert (DATA_DIR / VERIFIER_NAME / "README.md").read_text() == _verifier_card(res, log)
    assert (DATA_DIR / DRAFTER_NAME / "README.md").read_text() == _drafter_card(res, log)
