"""EAGLE-3 itself, in plain PyTorch and with no vLLM import: the drafter with vLLM's weight names,
the taps (which verifier layers feed it, and reading them), greedy draft-and-verify from scratch,
the training-time-test loss and its samplers, the speculators checkpoint format and a reduced
draft vocabulary (d2t/t2d). Notebooks 02, 03, 05 and 07 teach from here.
"""

__all__ = [
    "checkpoint",
    "decode",
    "drafter",
    "taps",
    "train",
    "vocab",
]
