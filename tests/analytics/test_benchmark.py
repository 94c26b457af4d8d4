"""helpers.analytics.benchmark: datasets offline, one line where MT-Bench needs the hub."""

from __future__ import annotations

import pytest

from helpers.analytics import benchmark


def test_humaneval_ships_its_164_prompts_offline() -> None:
    prompts = benchmark.dataset_prompts("humaneval")
    assert list(prompts) == ["HumanEval"] and len(prompts["HumanEval"]) == 164
    assert prompts["HumanEval"][0].lstrip().startswith("from typing import List")
    assert len(benchmark.dataset_prompts("humaneval", limit=5)["HumanEval"]) == 5
    assert set(benchmark.dataset_prompts("workbook", limit=2)) == {
        "structured", "code", "prose", "creative"
    }  # fmt: skip


def test_mt_bench_offline_fails_in_one_line(monkeypatch) -> None:
    from helpers.common import envinfo

    monkeypatch.setattr(envinfo, "hub_reachable", lambda timeout=3.0: False)
    with pytest.raises(RuntimeError, match="needs the model hub") as err:
        benchmark.dataset_prompts("mt-bench")
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="unknown dataset"):
        benchmark.dataset_prompts("gsm8k")
