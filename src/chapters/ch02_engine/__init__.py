"""Notebook 02 (EAGLE-3 in vLLM)'s own code: schematic figures of the draft-verify round, the
tapped layers and the EAGLE-3 dataflow, the installed vLLM's EAGLE-3 code path quoted from its
source (`vllm_path`), and the published τ of real pairs as a table (`real_pairs`).
"""

__all__ = [
    "diagrams",
    "real_pairs",
    "vllm_path",
]
