"""Notebook 05 (train your own drafter)'s own code: the drafter lab (`drafter_lab`) that plans,
checkpoints, traces, evaluates and plots the EAGLE-3 drafter a learner trains on a CPU.
"""

__all__ = [
    "drafter_lab",
]
