"""Held-out prompts by task category (data/prompts/*.json) and the one-message chat they are sent
as."""

from __future__ import annotations

from pathlib import Path

from helpers.common.configs import read_json
from helpers.common.paths import DATA_DIR, restore_hint

__all__ = [
    "CATEGORIES",
    "PROMPTS_DIR",
    "Messages",
    "as_messages",
    "read_prompt_file",
    "load_prompts",
    "interleaved",
]

#: The four task categories of the tiny pair, from most to least predictable by design.
CATEGORIES: tuple[str, ...] = ("structured", "code", "prose", "creative")
PROMPTS_DIR: Path = DATA_DIR / "prompts"
Messages = list[dict[str, str]]


def as_messages(prompt: str) -> Messages:
    """A user prompt as a one-message chat (how every prompt of the workbook is sent)."""
    return [{"role": "user", "content": prompt}]


def read_prompt_file(path: Path) -> list[str]:
    """One category's prompts: a non-empty JSON list of strings (else one ValueError naming the
    file and how to restore it)."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path} is missing: {restore_hint(path)}")
    items = read_json(path)
    if not isinstance(items, list) or not items or not all(isinstance(p, str) for p in items):
        raise ValueError(
            f"{path} is not a non-empty JSON list of prompt strings: {restore_hint(path)}"
        )
    return items


def load_prompts(n: int | None = None, prompts_dir: Path = PROMPTS_DIR) -> dict[str, list[str]]:
    """The first n prompts of each category (all when n is None or 0), in CATEGORIES order."""
    out = {}
    for cat in CATEGORIES:
        items = read_prompt_file(Path(prompts_dir) / f"{cat}.json")
        out[cat] = items[:n] if n else items
    return out


def interleaved(prompts: dict[str, list[str]], n: int) -> list[str]:
    """n prompts taken round-robin across categories (repeating when n exceeds the pool)."""
    pool = [p for group in zip(*prompts.values()) for p in group]
    if not pool:
        raise ValueError("no prompts found: run `make tiny-models` to rebuild data/prompts")
    return [pool[i % len(pool)] for i in range(n)]
