"""Notebook 06 (does EAGLE-3 pay on a MoE?)'s own code: the expert union of a verify pass and the
bytes a step reads (`moe`), the GPU MoE lab's record read and answered (`lab`; the lab's own
tools are in `tools/`: `gpu_moe_lab` and `moe_lab`), the evidence for a profile's answer
(`answer`), and the k-by-batch schedule with the per-step acceptance traces (`schedule`). The
step-model fit, the utility controller and its replay, and the predicted speed-up are written in
the notebook's cells.
"""

__all__ = [
    "answer",
    "figures",
    "lab",
    "moe",
    "schedule",
]
