"""Chat templates and tokens: render Qwen-format prompts and look at their tokens (notebook 01)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from helpers.common.envinfo import hub_reachable
from helpers.common.profiles import Profile, load_profile
from helpers.common.prompts import Messages, as_messages

__all__ = [
    "GENERATION_PROMPT",
    "LoadedTokenizer",
    "load_tokenizer",
    "render",
    "special_ids",
    "token_table",
    "marker_problems",
    "count_turn_starts",
    "double_templated",
]

#: Qwen's chat markers: every turn is `<|im_start|>{role}\n{content}<|im_end|>\n`.
ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
GENERATION_PROMPT = f"{IM_START}assistant\n"


@dataclass(frozen=True)
class LoadedTokenizer:
    """A tokenizer and a one-line note on where it came from."""

    tokenizer: PreTrainedTokenizerBase
    source: str
    note: str


def load_tokenizer(profile: Profile) -> LoadedTokenizer:
    """The profile's verifier tokenizer; a hub model offline falls back to the tiny one, saying so."""
    if profile.is_local:
        path = profile.verifier_path()
        tok = AutoTokenizer.from_pretrained(path)
        note = (
            f"tiny tokenizer from {profile.verifier}"
            if profile.has_weights
            else f"{profile.name} has random weights and no tokenizer of its own: the tiny "
            f"tokenizer padded to its {len(tok):,} ids, from {profile.verifier}"
        )
        return LoadedTokenizer(tok, path, note)
    if hub_reachable():
        return LoadedTokenizer(
            AutoTokenizer.from_pretrained(profile.verifier),
            profile.verifier,
            f"{profile.verifier} tokenizer from the model hub",
        )
    tiny = load_profile("tiny")
    return LoadedTokenizer(
        AutoTokenizer.from_pretrained(tiny.verifier_path()),
        tiny.verifier,
        f"model hub unreachable: using the tiny tokenizer instead of {profile.verifier}'s",
    )


def render(
    tok: PreTrainedTokenizerBase, messages: Messages, add_generation_prompt: bool = True
) -> str:
    """The prompt text the chat template produces for `messages`."""
    return tok.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=add_generation_prompt
    )


def special_ids(tok: PreTrainedTokenizerBase) -> set[int]:
    """Ids of every special token: the named ones (eos, pad) and added tokens marked special (<|im_start|>)."""
    return set(tok.all_special_ids) | {i for i, t in tok.added_tokens_decoder.items() if t.special}


def token_table(tok: PreTrainedTokenizerBase, text: str) -> pd.DataFrame:
    """One row per token of `text`: position, id, the text it stands for, and whether it is special."""
    ids = tok(text, add_special_tokens=False)["input_ids"]
    special = special_ids(tok)
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
            f"generation prompt {GENERATION_PROMPT!r} {'missing' if add_generation_prompt else 'unexpected'} at the end"
        )
    return problems


def count_turn_starts(text: str) -> int:
    """How many `<|im_start|>` markers a text holds."""
    return text.count(IM_START)


def double_templated(tok: PreTrainedTokenizerBase, messages: Messages) -> str:
    """What `LLM.chat` would build if handed an already rendered prompt as the user's message."""
    return render(tok, as_messages(render(tok, messages)))
