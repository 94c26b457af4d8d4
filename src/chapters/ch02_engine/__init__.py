"""Notebook 02 (EAGLE-3 in vLLM)'s own code: schematic figures of the draft-verify round, the
tapped layers and the EAGLE-3 dataflow, and the installed vLLM's EAGLE-3 code path quoted from its
source (`vllm_path`).
"""

__all__ = [
    "diagrams",
    "vllm_path",
]
