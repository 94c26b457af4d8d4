"""scripts/gpu_moe_lab.py: the shape profile picks the model and its GPUs; what cannot run is one line."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import vllm

from helpers.common.paths import DATA_DIR, REPO_ROOT
from tests.support import load_script

lab = load_script("gpu_moe_lab")


def test_default_is_the_30b_shape_on_one_gpu() -> None:
    args = lab.parse_args([])
    assert args.profile == "qwen3-30b-a3b-shape" and args.tensor_parallel_size == 1
    assert args.verifier == DATA_DIR / "shapes" / "qwen3-30b-a3b"
    assert args.drafter == DATA_DIR / "shapes" / "qwen3-30b-a3b-eagle3"
    assert args.kv_cache_gib is None


def test_235b_shape_engines_use_tensor_parallel_4(monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["--profile", "qwen3-235b-a22b-shape", "--kv-cache-gib", "4"]
    args = lab.parse_args(argv)
    assert args.verifier == DATA_DIR / "shapes" / "qwen3-235b-a22b" and args.gpus_needed == 4
    built: list[dict[str, Any]] = []
    monkeypatch.setattr(vllm, "LLM", lambda **kwargs: built.append(kwargs))
    lab.start(3, 2.5, args, 64)
    (kwargs,) = built
    assert kwargs["tensor_parallel_size"] == 4 and kwargs["load_format"] == "dummy"
    assert kwargs["kv_cache_memory_bytes"] == 4 * 1024**3 and kwargs["max_num_seqs"] == 64
    assert kwargs["model"] == str(args.verifier)
    assert kwargs["speculative_config"]["model"] == str(args.drafter)
    assert kwargs["speculative_config"]["num_speculative_tokens"] == 3


def test_too_few_gpus_is_a_one_line_refusal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "lab.json"
    argv = ["--profile", "qwen3-235b-a22b-shape", "--out", str(out)]
    monkeypatch.setattr(lab, "has_gpu", lambda: False)
    assert lab.main(argv) == 2
    assert "no NVIDIA GPU here" in capsys.readouterr().out
    monkeypatch.setattr(lab, "has_gpu", lambda: True)
    monkeypatch.setattr(lab, "gpu_count", lambda: 1)
    assert lab.main(argv) == 2
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines == [
        "gpu_moe_lab: profile qwen3-235b-a22b-shape needs 4 GPUs and nvidia-smi lists 1: "
        "nothing measured"
    ]
    assert not out.exists()


def test_gpu_check_runs_the_shape_steps_on_its_shape_and_the_readme_command_parses() -> None:
    """scripts/gpu_check.sh keeps the 30B shape as its default; the README's 235B command names
    only variables it reads, and its lab arguments are the lab's own."""
    script = (REPO_ROOT / "scripts" / "gpu_check.sh").read_text()
    assert "SHAPE=${SHAPE:-qwen3-30b-a3b-shape}" in script
    assert "WORKBOOK_PROFILE=$SHAPE" in script and '--profile "$SHAPE"' in script
    (command,) = re.findall(
        r"`(SHAPE=qwen3-235b-a22b-shape [^`]*)`", (REPO_ROOT / "README.md").read_text()
    )
    env = dict(re.findall(r'(\w+)="?([^"]*?)"? (?=\w+=|bash)', command + " "))
    assert set(env) == {"SHAPE", "STEPS", "SHAPE_NOTEBOOKS", "LAB_ARGS"}
    assert all(f"${{{name}" in script or f"${name}" in script for name in env), env
    args = lab.parse_args(["--profile", env["SHAPE"], *env["LAB_ARGS"].split()])
    assert args.tensor_parallel_size == 4 and args.kv_cache_gib == 4
    assert lab.engine_grid(args.engines) == [(1, 1.5), (3, 2.5)] and args.concurrency == "1,16,64"
