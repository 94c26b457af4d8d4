"""Notebook 08 (why is my acceptance low?)'s own code: silent mismatches measured one at a time and
ranked by damage, the symptom -> cause -> fix table, and acceptance against context length.
"""

__all__ = [
    "mismatch",
]
