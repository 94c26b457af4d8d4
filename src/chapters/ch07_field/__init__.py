"""Notebook 07 (EAGLE-3 in the field)'s own code: the drafting methods beside EAGLE-3 counted over
every decode step, and the distributional test of losslessness at T > 0.
"""

__all__ = [
    "distribution",
    "field",
]
