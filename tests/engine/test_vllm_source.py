"""helpers.engine.vllm_source: every quoted function exists in the installed vLLM; taps from a worker."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from helpers.engine.vllm_source import (
    EAGLE3_PATH,
    excerpt,
    resolve,
    runs_model_runner_v2,
    worker_runner,
    worker_taps,
)

pytest.importorskip("vllm")


@pytest.mark.parametrize("ref", EAGLE3_PATH, ids=[r.qualname for r in EAGLE3_PATH])
def test_every_step_of_the_path_is_in_the_installed_vllm(ref) -> None:
    assert callable(resolve(ref))
    text = excerpt(ref)
    assert text.startswith("# vllm/") and ref.qualname in text.splitlines()[0]
    body = text.splitlines()[1:]
    assert body and all(any(w in line for line in body) for w in ref.keep), text


def test_the_quoted_default_is_the_documented_one() -> None:
    (default,) = [r for r in EAGLE3_PATH if "default" in r.qualname]
    assert "(2, num_layers // 2, num_layers - 3)" in excerpt(default)


def test_worker_taps_reads_the_model_or_its_inner_model() -> None:
    inner = SimpleNamespace(aux_hidden_state_layers=(2, 4, 5))
    worker = SimpleNamespace(
        model_runner=SimpleNamespace(get_model=lambda: SimpleNamespace(model=inner))
    )
    assert worker_taps(worker) == (2, 4, 5)
    bare = SimpleNamespace(model_runner=SimpleNamespace(get_model=lambda: SimpleNamespace()))
    assert worker_taps(bare) == ()


def test_the_runner_is_named_by_its_class() -> None:
    class GPUModelRunner:  # a stand-in with V1's name and module
        pass

    GPUModelRunner.__module__ = "vllm.v1.worker.gpu_model_runner"
    worker = SimpleNamespace(model_runner=GPUModelRunner())
    name = worker_runner(worker)
    assert name.endswith("GPUModelRunner") and not runs_model_runner_v2(name)
    assert runs_model_runner_v2("vllm.v1.worker.gpu.model_runner.GPUModelRunner")
