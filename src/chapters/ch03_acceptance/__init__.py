"""Notebook 03 (acceptance analytics)'s own code: a standard acceptance benchmark in vLLM CI's
format (`python -m chapters.ch03_acceptance.harness`), with one run read in every engine's
acceptance vocabulary, the sweeps over k, task and temperature and the throughput table
(`experiments`), its figures, the explorers over the run's acceptance and over your own prompt,
and the from-scratch decoder read against vLLM (`reference`).
"""

__all__ = [
    "experiments",
    "explorers",
    "figures",
    "harness",
    "reference",
]
