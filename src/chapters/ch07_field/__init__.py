"""Notebook 07 (EAGLE-3 in the field)'s own code: the drafting methods beside EAGLE-3 counted over
every decode step, the distributional test of losslessness at T > 0 and its samples, the share a
reduced draft vocabulary cannot draft, and τ per draft and verify method at T > 0 (`sampling`).
"""

__all__ = [
    "distribution",
    "field",
    "reduced_vocab",
    "sampling",
]
