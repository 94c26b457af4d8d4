"""The embedded tiny pair: its chat corpus, tokenizer, verifier, the recipe that trains both
models into data/, the recipe of its DFlash drafter, notebook 05's drafter lab, and the model cards
rendered from measurements.
"""

__all__ = ["corpus", "lab", "verifier"]
