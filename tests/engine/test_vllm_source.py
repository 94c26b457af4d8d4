"""helpers.engine.vllm_source: the registry's class for every profile's verifier architecture; the
default taps agree with vLLM's; taps and the runner from a worker."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest

from helpers.common import profiles
from helpers.eagle3.taps import default_aux_layers
from helpers.engine.vllm_source import (
    _worker_runner,
    _worker_taps,
    model_class,
    runs_model_runner_v2,
)

pytest.importorskip("vllm")

#: Every verifier architecture the shipped profiles name.
ARCHITECTURES = sorted(
    {profiles.load_profile(n).verifier_architecture for n in profiles._available_profiles()}
)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_the_registry_names_a_vllm_class_after_the_architecture(arch: str) -> None:
    module_name, class_name = model_class(arch)
    assert module_name.startswith("vllm.") and class_name == arch


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_the_workbooks_default_taps_are_the_installed_vllms(arch: str) -> None:
    """taps.default_aux_layers (no vLLM import) against the class's own method, run on a stand-in."""
    module_name, class_name = model_class(arch)
    causal_lm = getattr(importlib.import_module(module_name), class_name)
    for layers in (8, 48, 94):
        stand_in = SimpleNamespace(model=SimpleNamespace(layers=[None] * layers))
        vllm_default = causal_lm.get_eagle3_default_aux_hidden_state_layers(stand_in)
        assert tuple(vllm_default) == default_aux_layers(layers)


def test_an_unknown_architecture_fails_in_one_line() -> None:
    with pytest.raises(ValueError, match="no model class for architecture 'NopeForCausalLM'") as e:
        model_class("NopeForCausalLM")
    assert "\n" not in str(e.value)


def test_worker_taps_reads_the_model_or_its_inner_model() -> None:
    inner = SimpleNamespace(aux_hidden_state_layers=(2, 4, 5))
    worker = SimpleNamespace(
        model_runner=SimpleNamespace(get_model=lambda: SimpleNamespace(model=inner))
    )
    assert _worker_taps(worker) == (2, 4, 5)
    bare = SimpleNamespace(model_runner=SimpleNamespace(get_model=lambda: SimpleNamespace()))
    assert _worker_taps(bare) == ()


def test_the_runner_is_named_by_its_class() -> None:
    class GPUModelRunner:  # a stand-in with V1's name and module
        pass

    GPUModelRunner.__module__ = "vllm.v1.worker.gpu_model_runner"
    worker = SimpleNamespace(model_runner=GPUModelRunner())
    name = _worker_runner(worker)
    assert name.endswith("GPUModelRunner") and not runs_model_runner_v2(name)
    assert runs_model_runner_v2("vllm.v1.worker.gpu.model_runner.GPUModelRunner")
