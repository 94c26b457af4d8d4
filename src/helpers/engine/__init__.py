"""vLLM in-process: the `LLM` lifecycle (one engine at a time, visibly; inside this process on a
CPU, with the guards that needs), runs on an engine
(per-category acceptance, the lossless check, throughput, self-distillation), the pairing
validator that runs before any weights load, the vLLM issue #55005 CPU fix, the PR #26485
backport for vLLM < 0.11.1, the `vllm.general_plugins` entry point that applies both, and the
installed vLLM's own EAGLE-3 code path quoted from its source.
"""

__all__ = [
    "eagle3_backport",
    "in_process",
    "lifecycle",
    "pairing",
    "plugin",
    "runs",
    "vllm_issue_55005",
    "vllm_source",
]
