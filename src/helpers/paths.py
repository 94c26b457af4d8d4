"""Where things live: the repo root, shipped data, and the git-ignored build/ outputs."""
from __future__ import annotations

from pathlib import Path


def _find_repo_root() -> Path:
    """Walk up from this file to the folder holding pyproject.toml."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").is_file() and (parent / "src" / "helpers").is_dir():
            return parent
    raise RuntimeError(f"cannot find the eagle3-workbook repo root above {here}")


REPO_ROOT: Path = _find_repo_root()
DATA_DIR: Path = REPO_ROOT / "data"
BUILD_DIR: Path = REPO_ROOT / "build"
FIGURES_DIR: Path = BUILD_DIR / "figures"
LOGS_DIR: Path = BUILD_DIR / "logs"
NOTEBOOKS_DIR: Path = REPO_ROOT / "notebooks"


def build_path(*parts: str) -> Path:
    """A path under build/, its parent folder created."""
    path = BUILD_DIR.joinpath(*parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def is_local_ref(ref: str) -> bool:
    """True for a repo-relative or absolute filesystem path, False for a hub id like 'Qwen/X'."""
    return ref.startswith(("data/", "./", "../", "/", "build/")) or Path(ref).is_absolute()


def resolve_model_ref(ref: str) -> str:
    """A local model path made absolute from the repo root and checked; a hub id unchanged.

    A missing local path would otherwise fall through to a hub lookup and fail offline
    with an opaque LocalEntryNotFoundError, so it fails here, in one line, instead.
    """
    if not is_local_ref(ref):
        return ref
    path = Path(ref) if Path(ref).is_absolute() else REPO_ROOT / ref
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"model folder {path} has no config.json: run `make tiny-models` to rebuild data/, "
            f"or check the profile's path"
        )
    return str(path)
