"""Rebuild the embedded default in data/: tokenizer, held-out prompts, tiny verifier and drafter.

usage: python scripts/make_tiny_models.py [--out DIR] [--smoke] [--resume-drafter]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from helpers.common.paths import DATA_DIR
from kit.tiny_recipe import SMOKE, RecipeConfig, build_tiny_pair, resume_drafter


def parse_args() -> argparse.Namespace:
    """Command-line flags."""
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument(
        "--out", type=Path, default=DATA_DIR, help="folder to write into (default: data/)"
    )
    p.add_argument(
        "--smoke", action="store_true", help="a few steps of everything (seconds, not minutes)"
    )
    p.add_argument(
        "--resume-drafter",
        action="store_true",
        help="keep the verifier in --out; redo only self-distillation and the drafter",
    )
    return p.parse_args()


def main(args: argparse.Namespace) -> None:
    """Build the pair and print where it went."""
    cfg = SMOKE if args.smoke else RecipeConfig()
    if args.resume_drafter:
        log = resume_drafter(args.out, cfg)
        print(f"drafter rebuilt in {log['drafter']['seconds']} s -> {args.out}")
    else:
        log = build_tiny_pair(args.out, cfg)
        print(f"done in {log['total_seconds']} s -> {args.out}")


if __name__ == "__main__":
    main(parse_args())
