"""EAGLE-3 among the other ways to draft (notebook 07): what each method drafts from, what it is
trained on, chain or tree, and the `method` the installed vLLM knows it by.

The rows are descriptions from the methods' papers and vLLM's documentation, with the source of
each; which of them the installed vLLM accepts is checked against its own `SpeculativeMethod`.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass

import pandas as pd

__all__ = ["Method", "METHODS", "installed_methods", "has_token_tree", "methods_table"]


@dataclass(frozen=True)
class Method:
    """One speculative-decoding method as a row of the comparison."""

    name: str
    drafts_from: str
    trained_on: str
    shape: str
    vllm_method: str
    source: str


METHODS: tuple[Method, ...] = (
    Method(
        "draft model",
        "a smaller LM of the same tokenizer, reading tokens only",
        "ordinary next-token training (or distillation from the verifier)",
        "chain",
        "draft_model",
        "Leviathan et al. 2023, arXiv:2211.17192; Chen et al. 2023, arXiv:2302.01318",
    ),
    Method(
        "n-gram (prompt lookup)",
        "no model: the last n tokens matched in the prompt and output so far",
        "nothing to train",
        "chain",
        "ngram",
        "Saxena 2023, github.com/apoorvumang/prompt-lookup-decoding",
    ),
    Method(
        "suffix decoding",
        "no model: suffix trees over this and earlier requests' tokens",
        "nothing to train (frequency counts)",
        "tree",
        "suffix",
        "Oliaro et al. 2024, arXiv:2411.04975",
    ),
    Method(
        "Medusa",
        "extra heads on the verifier's last hidden state, head i guesses token t+i",
        "cross-entropy of each head against the data's token t+i",
        "tree",
        "medusa",
        "Cai et al. 2024, arXiv:2401.10774",
    ),
    Method(
        "MTP",
        "the model's own multi-token-prediction module: last hidden state + next token",
        "trained with the model itself (pre-training objective)",
        "chain",
        "mtp",
        "DeepSeek-AI 2024, arXiv:2412.19437 (DeepSeek-V3)",
    ),
    Method(
        "EAGLE-1",
        "the verifier's top-layer feature + the next token's embedding",
        "regress the next feature + cross-entropy",
        "tree (static)",
        "eagle",
        "Li et al. 2024, arXiv:2401.15077",
    ),
    Method(
        "EAGLE-2",
        "as EAGLE-1",
        "as EAGLE-1",
        "tree (dynamic, by draft confidence)",
        "eagle",
        "Li et al. 2024, arXiv:2406.16858",
    ),
    Method(
        "EAGLE-3",
        "low, middle and high verifier layers fused (fc 3H→H) + the next token's embedding",
        "cross-entropy only, with training-time test over the drafter's own steps",
        "tree (dynamic) in the paper; chain in vLLM",
        "eagle3",
        "Li et al. 2025, arXiv:2503.01840",
    ),
)


def installed_methods() -> set[str]:
    """Every `method` the installed vLLM's SpeculativeConfig accepts."""
    from vllm.config import speculative

    def flatten(tp: object) -> set[str]:
        args = typing.get_args(tp)
        return {a for a in args if isinstance(a, str)} | {
            s for a in args if not isinstance(a, str) for s in flatten(a)
        }

    return flatten(speculative.SpeculativeMethod)


def has_token_tree() -> bool:
    """True when the installed vLLM has `speculative_token_tree` (tree drafts for EAGLE)."""
    from vllm.config.speculative import SpeculativeConfig

    return "speculative_token_tree" in {f.name for f in dataclasses.fields(SpeculativeConfig)}


def methods_table(methods: tuple[Method, ...] = METHODS) -> pd.DataFrame:
    """The comparison as a table, with whether the installed vLLM accepts each `method`."""
    known = installed_methods()
    rows = [dataclasses.asdict(m) | {"in this vLLM": m.vllm_method in known} for m in methods]
    return pd.DataFrame(rows).set_index("name")
