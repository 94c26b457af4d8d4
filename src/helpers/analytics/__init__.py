"""Acceptance analytics on top of the engine: the sweeps over k, temperature and task, the cost
and speed-up model with the recorded H200 step costs, acceptance figures and the token-coloured
view, and text-quality measures (notebook 03).
"""

__all__ = ["figures", "speedup", "sweeps", "text_quality"]
