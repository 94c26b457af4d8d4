"""Notebook 04 (serving and benchmarks)'s own code, `vllm serve` with EAGLE-3: the serve command
(pure), the server process (own process group, loopback, stopped at exit, tied to its owner by a
guard), OpenAI-compatible clients and /metrics, the bounded serving benchmark (speculative vs plain
by concurrency, forced and natural length, per-request acceptance), the sweep read as throughput
against interactivity with its validity checks, what the drafter costs in KV capacity and
prefix-cache hits, and the production view of acceptance (Prometheus series, the dashboard's PromQL,
an alert rule, the server's log line, vLLM's own benchmark).
"""

__all__ = [
    "bench",
    "clients",
    "guard",
    "interactivity",
    "monitoring",
    "server",
    "vllm_bench",
]
