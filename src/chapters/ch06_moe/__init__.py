"""Notebook 06 (does EAGLE-3 pay on a MoE?)'s own code: the expert union of a verify pass and the
bytes model of c(k, B) (`moe`), the H200 MoE lab's record read, fitted and answered (`lab`; the
lab's own tools are `kit.moe_lab`), the answer for a profile, predicted from the evidence or
measured (`answer`), and the k-by-batch schedule with static k, the
schedule and a utility controller replayed on per-step acceptance.
"""

__all__ = [
    "answer",
    "figures",
    "lab",
    "moe",
    "schedule",
]
