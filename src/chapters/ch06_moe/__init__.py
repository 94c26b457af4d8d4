"""Notebook 06 (does EAGLE-3 pay on a MoE?)'s own code: union, lab record, answer, schedule."""

__all__ = ["answer", "figures", "lab", "moe", "schedule"]
