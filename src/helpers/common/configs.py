"""config.json of a model, local folder or hub id: the one reader every module uses (and the JSON
reader that names a damaged file and how to restore it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers.common.paths import local_dir, restore_hint

__all__ = [
    "read_json",
    "read_config",
]


def read_json(path: Path) -> Any:
    """A JSON file's content; one ValueError naming the file and how to restore it when it is
    not JSON (cut short, binary garbage)."""
    try:
        return json.loads(Path(path).read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        where = f" at line {err.lineno} column {err.colno}" if hasattr(err, "lineno") else ""
        raise ValueError(
            f"{path} is not valid JSON ({type(err).__name__}{where}): {restore_hint(path)}"
        ) from None


def read_config(ref: str | Path) -> dict[str, Any]:
    """config.json of a local model folder, or of a hub id via hf_hub_download (one-line errors)."""
    folder = local_dir(ref)
    if folder is not None:
        path = folder / "config.json"
        if not path.is_file():
            raise FileNotFoundError(f"{folder} has no config.json: check the path")
        return read_json(path)
    try:
        from huggingface_hub import hf_hub_download

        cached = Path(hf_hub_download(str(ref), "config.json"))
    except Exception as err:
        raise FileNotFoundError(
            f"cannot fetch config.json of hub model {ref!r} ({type(err).__name__}): offline or "
            f"no access? Download it once online, or pass a local folder"
        ) from None
    return read_json(cached)
