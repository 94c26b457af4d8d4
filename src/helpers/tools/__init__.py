"""Command-line tools, out of the learners' way: `python -m helpers.tools.doctor` (will the workbook
run on this machine?), `python -m helpers.tools.preflight` (can this machine run a profile?),
`python -m helpers.tools.prefetch` (download a hub profile's pair for offline use),
`python -m helpers.tools.runner` (execute the notebooks headless) and `python -m
helpers.tools.grader` (grade the algorithm a learner wrote in exercises/: make check-exercises).
"""

__all__ = ["doctor", "grader", "preflight", "prefetch", "runner"]
