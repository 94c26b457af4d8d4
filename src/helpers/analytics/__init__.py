"""Analytics two or more notebooks share: vLLM CI's acceptance measurement on a dataset
(`benchmark`), the sweeps over k, temperature and task with intervals
over requests (`sweeps`, `intervals`), published real-pair τ next to the toy's (`calibration`), the
speed-up model with the recorded GPU lab and published measurements (`speedup`), figures, and the
explorers' widget plumbing with the speed-up model's explorer (`explorers`), and the permutation
test of two samples (`permutation`: notebook 07's losslessness test, the grader's check of notebook
03's rejection-sampling exercise). Each notebook's own
analyses live in its chapter (`chapters.chNN_*`).
"""

__all__ = [
    "benchmark",
    "calibration",
    "explorers",
    "figures",
    "intervals",
    "permutation",
    "speedup",
    "sweeps",
]
