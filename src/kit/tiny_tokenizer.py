"""The embedded default's tokenizer: a byte-level BPE with Qwen's chat markers (notebook 01)."""

from __future__ import annotations

import glob
import sysconfig
from collections.abc import Iterator
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from helpers.common.chat import ENDOFTEXT, IM_END, IM_START
from helpers.common.paths import DATA_DIR

__all__ = []  # nothing here is used outside the kit

_TOKENIZER_DIR: Path = DATA_DIR / "tiny-tokenizer"
_VOCAB_SIZE = 2048
_SPECIAL_TOKENS: tuple[str, ...] = (ENDOFTEXT, IM_START, IM_END)

#: Renders the Qwen chat format: one `<|im_start|>role\n…<|im_end|>\n` block per message,
#: and `<|im_start|>assistant\n` when add_generation_prompt is set. Written for this repo.
_CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' -}}"
    "{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}"
)


def _training_texts() -> Iterator[str]:
    """Text every CPython install has: the stdlib's top-level .py sources and pydoc's topics."""
    from pydoc_data.topics import topics

    for path in sorted(glob.glob(str(Path(sysconfig.get_paths()["stdlib"]) / "*.py"))):
        yield Path(path).read_text(encoding="utf-8", errors="ignore")
    for name in sorted(topics):
        yield topics[name]


def _train_bpe(texts: Iterator[str], vocab_size: int = _VOCAB_SIZE) -> Tokenizer:
    """Train a byte-level BPE (GPT-2/Qwen style pre-tokenizer) with the three special tokens."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    return tok


def _wrap_for_transformers(tok: Tokenizer) -> PreTrainedTokenizerFast:
    """Wrap a trained BPE as a transformers tokenizer: EOS <|im_end|>, pad <|endoftext|>, chat
    template."""
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        chat_template=_CHAT_TEMPLATE,
        model_max_length=2048,
    )


def build_tokenizer(
    out_dir: Path = _TOKENIZER_DIR, vocab_size: int = _VOCAB_SIZE
) -> PreTrainedTokenizerFast:
    """Train the tiny tokenizer and save it where AutoTokenizer.from_pretrained loads it offline."""
    hf_tok = _wrap_for_transformers(_train_bpe(_training_texts(), vocab_size))
    out_dir.mkdir(parents=True, exist_ok=True)
    hf_tok.save_pretrained(out_dir)
    hf_tok.backend_tokenizer.save(str(out_dir / "tokenizer.json"), pretty=False)  # 40 % smaller
    return hf_tok
