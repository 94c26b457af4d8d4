"""Notebook 02 (EAGLE-3 in vLLM)'s own code: schematic figures of the draft-verify round, the
tapped layers and the EAGLE-3 dataflow.
"""

__all__ = [
    "diagrams",
]
