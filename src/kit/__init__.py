"""The instructor's and maintainer's kit: command-line tools no notebook imports (python -m kit.<tool>)."""
