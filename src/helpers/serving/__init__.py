"""`vllm serve` with EAGLE-3: the serve command (pure), the server process (own process group,
loopback, stopped at exit), OpenAI-compatible clients and /metrics, and the bounded serving
benchmark, speculative vs plain by concurrency (notebook 04).
"""

__all__ = ["bench", "clients", "server"]
