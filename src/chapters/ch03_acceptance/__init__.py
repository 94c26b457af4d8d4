"""Notebook 03 (acceptance analytics)'s own code: a standard acceptance benchmark in vLLM CI's
format (`python -m chapters.ch03_acceptance.harness`), with one run read in every engine's
acceptance vocabulary.
"""

__all__ = [
    "harness",
]
