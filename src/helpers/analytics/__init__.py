"""Analytics on top of the engine: the sweeps over k, temperature and task (notebook 03), the
MoE economics of a verify pass (expert union, c(k, B); notebook 06), the speed-up model with the
recorded H200 and published measurements, published real-pair τ next to the toy's, figures,
text-quality measures, intervals over requests, the distributional lossless test, EAGLE-3's place
among other drafting methods (notebook 07), and the explorers (ipywidgets) over the speed-up model,
the expert union, a run's acceptance and your own prompt.
"""

__all__ = [
    "calibration",
    "distribution",
    "explorers",
    "field",
    "figures",
    "intervals",
    "moe",
    "speedup",
    "sweeps",
    "text_quality",
]
