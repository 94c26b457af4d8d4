"""config.json of a model, local folder or hub id: the one reader every module uses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers.common.paths import local_dir

__all__ = [
    "read_config",
]


def read_config(ref: str | Path) -> dict[str, Any]:
    """config.json of a local model folder, or of a hub id via hf_hub_download (one-line errors)."""
    folder = local_dir(ref)
    if folder is not None:
        path = folder / "config.json"
        if not path.is_file():
            raise FileNotFoundError(f"{folder} has no config.json: check the path")
        return json.loads(path.read_text())
    try:
        from huggingface_hub import hf_hub_download

        return json.loads(Path(hf_hub_download(str(ref), "config.json")).read_text())
    except Exception as err:  # noqa: BLE001 - offline / gated / missing all become one line
        raise FileNotFoundError(
            f"cannot fetch config.json of hub model {ref!r} ({type(err).__name__}): offline or "
            f"no access? Download it once online, or pass a local folder"
        ) from None
