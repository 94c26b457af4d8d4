"""chapters.ch03_acceptance.reference: the from-scratch decoder's counters and tokens read against
vLLM's."""

from __future__ import annotations

import pytest

from chapters.ch03_acceptance import reference
from helpers.analytics import calibration
from helpers.common.counters import SpecCounters
from helpers.eagle3.decode import ReferenceOutput, Round


def output() -> ReferenceOutput:
    """Two rounds at k = 3; max_tokens cut the second round's accepted drafts from the output."""
    return ReferenceOutput(
        [1],
        [9, 5, 6, 7, 8],
        ["prefill"] + ["accepted"] * 3 + ["bonus"],
        k=3,
        rounds=[Round((5, 6, 7), 3, (5, 6, 7, 8)), Round((1, 2, 3), 2, (1, 2, 4))],
    )


def test_agreement_counts_what_the_output_dropped_like_vllm() -> None:
    vllm = SpecCounters(2, 6, 5, (2, 2, 1))
    assert reference.total_counters([output(), output()]) == vllm + vllm
    table = reference.agreement_table([output()], [[9, 5, 6, 7, 8]], vllm)
    assert (table.difference == 0).all() and table.reference.iloc[0] == 1
    off = reference.agreement_table([output()], [[9, 5, 6, 7, 0]], vllm)
    assert off.difference.iloc[0] == -1


def test_labels_and_rounds_tables() -> None:
    labels = reference.label_table([output()]).set_index("label").tokens
    assert labels.to_dict() == {"prefill": 1, "accepted": 3, "correction": 0, "bonus": 1}

    class Chars:
        def decode(self, ids: list[int]) -> str:
            return str(ids[0])

    rounds = reference.rounds_table(output(), Chars())
    assert rounds.accepted.tolist() == [3, 2] and rounds.drafted.iloc[0] == ["5", "6", "7"]


def test_rates_side_by_side_add_up_to_each_tau() -> None:
    ref = calibration.reference_record()
    df = reference.rates_side_by_side([0.9, 0.8, 0.7])
    assert list(df.index) == ["1", "2", "3", "τ at k=3"]
    assert df.iloc[-1, 0] == pytest.approx(3.4)
    assert df.iloc[-1, 1] == pytest.approx(ref.tau_at(3), abs=1e-3)
    longer = reference.rates_side_by_side([0.9] * (ref.k + 1))  # past the published k: no τ
    assert longer.iloc[-1, 1] != longer.iloc[-1, 1]  # NaN
