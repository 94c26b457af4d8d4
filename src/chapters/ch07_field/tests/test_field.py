"""chapters.ch07_field.field: the methods table and its checks against the installed vLLM, and the
comparison over all decode steps."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from chapters.ch07_field import field
from helpers.common.counters import RequestAcceptance, SpecCounters
from helpers.common.paths import DATA_DIR
from helpers.engine import compat
from helpers.engine.runs import CategoryRun
from kit.tiny_recipe import VERIFIER_NAME

SEED_CONFIG = DATA_DIR / "shapes" / "qwen3-30b-a3b" / "config.json"


def test_the_file_has_every_method_the_issue_asks_for_with_a_source() -> None:
    methods = {m.name: m for m in field._load_methods()}
    for name in ("DFlash", "P-EAGLE (parallel drafting)", "MTP", "EAGLE-3", "n-gram (prompt lookup)",
                 "suffix decoding", "draft model", "Medusa"):  # fmt: skip
        assert name in methods, name
    for m in methods.values():
        assert m.published["url"].startswith("https://") and m.published["conditions"], m.name
        assert "arXiv" in m.paper or "github.com" in m.paper, m.name
        assert m.shape_in_vllm.startswith(("chain", "no draft")), m.name
    assert methods["P-EAGLE (parallel drafting)"].vllm_options == {"parallel_drafting": True}


def test_in_this_vllm_needs_the_method_and_every_option() -> None:
    m = field._load_methods()[0]
    assert field._accepted_by_vllm(m, {m.vllm_method}, set())
    assert not field._accepted_by_vllm(m, set(), set())
    parallel = next(x for x in field._load_methods() if x.vllm_options)
    assert not field._accepted_by_vllm(parallel, {"eagle3"}, set())
    assert field._accepted_by_vllm(parallel, {"eagle3"}, {"parallel_drafting"})


def test_the_seed_verifier_declares_no_mtp_layers() -> None:
    config = json.loads(SEED_CONFIG.read_text())
    assert not field.has_mtp_head(config)
    assert field.has_mtp_head({"num_nextn_predict_layers": 1})
    assert field.has_mtp_head({"text_config": {"num_nextn_predict_layers": 3}})


def test_all_step_counts_from_what_vllm_reports() -> None:
    # n-gram-like: 20 output tokens, 4 drafted steps accepting 6 drafts, so 19 - 6 = 13 decode
    # steps of which 9 had no draft
    r = field._RequestSteps(20, 1.0, drafted_steps=4, accepted=6, draft_tokens=12)
    assert (r.decode_tokens, r.decode_steps) == (19, 13)
    # EAGLE-like whose last step wrote 2 tokens past max_tokens: N - 1 - A < D, so S = D
    e = field._RequestSteps(16, 1.0, drafted_steps=6, accepted=11, draft_tokens=18)
    assert e.decode_steps == 6
    # plain decoding: one token per step
    assert field._RequestSteps(10, 1.0, 0, 0, 0).decode_steps == 9


def one_request_run(tokens: int, counters: SpecCounters, hist: tuple[int, ...] = ()) -> CategoryRun:
    """A CategoryRun of one request, as run_prompts returns it."""
    requests = [RequestAcceptance(hist, counters.num_draft_tokens)] if hist else []
    return CategoryRun([[1] * tokens], ["x"], 0.5, counters, requests=requests)


def test_request_steps_prefers_the_per_request_record_and_agrees_with_the_counters() -> None:
    c = SpecCounters(4, 12, 6, (3, 2, 1))
    from_counters = field._request_steps(one_request_run(20, c))
    from_record = field._request_steps(one_request_run(20, SpecCounters(), (1, 1, 1, 1)))
    assert from_counters == field._RequestSteps(20, 0.5, 4, 6, 12)
    assert from_record.drafted_steps == 4 and from_record.accepted == 6
    with pytest.raises(ValueError, match="one-request"):
        field._request_steps(CategoryRun([[1], [2]], ["a", "b"], 1.0))


def test_ratio_interval_brackets_the_estimate_from_two_requests_up() -> None:
    num, den = list(range(1, 17)), [2] * 16
    iv = field._ratio_interval(num, den)
    assert iv.estimate == pytest.approx(sum(num) / 32) and iv.low < iv.estimate < iv.high
    small = field._ratio_interval(num[:4], den[:4], offset=1.0)
    assert small.estimate == pytest.approx(1 + 10 / 8) and small.low < small.estimate < small.high
    assert math.isnan(field._ratio_interval(num[:1], den[:1]).low)


def test_the_comparison_separates_conditional_tau_from_tokens_per_forward() -> None:
    # the same tau on drafted steps; one method drafts on a third of the steps
    always = [field._RequestSteps(31, 1.0, 10, 20, 30)] * 16
    sometimes = [field._RequestSteps(31, 1.0, 4, 8, 12)] * 16
    table = field.comparison_table({"always": always, "sometimes": sometimes})
    assert table.loc["always", "spec_decode_acceptance_length"] == pytest.approx(3.0)
    assert table.loc["sometimes", "spec_decode_acceptance_length"] == pytest.approx(3.0)
    assert table.loc["always", "tokens_per_forward"] == pytest.approx(3.0)
    assert table.loc["sometimes", "tokens_per_forward"] == pytest.approx(30 / 22)
    assert table.loc["sometimes", "coverage"] == pytest.approx(4 / 22)
    assert table.loc["always", "coverage"] == 1.0 and table.loc["always", "tokens_per_s"] == 31
    assert field.truncation_bound(sometimes, 3) == pytest.approx(3 * 16 / (22 * 16))
    assert field.truncation_bound(always, 3, drafts_every_step=True) == 0.0
    assert field.truncation_bound([field._RequestSteps(10, 1.0, 0, 0, 0)], 3) == 0.0


def test_which_methods_draft_on_every_step() -> None:
    assert field.always_drafts("eagle3") and field.always_drafts("dflash")
    assert not field.always_drafts("ngram") and not field.always_drafts("suffix")
    assert not field.always_drafts("plain")


def test_every_row_is_checked_against_the_installed_vllm_and_cites_a_real_file() -> None:
    pytest.importorskip("vllm")
    known, fields = field._installed_methods(), compat.speculative_config_fields()
    assert {"eagle3", "ngram", "draft_model", "medusa", "suffix", "mtp", "dflash"} <= known
    table = field.methods_table()
    assert table["in this vLLM"].all() and "DFlash" in table.index
    for m in field._load_methods():
        assert field._vllm_file(m.vllm_source).is_file(), m.vllm_source
        assert field._accepted_by_vllm(m, known, fields), m.name
    assert isinstance(field.has_token_tree(), bool)


def test_vllms_mtp_override_covers_qwen3_next_and_not_qwen3_moe() -> None:
    pytest.importorskip("vllm")
    types = field.mtp_model_types()
    assert "qwen3_next" in types and "qwen3_moe" not in types
    assert json.loads(SEED_CONFIG.read_text())["model_type"] == "qwen3_moe"


def test_the_dflash_drafter_is_found_beside_its_verifier_only(tmp_path: Path) -> None:
    shipped = DATA_DIR / field.DFLASH_NAME
    expected = shipped if (shipped / "config.json").is_file() else None
    assert field.drafter_for(DATA_DIR / VERIFIER_NAME) == expected
    assert field.drafter_for(tmp_path / VERIFIER_NAME) is None


@pytest.mark.parametrize("ci, sizes", [("", (4, 64, 60)), ("true", (2, 32, 30))])
def test_run_sizes_shrink_only_under_ci(monkeypatch: pytest.MonkeyPatch, ci: str, sizes) -> None:
    monkeypatch.setenv("CI", ci)
    assert field.run_sizes(4, 64, 60) == sizes
    assert field.run_sizes(1, 16, 60)[:2] == (1, 16)  # never more than asked
