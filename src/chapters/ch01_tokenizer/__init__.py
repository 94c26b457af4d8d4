"""Notebook 01 (tokenizer and chat template)'s own code: the profile's tokenizer and Qwen3's own,
marker ids, token tables and counts, the checks of a rendered prompt, the environment report as
text.
"""

__all__ = [
    "environment",
    "tokens",
]
