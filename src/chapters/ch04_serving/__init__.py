"""Notebook 04 (serving and benchmarks)'s own code, `vllm serve` with EAGLE-3: the serve command
(pure), the server process (own process group, loopback, stopped at exit, tied to its owner by a
guard), OpenAI-compatible clients and /metrics, the bounded serving benchmark (speculative vs plain
by concurrency, forced and natural length, per-request acceptance), the sweep's validity checks,
the /metrics scraper and `vllm bench serve`'s entry point. What each section measures with them
(capacity, prefix-cache hits, the dashboard, the alert, the log lines) is written in its cells.
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
