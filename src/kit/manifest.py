"""The sha256 manifest of data/: every shipped file's digest, so a changed byte is named before
anything loads.

    python -m kit.manifest [FOLDER]           (write FOLDER/MANIFEST.sha256; data/)
    python -m kit.manifest --check [FOLDER]   (one line per file that differs; exit 1)

The format is sha256sum's: one `<64 hex digits>  <path relative to FOLDER>` line per file, sorted
by path, so `cd data && sha256sum -c MANIFEST.sha256` checks it too. The recipes that write data/
(`make tiny-models`) write it last; preflight checks it first. Hidden files and __pycache__ are
not listed (an editor's or Jupyter's leftovers are not shipped data).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from helpers.common import paths

__all__ = [
    "main",
]

#: The manifest's file name, inside the folder it describes.
_MANIFEST_NAME = "MANIFEST.sha256"
#: The command that rewrites data/'s manifest (printed where a file was changed on purpose).
_REGENERATE = "python -m kit.manifest"
_LINE = re.compile(r"^([0-9a-f]{64})  (\S.*)$")
_CHUNK = 1 << 20


def _digest(path: Path) -> str:
    """The sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _listed(folder: Path) -> list[str]:
    """Every file under folder a manifest lists (relative POSIX paths, sorted): not itself, not
    hidden files, not __pycache__."""
    found = []
    for path in folder.rglob("*"):
        relative = path.relative_to(folder)
        if relative.as_posix() == _MANIFEST_NAME or not path.is_file():
            continue
        if any(part.startswith(".") or part == "__pycache__" for part in relative.parts):
            continue
        found.append(relative.as_posix())
    return sorted(found)


def _compute(folder: Path) -> dict[str, str]:
    """relative path -> sha256 of every listed file under folder."""
    return {name: _digest(folder / name) for name in _listed(folder)}


def write_manifest(folder: Path = paths.DATA_DIR) -> Path:
    """Write folder/MANIFEST.sha256 from the files there now; return its path."""
    folder = Path(folder)
    target = folder / _MANIFEST_NAME
    lines = [f"{digest}  {name}\n" for name, digest in _compute(folder).items()]
    target.write_text("".join(lines))
    return target


def _shown(path: Path) -> str:
    """A path as the user types it: relative to the repo root when inside it."""
    try:
        return path.resolve().relative_to(paths.REPO_ROOT.resolve()).as_posix()
    except ValueError:
        return str(path)


def _regenerate(folder: Path) -> str:
    """The command that rewrites folder's manifest."""
    default = folder.resolve() == paths.DATA_DIR.resolve()
    return f"`{_REGENERATE}`" if default else f"`{_REGENERATE} {_shown(folder)}`"


def _read(manifest: Path) -> dict[str, str]:
    """relative path -> sha256 from a manifest; one ValueError naming a malformed line."""
    recorded = {}
    for number, line in enumerate(manifest.read_text().splitlines(), 1):
        match = _LINE.match(line)
        if match is None:
            raise ValueError(
                f"{_shown(manifest)} line {number} is not `<sha256>  <path>`: "
                f"{paths.restore_hint(manifest)}"
            )
        recorded[match.group(2)] = match.group(1)
    return recorded


def check_manifest(folder: Path = paths.DATA_DIR) -> dict[Path, str]:
    """One line per file under folder that differs from its manifest (changed, missing, or not
    listed), keyed by the file's path; {} when all match."""
    folder = Path(folder)
    manifest = folder / _MANIFEST_NAME
    if not manifest.is_file():
        return {
            manifest: f"{_shown(manifest)} is missing: {paths.restore_hint(manifest)}, or write "
            f"it with {_regenerate(folder)}"
        }
    try:
        recorded = _read(manifest)
    except (OSError, UnicodeDecodeError, ValueError) as err:
        return {manifest: str(err).splitlines()[0]}
    where, listed = _shown(manifest), set(_listed(folder))
    problems: dict[Path, str] = {}
    for name in sorted(set(recorded) | listed):
        path = folder / name
        if name not in listed:
            problems[path] = f"{_shown(path)} is missing ({where} lists it): " + paths.restore_hint(
                path
            )
        elif name not in recorded:
            problems[path] = (
                f"{_shown(path)} is not in {where}: remove it, or record it with "
                f"{_regenerate(folder)}"
            )
        elif _digest(path) != recorded[name]:
            problems[path] = (
                f"{_shown(path)} does not match its sha256 in {where} (a changed byte): "
                f"{paths.restore_hint(path)}; changed on purpose: {_regenerate(folder)}"
            )
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    """Write the manifest (or, with --check, print what differs); 0 ok, 1 differs."""
    parser = argparse.ArgumentParser(
        prog="python -m kit.manifest",
        description=" ".join(__doc__.split("\n\n")[0].split()),
    )
    parser.add_argument(
        "folder", nargs="?", type=Path, default=paths.DATA_DIR, help="the folder (data/)"
    )
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        print(f"manifest: no folder {args.folder}", file=sys.stderr)
        return 1
    if args.check:
        problems = check_manifest(args.folder)
        for line in problems.values():
            print(line, file=sys.stderr)
        if not problems:
            print(f"{_shown(args.folder / _MANIFEST_NAME)}: every file matches")
        return 1 if problems else 0
    target = write_manifest(args.folder)
    count = len(target.read_text().splitlines())
    print(f"wrote {_shown(target)} ({count} file{'' if count == 1 else 's'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
