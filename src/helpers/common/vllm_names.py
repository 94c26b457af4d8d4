"""vLLM's names in one place: spec-decode metric names, result keys, and the per-request switch.

Every name below is vLLM's own spelling, checked against the pinned vLLM and the GPU test stack's
(`helpers.engine.compat` names both; same names in both unless noted; the file that defines each is
named beside it, relative to the `vllm` package). When vLLM renames one, this module is the one
place to change. No vLLM import here: these are plain strings.

Prometheus counters keep their base name in `LLM.get_metrics()` (`v1/metrics/reader.py`), while
the samples on a server's `/metrics` carry the `_total` suffix prometheus_client appends
(`METRICS.exported`); a server's metrics are one object, `METRICS`. Result keys are those of the
JSON `vllm bench serve` writes, which the workbook's tables reuse as column names (`STATS`), so
`STATS.tau` is the one spelling of τ's column everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "SPEC_DECODE_PREFIX",
    "METRICS",
    "STATS",
    "PER_REQUEST",
    "DISABLE_EAGLE_BLOCK_DROP",
]

# ------------------------------------------------ Prometheus metrics (v1/spec_decode/metrics.py)

#: Every vLLM metric name starts so (v1/metrics/reader.py keeps only these).
METRIC_PREFIX = "vllm:"
#: The spec-decode counters' common prefix (SpecDecodingProm).
SPEC_DECODE_PREFIX = "vllm:spec_decode_"


@dataclass(frozen=True)
class _ServerMetrics:
    """The metrics (and their labels) the workbook reads on a server's /metrics."""

    #: Counter: verify steps that had a draft, summed over requests (v1/spec_decode/metrics.py).
    num_drafts: str = "vllm:spec_decode_num_drafts"
    #: Counter: draft tokens proposed.
    num_draft_tokens: str = "vllm:spec_decode_num_draft_tokens"
    #: Counter: draft tokens the verifier accepted.
    num_accepted_tokens: str = "vllm:spec_decode_num_accepted_tokens"
    #: Counter per draft position (label `position`, "0" .. k-1): accepted tokens there.
    accepted_per_pos: str = "vllm:spec_decode_num_accepted_tokens_per_pos"
    #: The label that numbers the draft positions of `accepted_per_pos`.
    position: str = "position"
    #: Counter: prompt tokens looked up in the prefix cache (v1/metrics/loggers.py, as below).
    prefix_cache_queries: str = "vllm:prefix_cache_queries"
    #: Counter: of those, tokens found there (whole blocks only).
    prefix_cache_hits: str = "vllm:prefix_cache_hits"
    #: Counter: requests pushed out of the KV cache to make room (recomputed later).
    num_preemptions: str = "vllm:num_preemptions"
    #: Gauge: requests in the running batch.
    num_running: str = "vllm:num_requests_running"
    #: Gauge: requests waiting inside the server for a place in the batch.
    num_waiting: str = "vllm:num_requests_waiting"
    #: Gauge: share of the KV cache's blocks in use (a fraction 0..1, despite `perc`).
    kv_cache_usage: str = "vllm:kv_cache_usage_perc"
    #: Histogram of each request's time to first token, in seconds: its `_sum` over its `_count`
    #: between two scrapes is the mean over the requests that finished between.
    ttft: str = "vllm:time_to_first_token_seconds"
    #: Histogram of each request's time per output token, in seconds (read the same way).
    tpot: str = "vllm:request_time_per_output_token_seconds"
    #: Gauge fixed at 1 whose labels are the cache config (CacheConfig.metrics_info,
    #: config/cache.py): `num_gpu_blocks` (KV blocks the engine allocated), `block_size`.
    cache_config_info: str = "vllm:cache_config_info"
    num_gpu_blocks: str = "num_gpu_blocks"
    block_size: str = "block_size"
    #: What prometheus_client appends to a counter's samples on /metrics (v1/metrics/reader.py).
    counter_suffix: str = "_total"

    def exported(self, metric: str) -> str:
        """A counter's sample name on a server's /metrics: its name plus `_total`."""
        return metric + self.counter_suffix


#: The server's Prometheus names, one object: `METRICS.num_drafts`, `METRICS.exported(...)`.
METRICS = _ServerMetrics()


# ----------------------------------------- result keys and table columns (benchmarks/serve.py)


@dataclass(frozen=True)
class _StatKeys:
    """The acceptance statistics' keys: vLLM's result keys, the workbook's column names."""

    #: Drafts in the measured span (vLLM's `num_drafts`).
    num_drafts: str = "spec_decode_num_drafts"
    #: Draft tokens in the measured span.
    draft_tokens: str = "spec_decode_draft_tokens"
    #: Accepted draft tokens in the measured span.
    accepted_tokens: str = "spec_decode_accepted_tokens"
    #: τ, the mean acceptance length: 1 + accepted / drafts (tokens per verify step, bonus
    #: included).
    tau: str = "spec_decode_acceptance_length"
    #: Acceptance rate in percent: 100 · accepted / draft tokens.
    acceptance_rate: str = "spec_decode_acceptance_rate"
    #: The list of per-position rates: accepted at position i / drafts.
    per_position_rates: str = "spec_decode_per_position_acceptance_rates"
    #: The workbook's long tables hold one of those rates per row, under the singular (not vLLM's).
    per_position_rate: str = "spec_decode_per_position_acceptance_rate"


#: `STATS.tau` is τ's one spelling, in every result and table.
STATS = _StatKeys()

# --------------------- per-request acceptance (some vLLMs lack it: helpers.engine.compat.FEATURES)


@dataclass(frozen=True)
class _PerRequest:
    """The per-request acceptance switch, its values, and where a finished request carries it."""

    #: Engine argument (EngineArgs, engine/arg_utils.py; ObservabilityConfig,
    #: config/observability.py).
    arg: str = "per_request_spec_decode_metrics"
    #: Its value that records each request's histogram of verify steps by accepted drafts.
    summary: str = "summary"
    #: Its value that also records every verify step in order (`per_step_*` below).
    detailed: str = "detailed"
    #: Where a finished CompletionOutput carries that record (outputs.py).
    output_attr: str = "spec_decode_metrics"
    #: The record's drafts accepted at each verify step, in order (RequestSpecDecodeMetrics,
    #: v1/metrics/stats.py), with `detailed` only.
    per_step_accepted: str = "per_step_accepted"
    #: The record's drafts proposed at each verify step, in order.
    per_step_drafted: str = "per_step_drafted"


PER_REQUEST = _PerRequest()


# -------------- the EAGLE prefix-cache block drop (config/speculative.py; compat names who has it)

#: `speculative_config` key that keeps the last matched prefix-cache block for EAGLE drafters.
DISABLE_EAGLE_BLOCK_DROP = "disable_eagle_block_drop"
