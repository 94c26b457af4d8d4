"""Command-line tools, out of the learners' way: `python -m helpers.tools.preflight` (can this
machine run a profile?) and `python -m helpers.tools.runner` (execute the notebooks headless).
"""

__all__ = ["preflight", "runner"]
