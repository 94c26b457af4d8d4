"""The GPU path, tested without a GPU: the self-hosted nbval workflow, the documented serve command, and preflight.

The workflow itself only runs on a self-hosted GPU runner; here it is parsed and its one job
checked. The preflight is run as `make test` runs it (a subprocess), offline and for tiny, and
its GPU/hub/pairing checks in-process with injected GPUs and a local stand-in pair.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from chapters.ch04_serving.server import _serve_command, serve_command_text
from helpers.common import paths, profiles
from helpers.common.envinfo import GpuInfo
from helpers.common.paths import DATA_DIR, REPO_ROOT
from helpers.common.profiles import Profile, load_profile
from helpers.engine import compat
from kit import manifest, preflight
from tests.support import run_module

WORKFLOW = REPO_ROOT / ".github" / "workflows" / "gpu-nbval.yml"
GPU_COMMAND = "make test PROFILE=qwen3-30b-a3b"
#: The command in the documents this workbook follows (vLLM / Red Hat AI), verbatim.
DOCUMENTED_COMMAND = """vllm serve Qwen/Qwen3-30B-A3B-Instruct-2507 -tp 1 --speculative-config '{"model": "RedHatAI/Qwen3-30B-A3B-Instruct-2507-speculator.eagle3", "num_speculative_tokens": 3, "method": "eagle3"}'"""
#: Seconds an offline preflight may take on a busy 2-core machine (it takes ~0.5 s idle).
OFFLINE_LIMIT = 20.0
H100 = GpuInfo(0, "NVIDIA H100 80GB HBM3", 79.1, (9, 0))


# --------------------------------------------------------------------------- the workflow


@pytest.fixture(scope="module")
def workflow() -> dict:
    """gpu-nbval.yml, parsed."""
    return yaml.safe_load(WORKFLOW.read_text())


def triggers(workflow: dict) -> dict:
    """The `on:` block (YAML 1.1 reads a bare `on` key as True)."""
    found = workflow.get("on", workflow.get(True))
    return (
        found
        if isinstance(found, dict)
        else {name: None for name in ([found] if isinstance(found, str) else found)}
    )


def the_job(workflow: dict) -> dict:
    """The job on the real pairing."""
    return workflow["jobs"]["nbval-qwen3-30b-a3b"]


def test_no_download_job_tests_the_gpu_path_without_a_token(workflow: dict) -> None:
    job = workflow["jobs"]["gpu-no-download"]
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    runs = [step["run"].strip() for step in job["steps"] if "run" in step]
    assert "make test" in runs and any("chapters.ch06_moe.tools.gpu_moe_lab" in r for r in runs), (
        runs
    )
    # The GPU path at the real shape, with random weights: still no download.
    assert "make test PROFILE=qwen3-30b-a3b-shape" in runs, runs
    assert "HF_TOKEN" not in str(job)
    assert workflow["jobs"]["nbval-qwen3-30b-a3b"]["needs"] == "gpu-no-download"


def test_workflow_parses_and_is_named(workflow: dict) -> None:
    assert isinstance(workflow, dict) and workflow["name"] == "gpu-nbval"


def test_runs_on_a_self_hosted_gpu_runner(workflow: dict) -> None:
    runs_on = the_job(workflow)["runs-on"]
    labels = [runs_on] if isinstance(runs_on, str) else list(runs_on)
    assert "self-hosted" in labels and "gpu" in labels, labels


def test_calls_exactly_make_test_on_the_real_pairing(workflow: dict) -> None:
    runs = [step["run"].strip() for step in the_job(workflow)["steps"] if "run" in step]
    assert runs.count(GPU_COMMAND) == 1, runs
    assert [r for r in runs if "make" in r.split()] == [GPU_COMMAND], (
        "no other make call may hide the result"
    )
    assert any(
        str(step.get("uses", "")).startswith("actions/checkout@")
        for step in the_job(workflow)["steps"]
    )


def test_timeout_token_and_triggers(workflow: dict) -> None:
    job = the_job(workflow)
    assert 0 < int(job["timeout-minutes"]) <= 360
    env = {**workflow.get("env", {}), **job.get("env", {})}
    assert env.get("HF_TOKEN", "").replace(" ", "") == "${{secrets.HF_TOKEN}}"
    on = triggers(workflow)
    assert "workflow_dispatch" in on and ("schedule" in on or "push" in on)
    assert not {"pull_request", "pull_request_target"} & set(on), (
        "no untrusted code on a self-hosted GPU runner"
    )
    if "push" in on:
        assert on["push"] and on["push"].get("branches") == ["main"]


# --------------------------------------------------------------------------- the serve command


def test_a_quirk_says_where_it_was_seen() -> None:
    for name in compat.QUIRKS:
        assert preflight._seen(name).startswith("with vLLM "), name
    assert preflight._seen("flashinfer") in preflight._FLASHINFER_WARNING


def test_serve_command_is_the_documented_one() -> None:
    ours = _serve_command(load_profile("qwen3-30b-a3b"))
    documented = shlex.split(" ".join(DOCUMENTED_COMMAND.split()))
    spec_at = documented.index("--speculative-config") + 1
    assert ours[:spec_at] == documented[:spec_at]
    assert json.loads(ours[spec_at]) == json.loads(documented[spec_at])
    assert len(ours) == len(documented)
    assert " ".join(serve_command_text(load_profile("qwen3-30b-a3b")).split()) == " ".join(
        DOCUMENTED_COMMAND.split()
    )


# --------------------------------------------------------------------------- preflight as make runs it


def run_preflight_cli(
    profile: str, tmp_path: Path, **env: str
) -> tuple[subprocess.CompletedProcess, float]:
    """`python -m kit.preflight --profile NAME` with an empty HF cache; (result, seconds)."""
    full_env = {
        k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_OFFLINE"))
    }
    full_env.update({"HF_HOME": str(tmp_path / "hf-home"), **env})
    return run_module("kit.preflight", ["--profile", profile], full_env)


@pytest.mark.parametrize("var", ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"])
def test_offline_preflight_stops_in_one_line(tmp_path: Path, var: str) -> None:
    done, seconds = run_preflight_cli("qwen3-30b-a3b", tmp_path, **{var: "1"})
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 2, done
    assert len(lines) == 1, lines
    assert "Hugging Face hub" in lines[0] and var in lines[0] and "Traceback" not in lines[0]
    assert seconds < OFFLINE_LIMIT, f"offline preflight took {seconds:.1f} s"


def test_tiny_preflight_passes(tmp_path: Path) -> None:
    missing = [
        name
        for name in ("tiny-qwen3-moe", "tiny-qwen3-moe-eagle3")
        if not (DATA_DIR / name / "config.json").is_file()
    ]
    assert not missing, f"data/ lacks {missing}: run `make tiny-models`"
    done, _ = run_preflight_cli("tiny", tmp_path, HF_HUB_OFFLINE="1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("preflight tiny: OK"), done.stdout
    assert "Traceback" not in done.stderr


def test_unknown_profile_is_one_line(tmp_path: Path) -> None:
    done, _ = run_preflight_cli("no-such-profile", tmp_path)
    assert done.returncode == 2 and (done.stdout + done.stderr).strip().count("\n") == 0
    assert "unknown profile 'no-such-profile'" in done.stderr


@pytest.mark.parametrize("target", ["test", "run"])
def test_make_runs_preflight_first(target: str) -> None:
    done = subprocess.run(
        ["make", "-n", target, "PROFILE=qwen3-30b-a3b"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = done.stdout.splitlines()
    pre = [
        i for i, line in enumerate(lines) if "-m kit.preflight --profile 'qwen3-30b-a3b'" in line
    ]
    main = [i for i, line in enumerate(lines) if "-m pytest" in line or "-m kit.runner" in line]
    assert pre and main and pre[0] < main[0], lines


# --------------------------------------------------------------------------- preflight checks in-process


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection attempt fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("preflight tried the network while offline")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(preflight, "hub_reachable", refuse)


def test_offline_hub_check_makes_no_network_attempt(
    monkeypatch: pytest.MonkeyPatch, no_network: None
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(preflight, "cached_model_complete", lambda repo: False)
    result = preflight.run_preflight("qwen3-30b-a3b")
    assert result.exit_code == 2 and len(result.lines()) == 1
    assert "Hugging Face hub is off" in result.failures[0]


def test_offline_with_cached_models_continues(
    monkeypatch: pytest.MonkeyPatch, no_network: None
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(preflight, "cached_model_complete", lambda repo: True)
    failure, note = preflight._check_hub(load_profile("qwen3-30b-a3b"))
    assert failure is None and "local cache" in note


def fake_cache(root: Path, repo: str, files: dict[str, str]) -> Path:
    """A Hugging Face hub cache holding `files` (name -> text) of `repo` at one snapshot."""
    repo_dir = root / f"models--{repo.replace('/', '--')}"
    commit = "0" * 40
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text(commit)
    for name, text in files.items():
        path = repo_dir / "snapshots" / commit / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_cached_model_complete_reads_the_cache_only(tmp_path: Path, no_network: None) -> None:
    index = json.dumps(
        {
            "weight_map": {
                "a": "model-00001-of-00002.safetensors",
                "b": "model-00002-of-00002.safetensors",
            }
        }
    )
    sharded = {
        "config.json": "{}",
        "model.safetensors.index.json": index,
        "model-00001-of-00002.safetensors": "x",
    }
    repo = "Org/Model"
    assert not preflight.cached_model_complete(repo, cache_dir=tmp_path)
    assert not preflight.cached_model_complete(
        repo, cache_dir=fake_cache(tmp_path / "partial", repo, sharded)
    )
    full = {**sharded, "model-00002-of-00002.safetensors": "y"}
    assert preflight.cached_model_complete(
        repo, cache_dir=fake_cache(tmp_path / "full", repo, full)
    )
    single = {"config.json": "{}", "model.safetensors": "z"}
    assert preflight.cached_model_complete(
        repo, cache_dir=fake_cache(tmp_path / "single", repo, single)
    )
    assert not preflight.cached_model_complete(
        repo, cache_dir=fake_cache(tmp_path / "cfg", repo, {"config.json": "{}"})
    )


def test_unreachable_hub_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(preflight, "hub_reachable", lambda timeout: False)
    monkeypatch.setattr(preflight, "cached_model_complete", lambda repo: False)
    result = preflight.run_preflight("qwen3-235b-a22b", gpus=[H100] * 4)
    assert result.exit_code == 2 and result.failures == [result.failures[0]]
    assert "huggingface.co" in result.failures[0] and "unreachable" in result.failures[0]


@pytest.mark.parametrize(
    ("gpus", "fragment"),
    [
        ("torch 2.13.0+cpu is a CPU build: ...", "this machine has none"),
        ([], "this machine has 0"),
        ([GpuInfo(0, "NVIDIA L40S", 44.4, (8, 9))], "has 44.4 GiB"),
    ],
)
def test_gpu_shortfalls_are_one_line_each(gpus: list[GpuInfo] | str, fragment: str) -> None:
    failures, _ = preflight._check_gpus(load_profile("qwen3-30b-a3b"), gpus)
    assert (
        len(failures) == 1
        and fragment in failures[0]
        and failures[0].startswith("GPU: qwen3-30b-a3b needs 1 CUDA GPU")
    )


def test_gpu_requirements_met_on_80gb_cards(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight, "_flashinfer_installed", lambda: True)
    assert preflight._check_gpus(load_profile("qwen3-30b-a3b"), [H100]) == ([], [])
    assert preflight._check_gpus(load_profile("qwen3-235b-a22b"), [H100] * 4) == ([], [])
    failures, _ = preflight._check_gpus(load_profile("qwen3-235b-a22b"), [H100] * 2)
    assert failures and "needs 4 CUDA GPUs" in failures[0] and "this machine has 2" in failures[0]


def test_gpu_warnings_fp8_capability_and_flashinfer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight, "_flashinfer_installed", lambda: False)
    a100 = [GpuInfo(i, "NVIDIA A100-SXM4-80GB", 79.3, (8, 0)) for i in range(4)]
    failures, warnings = preflight._check_gpus(load_profile("qwen3-235b-a22b"), a100)
    assert failures == []
    assert any("compute capability >= 8.9" in w for w in warnings)
    assert any("flashinfer" in w for w in warnings)


def fake_hub(monkeypatch: pytest.MonkeyPatch, tiny_pair, **fields) -> Profile:
    """The stand-in pair as a hub profile on one 75 GiB GPU, with the hub reachable."""
    monkeypatch.setattr(preflight, "_check_hub", lambda profile, timeout: (None, "hub reachable"))
    monkeypatch.setattr(preflight, "_flashinfer_installed", lambda: True)
    return Profile(
        name="fake-hub",
        description="",
        verifier=str(tiny_pair.verifier),
        drafter=str(tiny_pair.drafter),
        num_speculative_tokens=3,
        needs={"hub": True, "gpus": 1, "gpu_memory_gib": 75},
        verifier_layers=8,
        **fields,
    )


def test_hub_profile_preflight_end_to_end_on_a_local_pair(
    monkeypatch: pytest.MonkeyPatch, tiny_pair
) -> None:
    """The whole hub path (hub -> GPUs -> pairing) on the stand-in pair, as if served from the hub."""
    profile = fake_hub(
        monkeypatch, tiny_pair, engine={"max_model_len": 1024}, verifier_hidden_size=128
    )
    ok = preflight.run_preflight(profile, gpus=[H100])
    assert ok.exit_code == 0, ok.lines()
    assert ok.lines()[0].startswith(
        "preflight fake-hub: OK (data intact; hub reachable; 1 GPU with >= 75 GiB; pairing valid; "
        "build/ writable"
    )
    wrong_shape = dataclasses.replace(profile, verifier_layers=48)
    bad = preflight.run_preflight(wrong_shape, gpus=[])
    assert bad.exit_code == 2
    assert [line.split(":")[0] for line in bad.failures] == ["GPU", "profile"], bad.failures
    config = tiny_pair.drafter / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "target_hidden_size": 64}))
    broken = preflight.run_preflight(profile, gpus=[H100])
    assert broken.exit_code == 2 and any(
        "target_hidden_size_mismatch" in f for f in broken.failures
    )


def test_tiny_without_models_points_to_make_tiny_models(tmp_path: Path) -> None:
    profile = Profile(
        name="tiny-missing",
        description="",
        verifier=str(tmp_path / "v"),
        drafter=str(tmp_path / "d"),
        num_speculative_tokens=3,
        needs={"hub": False},
    )
    result = preflight.run_preflight(profile, gpus=[])
    assert (
        result.exit_code == 2
        and len(result.lines()) == 1
        and "make tiny-models" in result.failures[0]
    )


def test_tiny_on_a_gpu_passes_without_warnings(monkeypatch: pytest.MonkeyPatch, tiny_pair) -> None:
    monkeypatch.setattr(preflight, "_flashinfer_installed", lambda: True)
    profile = Profile(
        name="tiny-copy",
        description="",
        verifier=str(tiny_pair.verifier),
        drafter=str(tiny_pair.drafter),
        num_speculative_tokens=3,
        engine={"max_model_len": 1024},
        needs={"hub": False},
    )
    on_gpu = preflight.run_preflight(profile, gpus=[H100])
    assert on_gpu.exit_code == 0 and on_gpu.warnings == [] and "GPU" in on_gpu.lines()[0]
    on_cpu = preflight.run_preflight(profile, gpus="torch is a CPU build")
    assert on_cpu.exit_code == 0 and on_cpu.warnings == [] and len(on_cpu.lines()) == 1


@pytest.mark.usefixtures("qwen3_built")
def test_shape_profile_preflight_needs_a_gpu_and_qwens_tokenizer_not_weights(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(preflight, "_flashinfer_installed", lambda: True)
    shape = load_profile("qwen3-30b-a3b-shape")
    assert preflight._check_local_files(shape) is None, "config.json is all a shape needs"
    on_cpu = preflight.run_preflight(shape, gpus="no nvidia-smi on PATH")
    assert len(on_cpu.failures) == 1 and "needs 1 CUDA GPU" in on_cpu.failures[0]
    on_h100 = preflight.run_preflight(shape, gpus=[H100])
    assert on_h100.ok, on_h100.failures
    assert "Qwen3 tokenizer verified" in on_h100.passed


@pytest.mark.parametrize(
    ("gpus", "have"),
    [
        ("no nvidia-smi on PATH (no NVIDIA driver): running on the CPU", "has none"),
        ([GpuInfo(0, "NVIDIA H200", 139.8, (9, 0))], "has 1 (NVIDIA H200 140 GiB)"),
    ],
)
def test_235b_shape_is_refused_in_one_line_below_four_gpus(
    gpus: list[GpuInfo] | str, have: str
) -> None:
    """On a CPU or one GPU the 4-GPU shape stops at its first check, before anything is read."""
    result = preflight.run_preflight("qwen3-235b-a22b-shape", gpus=gpus)
    lines = result.lines()
    assert result.exit_code == 2 and len(lines) == 1, lines
    assert "qwen3-235b-a22b-shape needs 4 CUDA GPUs" in lines[0]
    assert f"this machine {have}" in lines[0] and "\n" not in lines[0]
    assert ("PROFILE=tiny" if isinstance(gpus, str) else "qwen3-30b-a3b-shape") in lines[0]


@pytest.mark.usefixtures("qwen3_built")
def test_235b_shape_passes_on_four_h200s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight, "_flashinfer_installed", lambda: True)
    h200s = [GpuInfo(i, "NVIDIA H200", 139.8, (9, 0)) for i in range(4)]
    result = preflight.run_preflight("qwen3-235b-a22b-shape", gpus=h200s)
    assert result.ok and result.warnings == [], result.lines()
    assert result.passed[:-1] == [
        "data intact",
        "models present",
        "Qwen3 tokenizer verified",
        "pairing valid",
        "4 GPUs with >= 128 GiB",
    ]
    assert result.passed[-1].startswith("build/ writable"), result.passed
    small = [GpuInfo(i, "NVIDIA H100 80GB HBM3", 79.1, (9, 0)) for i in range(4)]
    short = preflight.run_preflight("qwen3-235b-a22b-shape", gpus=small)
    assert (
        len(short.lines()) == 1
        and "GPU 0 (NVIDIA H100 80GB HBM3) has 79.1 GiB" in short.failures[0]
    )


def test_shape_profile_without_its_tokenizer_fails_in_one_line() -> None:
    shape = dataclasses.replace(load_profile("qwen3-30b-a3b-shape"), tokenizer="build/nowhere")
    result = preflight.run_preflight(shape, gpus=[H100])
    assert not result.ok and len(result.failures) == 1
    assert "build/nowhere is not built: `make venv` builds it" in result.failures[0]
    assert preflight._check_tokenizer(load_profile("tiny")) is None


@pytest.mark.parametrize(
    ("config", "code"),
    [('{"hidden_size": ', "config_unreadable"), ("[1, 2]", "config_not_object")],
)
def test_a_corrupt_verifier_config_is_a_pairing_line_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
    tiny_pair,
    config: str,
    code: str,
) -> None:
    (tiny_pair.verifier / "config.json").write_text(config)
    profile = fake_hub(monkeypatch, tiny_pair)
    result = preflight.run_preflight(profile, gpus=[H100])
    assert result.exit_code == 2 and not any("crashed" in f for f in result.failures)
    assert [f.split(":")[:2] for f in result.failures] == [["pairing", f" {code}"]]
    assert str(tiny_pair.verifier / "config.json") in result.failures[0]


# --------------------------------------------------------------------------- data/ by content, build/


@pytest.fixture
def data_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of data/ that preflight checks instead of the repo's (paths, fixes and the profiles
    point into it)."""
    root = tmp_path / "repo"
    shutil.copytree(DATA_DIR, root / "data")
    for module in (paths, preflight, profiles):
        monkeypatch.setattr(module, "DATA_DIR", root / "data")
    for module in (paths, preflight):
        monkeypatch.setattr(module, "REPO_ROOT", root)
    monkeypatch.setattr(profiles, "_PROFILES_DIR", root / "data" / "profiles")
    return root / "data"


def flip_byte(path: Path, at: int) -> None:
    """Change one bit of the byte at `at` (negative: from the end)."""
    blob = bytearray(path.read_bytes())
    blob[at] ^= 0x01
    path.write_bytes(bytes(blob))


def test_a_changed_byte_in_a_template_and_in_weights_is_named_with_its_fix(
    data_copy: Path,
) -> None:
    template = "data/tiny-qwen3-moe/chat_template.jinja"
    weights = "data/tiny-qwen3-moe-eagle3/model.safetensors"
    flip_byte(data_copy.parent / template, len((data_copy.parent / template).read_bytes()) // 2)
    flip_byte(data_copy.parent / weights, -1)  # the last weight: the header still adds up
    result = preflight.run_preflight("tiny", gpus=[])
    assert result.exit_code == 2 and len(result.failures) == 2, result.failures
    for relative, line in zip((template, weights), result.failures):
        assert line.startswith(relative) and f"`git checkout -- {relative}`" in line, line
    assert result.passed == [], "nothing runs on damaged data"


def test_a_missing_and_an_added_file_are_named(data_copy: Path) -> None:
    (data_copy / "published" / "drafting-methods.json").unlink()
    (data_copy / "notes.txt").write_text("mine")
    result = preflight.run_preflight("tiny", gpus=[])
    assert result.exit_code == 2 and len(result.failures) == 2, result.failures
    added, missing = sorted(result.failures, key=lambda line: "missing" in line)
    assert missing.startswith("data/published/drafting-methods.json is missing"), missing
    assert "`git checkout -- data/published/drafting-methods.json`" in missing
    assert added.startswith("data/notes.txt is not in data/MANIFEST.sha256"), added


def test_damaged_weights_are_one_line_when_the_profile_names_them_relatively(
    data_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(data_copy.parent)  # tiny's "data/tiny-qwen3-moe" is now the copy
    relative = "data/tiny-qwen3-moe/model.safetensors"
    (data_copy.parent / relative).write_bytes((data_copy.parent / relative).read_bytes()[:100])
    lines = preflight.run_preflight("tiny", gpus=[]).lines()
    assert len(lines) == 1 and relative in lines[0] and "git checkout" in lines[0], lines


def test_a_bad_profile_is_named_and_blocks_only_itself(data_copy: Path) -> None:
    """Another profile damaged failed `make preflight` and `make run` for tiny too."""
    (data_copy / "profiles" / "qwen3-30b-a3b.json").write_text('{"name": ')
    schema = data_copy / "profiles" / "qwen3-235b-a22b.json"
    schema.write_text(schema.read_text().replace('"needs"', '"gpu"'))
    result = preflight.run_preflight("tiny", gpus=[])
    assert result.exit_code == 0 and result.failures == [], result.lines()
    assert len(result.warnings) == 2, result.warnings
    not_json, bad_schema = sorted(result.warnings, key=lambda line: "235b" in line)
    assert not_json.startswith("data/profiles/qwen3-30b-a3b.json is not valid JSON"), not_json
    assert bad_schema.startswith("data/profiles/qwen3-235b-a22b.json: unknown field"), bad_schema
    for line, name in ((not_json, "qwen3-30b-a3b"), (bad_schema, "qwen3-235b-a22b")):
        assert f"`git checkout -- data/profiles/{name}.json`" in line, line
        assert line.endswith(f"(it blocks PROFILE={name} only)"), line
    assert {"data intact for tiny", "models present", "pairing valid"} <= set(result.passed)
    shape = preflight.run_preflight("qwen3-30b-a3b-shape", gpus=[])  # lists the profiles for 0
    gpu = [line for line in shape.failures if line.startswith("GPU:")]
    assert gpu and "tiny" in gpu[0] and not any("crashed" in f for f in shape.failures), shape
    broken = preflight.run_preflight("qwen3-30b-a3b", gpus=[])
    assert broken.exit_code == 2 and broken.failures[0].startswith(
        "data/profiles/qwen3-30b-a3b.json is not valid JSON"
    ), broken.failures


def tiny_as(name: str, **fields: object) -> str:
    """The tiny profile's JSON under another name, as a user adds one (cp tiny.json mypair.json)."""
    raw = json.loads((DATA_DIR / "profiles" / "tiny.json").read_text())
    return json.dumps({**raw, "name": name, **fields}, indent=2)


def test_a_profile_added_the_documented_way_warns_and_runs(data_copy: Path) -> None:
    """data/profiles/mypair.json, one JSON file as the README says, failed `make preflight` for
    tiny and for itself ("not in data/MANIFEST.sha256"), with a fix that re-blessed all of data/."""
    (data_copy / "profiles" / "mypair.json").write_text(tiny_as("mypair"))
    for name in ("tiny", "mypair"):
        result = preflight.run_preflight(name, gpus=[])
        assert result.exit_code == 0, result.lines()
        assert {f"data intact for {name}", "pairing valid"} <= set(result.passed), result.passed
        (line,) = result.warnings
        assert line.startswith("data/profiles/mypair.json is a profile you added"), line
        assert "`make manifest FILE=data/profiles/mypair.json`" in line, line
    assert manifest._main_record("data/profiles/mypair.json", data_copy) == 0
    recorded = preflight.run_preflight("mypair", gpus=[])
    assert recorded.exit_code == 0 and recorded.warnings == [], recorded.lines()
    assert "data intact" in recorded.passed


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"name": ', "is not valid JSON"),
        (tiny_as("mypair", num_speculative_tokens=1_000_000), "num_speculative_tokens is 1000000"),
        ("\ufeff" + tiny_as("mypair"), "byte-order mark (BOM)"),
    ],
    ids=["not-json", "k", "bom"],
)
def test_a_bad_added_profile_blocks_only_itself_with_a_fix_that_works(
    data_copy: Path, text: str, says: str
) -> None:
    """Its fix was `git checkout -- data/profiles/mypair.json`, which fails: git has no such
    file."""
    (data_copy / "profiles" / "mypair.json").write_text(text, encoding="utf-8")
    tiny = preflight.run_preflight("tiny", gpus=[])
    assert tiny.exit_code == 0 and len(tiny.warnings) == 1, tiny.lines()
    own = preflight.run_preflight("mypair", gpus=[])
    assert own.exit_code == 2 and len(own.lines()) == 1, own.lines()
    for line in (tiny.warnings[0], own.failures[0]):
        assert line.startswith("data/profiles/mypair.json") and says in line, line
        assert "git checkout" not in line and "fix or remove it (you added it" in line, line


def test_symbolic_links_in_data_are_refused_one_line_each(data_copy: Path) -> None:
    """A self-loop and a directory cycle passed as "data intact"; a .json pair loop was "shipped
    files check crashed: RuntimeError: Symlink loop from '/abs/path'"."""
    (data_copy / "self").symlink_to("self")
    (data_copy / "prompts" / "up").symlink_to("..")
    (data_copy / "published" / "a.json").symlink_to("b.json")
    (data_copy / "published" / "b.json").symlink_to("a.json")
    result = preflight.run_preflight("tiny", gpus=[])
    assert result.exit_code == 2 and len(result.failures) == 4, result.failures
    shown = sorted(line.split(" ")[0] for line in result.failures)
    assert shown == [
        "data/prompts/up",
        "data/published/a.json",
        "data/published/b.json",
        "data/self",
    ]
    for line in result.failures:
        assert " is a symbolic link (to " in line and "crashed" not in line, line
        assert str(data_copy) not in line, line


def test_the_chosen_profile_damaged_stops_in_one_line(data_copy: Path) -> None:
    (data_copy / "profiles" / "tiny.json").write_text("[")
    lines = preflight.run_preflight("tiny", gpus=[]).lines()
    assert len(lines) == 1 and "data/profiles/tiny.json is not valid JSON" in lines[0], lines


def test_build_dir_is_made_when_missing_and_needs_room(tmp_path: Path) -> None:
    build = tmp_path / "fresh" / "build"
    failures, note = preflight._check_build_dir(build)
    assert failures == [] and build.is_dir() and note and "writable" in note
    free_gib = shutil.disk_usage(build).free / 1024**3
    failures, note = preflight._check_build_dir(build, min_free_gib=free_gib + 1000)
    assert note is None and len(failures) == 1, failures
    assert "GiB free, a run needs >= " in failures[0] and "make clean" in failures[0]


def test_a_read_only_build_dir_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    if os.geteuid() == 0:  # root writes through chmod: the kernel's answer, simulated
        real_open, real_mkdir = os.open, os.mkdir

        def refuse(real):
            def call(path, *args, **kwargs):
                if str(path).startswith(str(locked)):
                    raise PermissionError(13, "Permission denied", str(path))
                return real(path, *args, **kwargs)

            return call

        monkeypatch.setattr(os, "open", refuse(real_open))
        monkeypatch.setattr(os, "mkdir", refuse(real_mkdir))
    try:
        for build in (locked, locked / "build"):
            failures, note = preflight._check_build_dir(build)
            assert note is None and len(failures) == 1, failures
            assert failures[0].startswith(f"{build}/ is not writable (Permission denied)")
    finally:
        locked.chmod(0o755)


def test_a_build_dir_that_is_a_file_fails_and_the_rest_still_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "build"
    blocker.write_text("not a folder")
    monkeypatch.setattr(preflight, "BUILD_DIR", blocker)
    result = preflight.run_preflight("tiny", gpus=[])
    assert result.exit_code == 2 and len(result.failures) == 1, result.failures
    assert result.failures[0].startswith(f"{blocker}/ is not writable"), result.failures
    assert {"data intact", "pairing valid"} <= set(result.passed), result.passed


def test_a_profile_on_a_shuffled_tokenizer_fails_alone(data_copy: Path) -> None:
    """Its pairing was "valid" and vLLM generated garbage (1 of 15 drafts accepted)."""
    import random

    mine = data_copy / "mine-qwen3-moe"
    shutil.copytree(data_copy / "tiny-qwen3-moe", mine)
    tokenizer = json.loads((mine / "tokenizer.json").read_text())
    ids = sorted(tokenizer["model"]["vocab"].values())
    order = ids[:]
    random.Random(0).shuffle(order)
    moved = dict(zip(ids, order))
    tokenizer["model"]["vocab"] = {k: moved[v] for k, v in tokenizer["model"]["vocab"].items()}
    for token in tokenizer["added_tokens"]:
        token["id"] = moved[token["id"]]
    (mine / "tokenizer.json").write_text(json.dumps(tokenizer))
    (data_copy / "profiles" / "mypair.json").write_text(
        tiny_as("mypair", verifier=str(mine), drafter=str(data_copy / "tiny-qwen3-moe-eagle3"))
    )
    for path in sorted(mine.iterdir()):
        assert manifest._main_record(str(path), data_copy) == 0
    assert manifest._main_record("data/profiles/mypair.json", data_copy) == 0
    own = preflight.run_preflight("mypair", gpus=[])
    assert own.exit_code == 2 and len(own.failures) == 1, own.lines()
    assert own.failures[0].startswith("pairing: special_token_mismatch: config.json's eos_token_id")
    assert preflight.run_preflight("tiny", gpus=[]).exit_code == 0


@pytest.mark.parametrize("where", ["repo", "venv"])
def test_a_path_with_a_space_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Preflight passed in a clone at "/home/a b/…"; notebooks 02 and 07 then failed with torch
    inductor's CppCompileError (g++ and the libgomp LD_PRELOAD split at the space)."""
    spaced = tmp_path / "a b"
    if where == "repo":
        monkeypatch.setattr(preflight, "REPO_ROOT", spaced / "eagle3-workbook")
    else:
        monkeypatch.setattr(sys, "prefix", str(spaced / "venv"))
    lines = preflight.run_preflight("tiny", gpus=[]).lines()
    assert len(lines) == 1 and "a path with a space" in lines[0], lines
    assert str(spaced) in lines[0] and "CppCompileError" in lines[0], lines


def test_damaged_weights_outside_data_keep_their_own_fix(tiny_pair) -> None:
    weights = tiny_pair.drafter / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    profile = Profile(
        name="tiny-copy",
        description="",
        verifier=str(tiny_pair.verifier),
        drafter=str(tiny_pair.drafter),
        num_speculative_tokens=3,
        needs={"hub": False},
    )
    (line,) = preflight.run_preflight(profile, gpus=[]).failures
    assert str(weights) in line and line.endswith("download or export it again"), line
