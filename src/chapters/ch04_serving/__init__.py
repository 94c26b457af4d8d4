"""Notebook 04 (serving and benchmarks)'s own code: `vllm serve` with EAGLE-3, its clients, the
serving benchmark and its checks, /metrics and the server's log."""

__all__ = ["bench", "clients", "guard", "interactivity", "monitoring", "server", "vllm_bench"]
