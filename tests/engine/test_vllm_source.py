"""helpers.engine.vllm_source: every quoted function exists in the installed vLLM; taps from a worker."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from helpers.common.configs import read_config
from helpers.common.profiles import load_profile
from helpers.engine import compat
from helpers.engine.vllm_source import (
    EAGLE3_PATH,
    eagle3_path_markdown,
    eagle3_support,
    excerpt,
    hook_refs,
    model_class,
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


def test_the_tiny_verifiers_class_implements_eagle3_with_its_hooks() -> None:
    architecture = read_config(load_profile("tiny").verifier_path())["architectures"][0]
    support = eagle3_support(architecture)
    assert support.model_class.__name__ == architecture and support.implements
    names = [ref.qualname.rsplit(".", 1)[1] for ref in support.hooks]
    assert names[0] == "set_aux_hidden_state_layers" and len(names) >= 2
    assert set(names) <= set(compat.EAGLE3_HOOKS)
    assert support.explanation.startswith(f"{architecture}: {support.model_class.__module__}.")
    text = eagle3_path_markdown(support.sources())
    assert "SupportsEagle3" in text and "(2, num_layers // 2, num_layers - 3)" in text


def test_hooks_are_found_on_the_class_or_a_base() -> None:
    class Base:
        def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
            """On a base, as vLLM's SupportsEagle3 has it."""

    class Model(Base):
        def get_eagle3_aux_hidden_state_layers(self) -> tuple[int, ...]:
            """On the class, as PR #26485 wrote it."""
            return (2, 4, 5)

    refs = hook_refs(Model)
    assert [r.qualname.split(".")[-2:] for r in refs] == [
        ["Base", "set_aux_hidden_state_layers"],
        ["Model", "get_eagle3_aux_hidden_state_layers"],
    ]
    assert hook_refs(object) == ()


def test_a_class_without_eagle3_and_an_unknown_architecture() -> None:
    assert not eagle3_support("GPT2LMHeadModel").implements
    with pytest.raises(ValueError, match="no architecture 'NoSuchForCausalLM'"):
        model_class("NoSuchForCausalLM")


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
