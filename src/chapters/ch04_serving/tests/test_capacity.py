"""Section 8 of notebook 04 offline, through its cells' own definitions (KV bytes per token, the
shared-prefix run) and chapters.ch04_serving.bench's capacity burst."""

from __future__ import annotations

import dataclasses

import pytest

from chapters.ch04_serving import bench, clients
from chapters.ch04_serving.clients import EngineStats
from helpers.common.profiles import load_profile
from tests.support import notebook_defs

#: What notebook 04's cells define.
NB = notebook_defs("04_serving_and_benchmarks.ipynb")


@pytest.mark.usefixtures("qwen3_built")  # a shape profile's engine arguments name its tokenizer
def test_kv_bytes_per_token_from_the_config_and_the_dtype() -> None:
    kv_bytes_per_token = NB["kv_bytes_per_token"]
    # tiny: 8 layers x (K and V) x 2 KV heads x head size 32 x float32
    assert kv_bytes_per_token(load_profile("tiny"), gpu=False) == 8 * 2 * 2 * 32 * 4
    # the 30B shape on a GPU: dtype auto -> its bf16 checkpoint: 96 KiB per token
    shape = load_profile("qwen3-30b-a3b-shape")
    assert kv_bytes_per_token(shape, gpu=True) == 48 * 2 * 4 * 128 * 2 == 96 * 1024
    assert 8192 * kv_bytes_per_token(load_profile("tiny"), gpu=False) == 32 * 2**20
    odd = dataclasses.replace(shape, engine={**shape.engine, "dtype": "int3"})
    with pytest.raises(ValueError, match="no KV size for dtype 'int3'"):
        kv_bytes_per_token(odd, gpu=True)


def test_burst_prompts_share_no_first_block(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clients, "tokenize", lambda url, model, text: list(range(len(text))))
    srv = dataclasses.make_dataclass("Srv", ["base_url", "model"])("http://x", "m")
    prompts = NB["burst_prompts"](srv, ["abcdefghij"], 4, 6)
    assert [p[0] for p in prompts] == [0, 1, 2, 3] and {len(p) for p in prompts} == {6}
    with pytest.raises(ValueError, match="repeat within 20 offsets"):
        NB["burst_prompts"](srv, ["abc"], 20, 6)


def test_burst_and_prefix_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = EngineStats(num_gpu_blocks=56, block_size=128)

    class Sampled:
        """What the burst's scraper saw: 7 running at most, 93 % of the cache, 2 preempted."""

        def __init__(self, url: str, interval: float) -> None:
            self.engine_total = EngineStats(preemptions=2)

        def __enter__(self) -> Sampled:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def peak(self, gauge: str) -> float:
            return {"running": 7.0, "kv_cache_usage": 0.93}[gauge]

    srv = dataclasses.make_dataclass("Srv", ["base_url", "model"])("http://x", "m")
    monkeypatch.setattr(bench, "Scraper", Sampled)
    monkeypatch.setattr(bench, "scrape_engine_stats", lambda url: cache)
    done = {"usage": {"completion_tokens": 128}}
    monkeypatch.setattr(bench, "complete_tokens", lambda *a, **k: done)
    row = bench.run_burst(srv, "spec", [[1] * 768] * 12, 128)
    assert row["fit_at_full_length"] == 8 and row["kv_cache_tokens"] == 56 * 128
    assert row["preemptions"] == 2 and row["peak_running"] == 7
    after = EngineStats(prefix_cache_queries=2585, prefix_cache_hits=1280, block_size=128)
    pages = iter([EngineStats(block_size=128), after])
    monkeypatch.setattr(clients, "scrape_engine_stats", lambda url: next(pages))
    monkeypatch.setattr(clients, "chat", lambda *a, **k: {})
    prefix = NB["run_shared_prefix"](srv, "spec", "system", ["q"] * 6)
    assert prefix["hit_tokens_per_request"] == 256 and prefix["hit_blocks_per_request"] == 2
    assert prefix["hit_rate"] == pytest.approx(1280 / 2585)
