"""helpers.common.chat: a prompt rendered by the chat template, and the generation prompt."""

from __future__ import annotations

from helpers.common.chat import GENERATION_PROMPT, render
from helpers.common.profiles import load_profile

MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]


def test_render_ends_with_the_generation_prompt() -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(load_profile("tiny").verifier_path())
    text = render(tok, MSGS)
    assert text.endswith(GENERATION_PROMPT) and text.count("<|im_start|>") == 3
    assert not render(tok, MSGS, add_generation_prompt=False).endswith(GENERATION_PROMPT)
