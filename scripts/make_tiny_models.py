"""Rebuild the embedded default in data/: tokenizer, held-out prompts, tiny verifier and drafter.

usage: python scripts/make_tiny_models.py [--out DIR] [--smoke]
"""
from __future__ import annotations

import argparse
from pathlib import Path

from helpers.paths import DATA_DIR
from helpers.tiny_pair import SMOKE, RecipeConfig, build_tiny_pair


def parse_args() -> argparse.Namespace:
    """Command-line flags."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=DATA_DIR, help="folder to write into (default: data/)")
    p.add_argument("--smoke", action="store_true", help="a few steps of everything (seconds, not minutes)")
    return p.parse_args()


def main(args: argparse.Namespace) -> None:
    """Build the pair and print where it went."""
    log = build_tiny_pair(args.out, SMOKE if args.smoke else RecipeConfig())
    print(f"done in {log['total_seconds']} s -> {args.out}")


if __name__ == "__main__":
    main(parse_args())
