"""The sha256 manifest of data/: every shipped file's digest, so a changed byte is named before
anything loads.

    python -m kit.manifest [FOLDER]                 (write FOLDER/MANIFEST.sha256; data/)
    python -m kit.manifest --check [FOLDER]         (one line per file that differs; exit 1)
    python -m kit.manifest --record FILE [FOLDER]   (record one file; `make manifest FILE=…`)

The format is sha256sum's: one `<64 hex digits>  <path relative to FOLDER>` line per file, sorted
by path, so `cd data && sha256sum -c MANIFEST.sha256` checks it too. The recipes that write data/
(`make tiny-models`) write it last; preflight checks it first. Hidden files and __pycache__ are
not listed (an editor's or Jupyter's leftovers are not shipped data). data/ ships plain files
only: a symbolic link (a self-loop, a cycle of folders, a file replaced by a link) is never
listed nor followed, and the check names each one.

A file you add on purpose (a profile of your own, data/profiles/mypair.json) is recorded alone
with `make manifest FILE=data/profiles/mypair.json`: a profile that does not load, a JSON file
that does not parse, a link or a file outside the folder is refused in one line, and no other
line of the manifest changes.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from helpers.common import paths
from helpers.common.configs import read_json
from helpers.common.profiles import profile_file_problems

__all__ = [
    "main",
    "write_manifest",
]

#: The manifest's file name, inside the folder it describes.
_MANIFEST_NAME = "MANIFEST.sha256"
#: The command that rewrites a whole folder's manifest (the recipes' way; a missing manifest).
_REGENERATE = ".venv/bin/python -m kit.manifest"
#: The command that records one file of data/ (the Makefile's manifest target).
_RECORD = "make manifest FILE="
_LINE = re.compile(r"^([0-9a-f]{64})  (\S.*)$")
_CHUNK = 1 << 20


def _digest(path: Path) -> str:
    """The sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _hidden(relative: Path) -> bool:
    """True for what a manifest leaves out: hidden files and folders, __pycache__."""
    return any(part.startswith(".") or part == "__pycache__" for part in relative.parts)


def _walk(folder: Path) -> tuple[list[Path], list[Path]]:
    """(plain files, symbolic links) under folder, links never followed, each list sorted."""
    files, links = [], []
    for root, dirs, names in os.walk(folder, followlinks=False):
        here = Path(root)
        for name in dirs + names:
            path = here / name
            if path.is_symlink():
                links.append(path)
            elif name in names and path.is_file():
                files.append(path)
    return sorted(files), sorted(links)


def _symlinks(folder: Path = paths.DATA_DIR) -> list[Path]:
    """Every symbolic link under folder (to a file, a folder, itself, or nothing), sorted."""
    return _walk(Path(folder))[1]


def _listed(folder: Path) -> list[str]:
    """Every file under folder a manifest lists (relative POSIX paths, sorted): plain files, not
    itself, not hidden files, not __pycache__, never a link or what a link leads to."""
    found = []
    for path in _walk(folder)[0]:
        relative = path.relative_to(folder)
        if relative.as_posix() != _MANIFEST_NAME and not _hidden(relative):
            found.append(relative.as_posix())
    return sorted(found)


def _compute(folder: Path) -> dict[str, str]:
    """relative path -> sha256 of every listed file under folder."""
    return {name: _digest(folder / name) for name in _listed(folder)}


def _write(target: Path, recorded: dict[str, str]) -> None:
    """Write a manifest of `recorded` (relative path -> sha256), sorted by path."""
    lines = [f"{recorded[name]}  {name}\n" for name in sorted(recorded)]
    target.write_text("".join(lines), encoding="utf-8")


def write_manifest(folder: Path = paths.DATA_DIR) -> Path:
    """Write folder/MANIFEST.sha256 from the files there now; return its path."""
    folder = Path(folder)
    target = folder / _MANIFEST_NAME
    _write(target, _compute(folder))
    return target


def _shown(path: Path) -> str:
    """A path as the user types it: relative to the repo root when inside it (links not
    followed)."""
    try:
        return Path(os.path.abspath(path)).relative_to(paths.REPO_ROOT.absolute()).as_posix()
    except ValueError:
        return str(path)


def _is_data(folder: Path) -> bool:
    """True when folder is the repo's data/."""
    return Path(os.path.abspath(folder)) == Path(os.path.abspath(paths.DATA_DIR))


def _regenerate(folder: Path) -> str:
    """The command that rewrites folder's whole manifest."""
    return f"`{_REGENERATE}`" if _is_data(folder) else f"`{_REGENERATE} {_shown(folder)}`"


def _record_hint(path: Path, folder: Path) -> str:
    """The command that records one file of folder in its manifest."""
    if _is_data(folder):
        return f"`{_RECORD}{_shown(path)}`"
    return f"`{_REGENERATE} --record {_shown(path)} {_shown(folder)}`"


def _read(manifest: Path) -> dict[str, str]:
    """relative path -> sha256 from a manifest; one ValueError naming a malformed line."""
    recorded = {}
    for number, line in enumerate(manifest.read_text(encoding="utf-8").splitlines(), 1):
        match = _LINE.match(line)
        if match is None:
            raise ValueError(
                f"{_shown(manifest)} line {number} is not `<sha256>  <path>`: "
                f"{paths.restore_hint(manifest)}"
            )
        recorded[match.group(2)] = match.group(1)
    return recorded


def shipped(path: Path, folder: Path = paths.DATA_DIR) -> bool:
    """True when folder's manifest records the file at path (what git restores); False for a file
    you added, or when the manifest cannot be read."""
    try:
        relative = Path(os.path.abspath(path)).relative_to(Path(os.path.abspath(folder)))
        return relative.as_posix() in _read(Path(folder) / _MANIFEST_NAME)
    except (OSError, UnicodeDecodeError, ValueError):
        return False


def _link_line(link: Path, folder: Path, recorded: dict[str, str]) -> str:
    """The one line for a symbolic link under folder: its name, where it points, the fix."""
    shown = _shown(link)
    try:
        target = f" (to {os.readlink(link)})"
    except OSError:
        target = ""
    relative = link.relative_to(folder).as_posix()
    if relative in recorded:
        fix = f"replace it with the file: `rm {shown} && git checkout -- {shown}`"
    else:
        fix = f"remove it (`rm {shown}`)"
    return f"{shown} is a symbolic link{target}: data/ ships plain files only; {fix}"


def check_manifest(folder: Path = paths.DATA_DIR) -> dict[Path, str]:
    """One line per file under folder that differs from its manifest (changed, missing, or not
    listed) and per symbolic link, keyed by the file's path; {} when all match."""
    folder = Path(folder)
    manifest = folder / _MANIFEST_NAME
    if not manifest.is_file() or manifest.is_symlink():
        return {
            manifest: f"{_shown(manifest)} is missing: {paths.restore_hint(manifest)}, or write "
            f"it with {_regenerate(folder)}"
        }
    try:
        recorded = _read(manifest)
    except (OSError, UnicodeDecodeError, ValueError) as err:
        return {manifest: str(err).splitlines()[0]}
    where, links = _shown(manifest), _symlinks(folder)
    problems = {link: _link_line(link, folder, recorded) for link in links}
    linked = {link.relative_to(folder).as_posix() for link in links}
    listed = set(_listed(folder))
    for name in sorted((set(recorded) | listed) - linked):
        path = folder / name
        if name not in listed:
            if any(name.startswith(f"{link}/") for link in linked):
                continue  # under a linked folder: that link's line says it
            problems[path] = f"{_shown(path)} is missing ({where} lists it): " + paths.restore_hint(
                path
            )
        elif name not in recorded:
            problems[path] = (
                f"{_shown(path)} is not in {where}: remove it, or record it with "
                f"{_record_hint(path, folder)}"
            )
        elif _digest(path) != recorded[name]:
            problems[path] = (
                f"{_shown(path)} does not match its sha256 in {where} (a changed byte): "
                f"{paths.restore_hint(path)}; changed on purpose: {_record_hint(path, folder)}"
            )
    return dict(sorted(problems.items()))


def _refusal(path: Path, folder: Path) -> str | None:
    """Why _record_file must not record the file at an absolute path (outside folder, a link, not
    a file, hidden, the manifest, a profile that does not load, JSON that does not parse), or
    None."""
    shown, inside = _shown(path), Path(os.path.abspath(folder))
    if not path.is_relative_to(inside):
        return f"{shown} is not inside {_shown(folder)}/: only its files are recorded"
    relative = path.relative_to(inside)
    if path.is_symlink():
        return f"{shown} is a symbolic link: data/ ships plain files only; remove it"
    if not path.is_file():
        return f"{shown} is not a file: check the path (from the repo root: data/…)"
    if relative.as_posix() == _MANIFEST_NAME:
        return f"{shown} is the manifest itself"
    if _hidden(relative):
        return f"{shown} is hidden (or in __pycache__): a manifest never lists such files"
    if path.suffix != ".json":
        return None
    if relative.parent.as_posix() == "profiles":
        problems = profile_file_problems(path)
        if problems:
            first = problems[0].replace(str(path), shown).removeprefix(f"{shown}: ")
            return f"{shown} does not load as a profile ({first}): fix it, then record it"
        return None
    try:
        read_json(path)
    except (OSError, ValueError) as err:
        return str(err).replace(str(path), shown)
    return None


def _record_file(path: Path, folder: Path = paths.DATA_DIR) -> str:
    """Record one file's sha256 in folder's manifest (its line added or replaced, no other line
    touched); one ValueError when it must not be recorded. Returns the line to print."""
    path, folder = Path(path), Path(folder)
    if not path.is_absolute() and not os.path.lexists(path):
        path = paths.REPO_ROOT / path  # a path from the repo root, as `make manifest` passes it
    path = Path(os.path.abspath(path))
    refusal = _refusal(path, folder)
    if refusal:
        raise ValueError(f"{refusal}; {_shown(folder / _MANIFEST_NAME)} is unchanged")
    target = folder / _MANIFEST_NAME
    recorded = _read(target) if target.is_file() else {}
    recorded[path.relative_to(os.path.abspath(folder)).as_posix()] = _digest(path)
    _write(target, recorded)
    return f"recorded {_shown(path)} in {_shown(target)}"


def main(argv: Sequence[str] | None = None) -> int:
    """Write the manifest (with --check, print what differs; with --record, record one file);
    0 ok, 1 differs, 2 a file not recorded."""
    parser = argparse.ArgumentParser(
        prog="python -m kit.manifest",
        description=" ".join(__doc__.split("\n\n")[0].split()),
    )
    parser.add_argument(
        "folder", nargs="?", type=Path, default=paths.DATA_DIR, help="the folder (data/)"
    )
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    parser.add_argument("--record", metavar="FILE", help="record this one file only")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        print(f"manifest: no folder {args.folder}", file=sys.stderr)
        return 1
    if args.record is not None:
        return _main_record(args.record, args.folder)
    if args.check:
        problems = check_manifest(args.folder)
        for line in problems.values():
            print(line, file=sys.stderr)
        if not problems:
            print(f"{_shown(args.folder / _MANIFEST_NAME)}: every file matches")
        return 1 if problems else 0
    target = write_manifest(args.folder)
    count = len(target.read_text(encoding="utf-8").splitlines())
    print(f"wrote {_shown(target)} ({count} file{'' if count == 1 else 's'})")
    return 0


def _main_record(file: str, folder: Path) -> int:
    """--record FILE: one line, 0 when recorded, 2 when not."""
    if not file.strip():
        print(
            "manifest: name the file to record, e.g. "
            "`make manifest FILE=data/profiles/mypair.json` (one file's sha256, no other line "
            "changes)",
            file=sys.stderr,
        )
        return 2
    try:
        print(_record_file(Path(file), folder))
    except ValueError as err:
        print(f"manifest: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
