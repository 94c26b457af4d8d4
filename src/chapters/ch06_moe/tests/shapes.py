"""The shapes data/shapes/ ships, as notebook 06's MoeShape reads them (for 06's tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chapters.ch06_moe.moe import MoeShape
from helpers.common.configs import read_config
from helpers.common.paths import DATA_DIR


def _drafted_verifier(config: dict[str, Any]) -> str | None:
    """The folder name of the verifier a speculators-format drafter config names (None: not a
    drafter)."""
    verifier = (config.get("speculators_config") or {}).get("verifier") or {}
    name = verifier.get("name_or_path")
    return Path(name).name if name else None


def shipped_shapes() -> tuple[Any, ...]:
    """Every verifier MoeShape data/shapes/ ships, named after its folder (e.g. "qwen3-30b-a3b"),
    with the lm_head and MLP of the EAGLE-3 drafter there that names it."""
    configs = {
        folder.name: read_config(folder)
        for folder in sorted((DATA_DIR / "shapes").iterdir())
        if (folder / "config.json").is_file()
    }
    drafters = {_drafted_verifier(c): c for c in configs.values() if _drafted_verifier(c)}
    return tuple(
        MoeShape.from_config(name, config).with_drafter(drafters.get(name, {}))
        for name, config in configs.items()
        if _drafted_verifier(config) is None
    )


def shape_named(name: str) -> Any:
    """The MoeShape data/shapes/<name>/ ships."""
    shapes = {shape.name: shape for shape in shipped_shapes()}
    assert name in shapes, f"no shape {name!r} in data/shapes/: {sorted(shapes)}"
    return shapes[name]
