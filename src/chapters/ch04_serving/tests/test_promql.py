"""04's PromQL and alert, built from vLLM's names (helpers.common.vllm_names), read as they did
before they were built from them."""

from __future__ import annotations

from tests.support import notebook_defs

#: What the notebook's PROMQL and TAU_ALERT read before they were built from vllm_names.
PROMQL_BEFORE = {
    "acceptance_length": "1 + (rate(vllm:spec_decode_num_accepted_tokens_total[$interval]) / "
    "rate(vllm:spec_decode_num_drafts_total[$interval]))",
    "acceptance_rate": "rate(vllm:spec_decode_num_accepted_tokens_total[$interval]) / "
    "rate(vllm:spec_decode_num_draft_tokens_total[$interval])",
    "per_position": "rate(vllm:spec_decode_num_accepted_tokens_per_pos_total[$interval]) / "
    "rate(vllm:spec_decode_num_drafts_total[$interval])",
    "accepted_tokens_per_s": "rate(vllm:spec_decode_num_accepted_tokens_total[$interval])",
}
ALERT_EXPR_BEFORE = """  expr: |
    (1 + rate(vllm:spec_decode_num_accepted_tokens_total[$interval])
       / rate(vllm:spec_decode_num_drafts_total[$interval])) < $threshold
    and rate(vllm:spec_decode_num_drafts_total[$interval]) > 0
"""


def test_promql_built_from_the_names_is_what_observability_had() -> None:
    cells = notebook_defs(
        "04_serving_and_benchmarks.ipynb", "ACCEPTED", "DRAFTS", "PROMQL", "TAU_ALERT"
    )
    assert cells["PROMQL"] == PROMQL_BEFORE
    assert ALERT_EXPR_BEFORE in cells["TAU_ALERT"]
