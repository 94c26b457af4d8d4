"""The embedded tiny pair as notebooks use it: its chat corpus, the verifier's encoded exchanges,
and notebook 05's drafter lab. The recipes that train the pair into data/ are the kit's
(kit.tiny_recipe, kit.tiny_tokenizer, kit.tiny_verifier).
"""

__all__ = ["corpus", "lab", "verifier"]
