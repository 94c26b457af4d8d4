"""scripts/gpu_engine_lab.py: refuses in one line what it cannot measure; on a CPU its smoke test
starts the three engines of a configuration in a child process and records each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import load_script

lab = load_script("gpu_engine_lab")


def test_unknown_config_and_no_gpu_are_one_line_refusals(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert lab.main(["--configs", "nope", "--out", str(tmp_path / "x.json")]) == 2
    assert "unknown configs ['nope']" in capsys.readouterr().out
    monkeypatch.setattr(lab.envinfo, "has_gpu", lambda: False)
    assert lab.main(["--configs", "tiny-inproc-eager-fp32", "--out", str(tmp_path / "x.json")]) == 2
    assert "no GPU here" in capsys.readouterr().out
    assert not (tmp_path / "x.json").exists()


def test_graphs_config_skips_torch_compile_and_captures_whole_decode_steps() -> None:
    graphs = lab.CONFIGS["tiny-inproc-graphs-fp32"][2]
    assert graphs is lab.lifecycle.SMALL_GPU_GRAPHS, "the tiny pair's GPU default"
    assert lab.CONFIGS["tiny-inproc-eager-fp32"][2]["enforce_eager"] is True
    assert graphs["enforce_eager"] is False
    assert graphs["compilation_config"]["mode"] == 0
    assert graphs["compilation_config"]["cudagraph_mode"] == "FULL_DECODE_ONLY"


@pytest.mark.vllm
def test_cpu_smoke_records_three_engines(tmp_path: Path) -> None:
    out = tmp_path / "lab.json"
    argv = ["--configs", "tiny-inproc-eager-fp32", "--cpu", "--prompts", "2", "--new-tokens", "8"]
    assert lab.main([*argv, "--out", str(out)]) == 0
    (run,) = json.loads(out.read_text())["runs"]
    assert "failed" not in run, run
    assert [e["k"] for e in run["engines"]] == [0, 3, 0]
    assert all(e["start_s"] > 0 and e["output_tokens_per_s"] > 0 for e in run["engines"])
    assert run["greedy_identical"] == "2/2"  # float32 on a CPU: exact
