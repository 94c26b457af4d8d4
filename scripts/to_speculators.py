"""Rewrite EAGLE-3 drafters saved with the original EAGLE code's `midlayer.*` tensor names (this
workbook before speculators 0.9.0 support) in speculators' names, in place, and check that
speculators' `Eagle3DraftModel` then loads every tensor.

usage: python scripts/to_speculators.py DRAFTER_DIR [DRAFTER_DIR ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from helpers.eagle3.checkpoint import load_in_speculators, to_speculators_names


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line arguments."""
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("drafters", nargs="+", type=Path, help="drafter folders (config.json + weights)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Convert each folder; exit 1 if speculators still leaves a tensor unmatched in any, 2 on a
    folder that is not a drafter's."""
    failed = 0
    for folder in _parse_args(argv).drafters:
        if not (folder / "model.safetensors").is_file() or not (folder / "config.json").is_file():
            print(f"{folder}: not a drafter folder (needs config.json and model.safetensors)")
            return 2
        changed = to_speculators_names(folder)
        _, unmatched = load_in_speculators(folder)
        print(
            f"{folder}: {len(changed)} tensors renamed; speculators leaves "
            f"{len(unmatched)} unmatched{': ' + ', '.join(unmatched) if unmatched else ''}"
        )
        failed += bool(unmatched)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
