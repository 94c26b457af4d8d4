"""Command-line tools, out of the learners' way: `python -m helpers.tools.doctor` (will the workbook
run on this machine?), `python -m helpers.tools.preflight` (can this machine run a profile?),
`python -m helpers.tools.prefetch` (download a hub profile's pair for offline use) and
`python -m helpers.tools.runner` (execute the notebooks headless).
"""

__all__ = ["doctor", "preflight", "prefetch", "runner"]
