"""Rebuild the tiny DFlash drafter in data/ (after the tiny pair: it reads the verifier there).

usage: python -m chapters.ch07_field.tools.make_tiny_dflash [--out DIR] [--smoke]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from chapters.ch07_field.tools.dflash_recipe import SMOKE, DFlashRecipe, build_dflash
from helpers.common.paths import DATA_DIR


def parse_args() -> argparse.Namespace:
    """Command-line flags."""
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument(
        "--out", type=Path, default=DATA_DIR, help="folder with the verifier (default: data/)"
    )
    p.add_argument("--smoke", action="store_true", help="a few steps (seconds, not minutes)")
    return p.parse_args()


def main(args: argparse.Namespace) -> None:
    """Build the drafter and print where it went."""
    log = build_dflash(args.out, SMOKE if args.smoke else DFlashRecipe())
    print(f"done in {log['total_seconds']} s -> {args.out}")


if __name__ == "__main__":
    main(parse_args())
