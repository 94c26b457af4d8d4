"""helpers.analytics.field: the comparison table and its checks against the installed vLLM."""

from __future__ import annotations

import pytest

from helpers.analytics.field import METHODS, has_token_tree, installed_methods, methods_table

pytest.importorskip("vllm")


def test_every_row_names_a_method_this_vllm_knows_and_a_source() -> None:
    known = installed_methods()
    assert {"eagle3", "ngram", "draft_model", "medusa", "suffix"} <= known
    for m in METHODS:
        assert m.vllm_method in known, m.name
        assert "arXiv" in m.source or "github.com" in m.source, m.name
    table = methods_table()
    assert table["in this vLLM"].all() and "EAGLE-3" in table.index


def test_token_tree_is_checked_not_assumed() -> None:
    assert isinstance(has_token_tree(), bool)
