"""Where things live: the repo root, shipped data, and the git-ignored build/ outputs."""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "REPO_ROOT",
    "DATA_DIR",
    "BUILD_DIR",
    "LOGS_DIR",
    "NOTEBOOKS_DIR",
    "RECIPE_LOG",
    "build_path",
    "is_local_ref",
    "local_dir",
    "restore_hint",
]


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
#: The tiny pair's training log, beside its verifier (written by kit.tiny_recipe).
RECIPE_LOG: str = "tiny-pair-recipe.json"


def build_path(*parts: str) -> Path:
    """A path under build/, its parent folder created."""
    path = BUILD_DIR.joinpath(*parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def is_local_ref(ref: str) -> bool:
    """True for a repo-relative or absolute filesystem path, False for a hub id like 'Qwen/X'."""
    return ref.startswith(("data/", "./", "../", "/", "build/")) or Path(ref).is_absolute()


def local_dir(ref: str | Path) -> Path | None:
    """The folder of a local model ref (repo-relative paths from the repo root); None for a hub
    id."""
    path = Path(ref)
    if path.is_dir():
        return path
    if is_local_ref(str(ref)):
        return path if path.is_absolute() else REPO_ROOT / path
    return None


def resolve_model_ref(ref: str) -> str:
    """A local model path made absolute from the repo root and checked; a hub id unchanged.

    A missing local path would otherwise fall through to a hub lookup and fail offline
    with an opaque LocalEntryNotFoundError, so it fails here, in one line, instead.
    """
    path = local_dir(ref) if is_local_ref(ref) else None
    if path is None:
        return ref
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"model folder {path} has no config.json: run `make tiny-models` to rebuild data/, "
            f"or check the profile's path"
        )
    return str(path)


#: What `make tiny-models` writes into data/ (so it can also rebuild a damaged copy).
_TINY_MODELS_OUTPUTS: tuple[str, ...] = (
    "tiny-qwen3-moe",
    "tiny-qwen3-moe-eagle3",
    "tiny-tokenizer",
    "prompts",
)


def restore_hint(path: str | Path) -> str:
    """How to get a damaged file back: git for what data/ ships (or `make tiny-models` for what it
    builds), else a new download or export."""
    path = Path(path)
    try:
        relative = path.resolve().relative_to(DATA_DIR.resolve())
    except (OSError, ValueError):
        return "download or export it again"
    shipped = (Path("data") / relative).as_posix()
    rebuild = (
        " (or rebuild with `make tiny-models`)" if relative.parts[0] in _TINY_MODELS_OUTPUTS else ""
    )
    return f"restore it with `git checkout -- {shipped}`{rebuild}"
