"""vLLM in-process: the `LLM` lifecycle (one engine at a time, visibly; inside this process on a
CPU, with the guards that needs), runs on an engine
(per-category acceptance, the lossless check, throughput, self-distillation), the pairing
validator that runs before any weights load, the vLLM issue #55005 CPU fix, the fix that keeps a
streamed response's acceptance record, and the `vllm.general_plugins` entry point that applies
them, the installed vLLM's own EAGLE-3 code path quoted from its source, vLLM's rejection sampler
called directly (`sampler`), and `compat`: every behaviour that depends on the vLLM version.
"""

__all__ = [
    "compat",
    "in_process",
    "lifecycle",
    "pairing",
    "plugin",
    "runs",
    "vllm_issue_55005",
    "vllm_source",
    "vllm_stream_records",
]
