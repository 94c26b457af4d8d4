"""Analytics on top of the engine: the sweeps over k, temperature and task (notebook 03), the
MoE economics of a verify pass (expert union, c(k, B); notebook 06), the speed-up model with the
recorded H200 and published measurements, figures, and text-quality measures.
"""

__all__ = ["figures", "intervals", "moe", "speedup", "sweeps", "text_quality"]
