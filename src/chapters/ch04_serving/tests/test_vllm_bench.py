"""chapters.ch04_serving.vllm_bench: its `vllm bench serve` command parses with vLLM's own parser,
and a failed run says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from chapters.ch04_serving.vllm_bench import bench_serve_argv, run_bench_serve


def test_argv_parses_with_vllm_bench_serves_parser(tmp_path: Path) -> None:
    pytest.importorskip("vllm.benchmarks.serve")
    from vllm.benchmarks.serve import add_cli_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    argv = bench_serve_argv(
        "http://127.0.0.1:1", "m", "tok", tmp_path / "p.jsonl", 8, 4, 64, tmp_path / "r.json"
    )
    assert argv[1:3] == ["-m", "chapters.ch04_serving.vllm_bench"]
    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    args = parser.parse_args(argv[3:])
    assert (args.max_concurrency, args.num_prompts, args.custom_output_len) == (4, 8, 64)
    assert args.ignore_eos and args.save_result and args.dataset_name == "custom"


def test_a_failed_run_raises_with_its_output(tmp_path: Path) -> None:
    from helpers.common.profiles import load_profile

    tokenizer = load_profile("tiny").verifier_path()  # local: no hub lookup before the failure
    argv = bench_serve_argv(
        "http://127.0.0.1:9", "m", tokenizer, tmp_path / "none.jsonl", 1, 1, 4, tmp_path / "r.json"
    )
    argv += ["--ready-check-timeout-sec", "1"]
    with pytest.raises(RuntimeError, match="vllm bench serve failed"):
        run_bench_serve(argv, timeout=120)
