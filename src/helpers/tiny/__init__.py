"""The embedded tiny pair: its chat corpus, tokenizer, verifier, the recipe that trains both
models into data/, notebook 05's drafter lab, and the model cards rendered from measurements.
"""

__all__ = ["corpus", "lab", "model_cards", "recipe", "tokenizer", "verifier"]
