"""Command-line tools, out of the learners' way: `python -m helpers.tools.doctor` (will the workbook
run on this machine?), `python -m helpers.tools.preflight` (can this machine run a profile?),
`python -m helpers.tools.prefetch` (download a hub profile's pair for offline use),
`python -m helpers.tools.runner` (execute the notebooks headless), `python -m
helpers.tools.grader` (grade the algorithm a learner wrote in exercises/: make check-exercises)
and `pytest -p helpers.tools.nbval_keep` (keep and time what nbval executed: the GPU runner).
"""

__all__ = ["doctor", "grader", "nbval_keep", "preflight", "prefetch", "runner"]
