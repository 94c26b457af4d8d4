"""`vllm serve` with EAGLE-3: the serve command (pure), the server process (own process group,
loopback, stopped at exit), OpenAI-compatible clients and /metrics, and the bounded serving
benchmark, speculative vs plain by concurrency, and the production view of acceptance (Prometheus
series, the dashboard's PromQL, an alert rule, the server's log line, vLLM's own benchmark; notebook 04).
"""

__all__ = ["bench", "clients", "observability", "server", "vllm_bench"]
