"""Analytics on top of the engine: the sweeps over k, temperature and task (notebook 03), the
MoE economics of a verify pass (expert union, c(k, B); notebook 06) with the MoE lab's record
read, its designed routers and the k-by-batch schedule and adaptive speculation replayed, the
speed-up model with the recorded H200 and published measurements, published real-pair τ next to
the toy's, figures, text-quality measures, intervals over requests, the distributional lossless
test, EAGLE-3's place among other drafting methods (notebook 07), the explorers (ipywidgets) over
the speed-up model, the expert union, a run's acceptance and your own prompt, and the acceptance
doctor: silent mismatches measured and ranked by damage (notebook 08); a standard acceptance
benchmark in vLLM CI's format, with one run read in every engine's acceptance vocabulary (03).
"""

__all__ = [
    "calibration",
    "explorers",
    "figures",
    "intervals",
    "lab",
    "moe",
    "routing",
    "speedup",
    "sweeps",
]
