"""Chat templates: Qwen's chat markers and a prompt rendered by a tokenizer's template."""

from __future__ import annotations

from typing import Any

from transformers import PreTrainedTokenizerBase

from helpers.common.prompts import Messages

__all__ = [
    "ENDOFTEXT",
    "IM_START",
    "IM_END",
    "GENERATION_PROMPT",
    "render",
]

#: Qwen's chat markers: every turn is `<|im_start|>{role}\n{content}<|im_end|>\n`.
ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
GENERATION_PROMPT = f"{IM_START}assistant\n"


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
