"""vLLM's names in one place: spec-decode metric names, result keys, and the per-request switch.

Every name below is vLLM's own spelling, checked against the pinned vLLM and the GPU test stack's
(`helpers.engine.compat` names both; same names in both unless noted; the file that defines each is
named beside it, relative to the `vllm` package). When vLLM renames one, this module is the one
place to change. No vLLM import here: these are plain strings.

Prometheus counters keep their base name in `LLM.get_metrics()` (`v1/metrics/reader.py`), while
the samples on a server's `/metrics` carry the `_total` suffix prometheus_client appends
(`exported`). Result keys are those of the JSON `vllm bench serve` writes, which the workbook's
tables reuse as column names, so `TAU` is the one spelling of τ's column everywhere.
"""

from __future__ import annotations

__all__ = [
    "SPEC_DECODE_METRICS_FILE",
    "SPEC_DECODE_PREFIX",
    "NUM_DRAFTS_METRIC",
    "NUM_DRAFT_TOKENS_METRIC",
    "NUM_ACCEPTED_TOKENS_METRIC",
    "ACCEPTED_PER_POS_METRIC",
    "POSITION_LABEL",
    "COUNTER_SUFFIX",
    "exported",
    "NUM_DRAFTS",
    "DRAFT_TOKENS",
    "ACCEPTED_TOKENS",
    "TAU",
    "ACCEPTANCE_RATE",
    "PER_POSITION_RATES",
    "PER_POSITION_RATE",
    "PER_REQUEST_METRICS_ARG",
    "PER_REQUEST_SUMMARY",
    "PER_REQUEST_DETAILED",
    "OUTPUT_METRICS_ATTR",
    "RESPONSE_METRICS_KEY",
    "RESPONSE_SPEC_KEY",
    "HISTOGRAM_KEY",
    "RESPONSE_DRAFT_TOKENS_KEY",
    "PREFIX_CACHE_QUERIES_METRIC",
    "PREFIX_CACHE_HITS_METRIC",
    "NUM_PREEMPTIONS_METRIC",
    "NUM_RUNNING_METRIC",
    "NUM_WAITING_METRIC",
    "KV_CACHE_USAGE_METRIC",
    "LATENCY_HISTOGRAMS",
    "V2_SPECULATOR_MODULE",
    "CACHE_CONFIG_INFO_METRIC",
    "NUM_GPU_BLOCKS_LABEL",
    "BLOCK_SIZE_LABEL",
    "DISABLE_EAGLE_BLOCK_DROP",
    "PER_STEP_ACCEPTED",
    "PER_STEP_DRAFTED",
]

# ------------------------------------------------ Prometheus metrics (v1/spec_decode/metrics.py)

#: The module that defines the spec-decode counters and the figures vLLM logs from them.
SPEC_DECODE_METRICS_FILE = "vllm/v1/spec_decode/metrics.py"
#: Every vLLM metric name starts so (v1/metrics/reader.py keeps only these).
METRIC_PREFIX = "vllm:"
#: The spec-decode counters' common prefix (SpecDecodingProm).
SPEC_DECODE_PREFIX = "vllm:spec_decode_"
#: Counter: verify steps that had a draft, summed over requests.
NUM_DRAFTS_METRIC = "vllm:spec_decode_num_drafts"
#: Counter: draft tokens proposed.
NUM_DRAFT_TOKENS_METRIC = "vllm:spec_decode_num_draft_tokens"
#: Counter: draft tokens the verifier accepted.
NUM_ACCEPTED_TOKENS_METRIC = "vllm:spec_decode_num_accepted_tokens"
#: Counter per draft position (label `POSITION_LABEL`, "0" .. k-1): accepted tokens there.
ACCEPTED_PER_POS_METRIC = "vllm:spec_decode_num_accepted_tokens_per_pos"
#: The label that numbers the draft positions of ACCEPTED_PER_POS_METRIC.
POSITION_LABEL = "position"
#: What prometheus_client appends to a counter's samples on /metrics.
COUNTER_SUFFIX = "_total"


def exported(metric: str) -> str:
    """A counter's sample name on a server's /metrics: its name plus `_total`."""
    return metric + COUNTER_SUFFIX


# ----------------------------------------- result keys and table columns (benchmarks/serve.py)

#: Drafts in the measured span (vLLM's `num_drafts`).
NUM_DRAFTS = "spec_decode_num_drafts"
#: Draft tokens in the measured span.
DRAFT_TOKENS = "spec_decode_draft_tokens"
#: Accepted draft tokens in the measured span.
ACCEPTED_TOKENS = "spec_decode_accepted_tokens"
#: τ, the mean acceptance length: 1 + accepted / drafts (tokens per verify step, bonus included).
TAU = "spec_decode_acceptance_length"
#: Acceptance rate in percent: 100 · accepted / draft tokens.
ACCEPTANCE_RATE = "spec_decode_acceptance_rate"
#: The list of per-position rates: accepted at position i / drafts.
PER_POSITION_RATES = "spec_decode_per_position_acceptance_rates"
#: The workbook's long tables hold one of those rates per row, under the singular (not vLLM's key).
PER_POSITION_RATE = "spec_decode_per_position_acceptance_rate"

# --------------------- per-request acceptance (some vLLMs lack it: helpers.engine.compat.FEATURES)

#: Engine argument (EngineArgs, engine/arg_utils.py; ObservabilityConfig, config/observability.py).
PER_REQUEST_METRICS_ARG = "per_request_spec_decode_metrics"
#: Its value that records each request's histogram of verify steps by accepted drafts.
PER_REQUEST_SUMMARY = "summary"
#: Its value that also records every verify step in order (`PER_STEP_ACCEPTED`, `PER_STEP_DRAFTED`).
PER_REQUEST_DETAILED = "detailed"
#: Where a finished CompletionOutput carries that record (outputs.py).
OUTPUT_METRICS_ATTR = "spec_decode_metrics"

# ----------- per-request acceptance in a server's response (entrypoints/generate/base/protocol.py)

#: The response's (and the final streaming usage chunk's) per-request block (PerRequestMetrics).
RESPONSE_METRICS_KEY = "metrics"
#: Inside it: the request's acceptance (SpeculativeDecodingMetrics), with the engine argument on.
RESPONSE_SPEC_KEY = "speculative_decoding"
#: Verify steps by number of accepted drafts, j = 0..k (v1/metrics/stats.py, `to_dict`).
HISTOGRAM_KEY = "acceptance_histogram"
#: Draft tokens the request proposed (v1/metrics/stats.py, `to_dict`).
RESPONSE_DRAFT_TOKENS_KEY = "num_draft_tokens"

# ----------------------------------------------- engine metrics on /metrics (v1/metrics/loggers.py)

#: Counter: prompt tokens looked up in the prefix cache.
PREFIX_CACHE_QUERIES_METRIC = "vllm:prefix_cache_queries"
#: Counter: of those, tokens found there (whole blocks only).
PREFIX_CACHE_HITS_METRIC = "vllm:prefix_cache_hits"
#: Counter: requests pushed out of the KV cache to make room (recomputed later).
NUM_PREEMPTIONS_METRIC = "vllm:num_preemptions"
#: Gauge: requests in the running batch.
NUM_RUNNING_METRIC = "vllm:num_requests_running"
#: Gauge: requests waiting inside the server for a place in the batch.
NUM_WAITING_METRIC = "vllm:num_requests_waiting"
#: Gauge: share of the KV cache's blocks in use (a fraction 0..1, despite `perc`).
KV_CACHE_USAGE_METRIC = "vllm:kv_cache_usage_perc"
#: Model Runner V2's EAGLE speculator, where it concatenates the taps (vllm/v1/worker/gpu/).
V2_SPECULATOR_MODULE = "vllm.v1.worker.gpu.spec_decode.autoregressive.speculator"
#: Histograms the server keeps of each request's timing, in seconds (v1/metrics/loggers.py), by
#: the name the workbook gives each: its `_sum` over its `_count` between two scrapes is the mean
#: over the requests that finished (or, for inter-token latency, the decode steps that ran) between.
LATENCY_HISTOGRAMS: dict[str, str] = {
    "ttft": "vllm:time_to_first_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
    "e2e": "vllm:e2e_request_latency_seconds",
}
#: Gauge fixed at 1 whose labels are the cache config (CacheConfig.metrics_info, config/cache.py).
CACHE_CONFIG_INFO_METRIC = "vllm:cache_config_info"
#: Its label with the number of KV blocks the engine allocated.
NUM_GPU_BLOCKS_LABEL = "num_gpu_blocks"
#: Its label with the tokens per block.
BLOCK_SIZE_LABEL = "block_size"

# -------------- the EAGLE prefix-cache block drop (config/speculative.py; compat names who has it)

#: `speculative_config` key that keeps the last matched prefix-cache block for EAGLE drafters.
DISABLE_EAGLE_BLOCK_DROP = "disable_eagle_block_drop"
#: The record's drafts accepted at each verify step, in order (RequestSpecDecodeMetrics,
#: v1/metrics/stats.py), with `PER_REQUEST_DETAILED` only.
PER_STEP_ACCEPTED = "per_step_accepted"
#: The record's drafts proposed at each verify step, in order.
PER_STEP_DRAFTED = "per_step_drafted"
