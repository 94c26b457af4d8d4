"""Notebook 06 (does EAGLE-3 pay on a MoE?)'s own code: the answer for a profile, predicted from the
evidence or measured (`python -m chapters.ch06_moe.answer`), and the k-by-batch schedule with
static k, the schedule and a utility controller replayed on per-step acceptance.
"""

__all__ = [
    "answer",
    "schedule",
]
