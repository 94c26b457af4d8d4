"""helpers.tiny.corpus: seeded categories (the held-out prompts' recipe is kit.tiny_recipe's)."""

from __future__ import annotations

import json

from helpers.common.prompts import CATEGORIES, load_prompts
from helpers.tiny.corpus import make_examples


def test_generation_is_seeded_and_per_category() -> None:
    for cat in CATEGORIES:
        a, b = make_examples(cat, 5, seed=3), make_examples(cat, 5, seed=3)
        assert a == b and all(ex.category == cat for ex in a)
        assert make_examples(cat, 5, seed=4) != a


def test_structured_answers_are_json_copied_from_the_request() -> None:
    for ex in make_examples("structured", 20, 0):
        for record in json.loads(ex.assistant):
            assert record["name"] in ex.user and f"age {record['age']}" in ex.user


def test_code_answers_define_the_requested_function() -> None:
    for ex in make_examples("code", 20, 0):
        name = ex.user.split("`")[1]
        assert f"def {name}(" in ex.assistant


def test_shipped_prompts_have_every_category() -> None:
    prompts = load_prompts()
    assert set(prompts) == set(CATEGORIES) and all(len(v) >= 8 for v in prompts.values())
