"""chapters.ch02_engine.vllm_path: every quoted function exists in the installed vLLM, for every
profile's verifier architecture; hooks found where vLLM defines them; taps asked of the workers."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from chapters.ch02_engine.vllm_path import (
    _EAGLE3_HOOKS,
    V2_CONCAT,
    _excerpt,
    _hook_refs,
    _load_model_class,
    _resolve,
    _tapping_model,
    eagle3_path,
    eagle3_path_markdown,
    eagle3_support,
    engine_taps,
)
from helpers.common import profiles
from helpers.common.configs import read_config

pytest.importorskip("vllm")

#: Every verifier architecture the shipped profiles name.
ARCHITECTURES = sorted(
    {profiles.load_profile(n).verifier_architecture for n in profiles._available_profiles()}
)
PATHS = [(arch, ref) for arch in ARCHITECTURES for ref in eagle3_path(arch)]


@pytest.mark.parametrize(("arch", "ref"), PATHS, ids=[f"{a}:{r.qualname}" for a, r in PATHS])
def test_every_step_of_the_path_is_in_the_installed_vllm(arch: str, ref) -> None:
    assert callable(_resolve(ref))
    text = _excerpt(ref)
    header = text.splitlines()[0]
    assert text.startswith("# vllm/") and ref.qualname.rsplit(".", 1)[1] in header, header
    body = text.splitlines()[1:]
    assert body and all(any(w in line for line in body) for w in ref.keep), text


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_the_path_starts_in_the_registrys_model(arch: str) -> None:
    causal_lm, inner = _load_model_class(arch), _tapping_model(arch)
    first, *_ = eagle3_path(arch)
    assert first.module == inner.__module__ and first.qualname == f"{inner.__qualname__}.forward"
    default = [r for r in eagle3_path(arch) if "default" in r.qualname]
    assert [r.qualname.split(".")[0] for r in default] == [causal_lm.__qualname__]
    assert "(2, num_layers // 2, num_layers - 3)" in _excerpt(default[0])


def test_a_model_without_taps_fails_in_one_line() -> None:
    with pytest.raises(ValueError, match="GPT2LMHeadModel cannot feed an EAGLE-3 drafter") as e:
        _tapping_model("GPT2LMHeadModel")
    assert "\n" not in str(e.value)


def test_the_markdown_numbers_the_steps() -> None:
    refs = eagle3_path(ARCHITECTURES[0])
    text = eagle3_path_markdown(refs)
    assert all(f"**{i}. {ref.title}**" in text for i, ref in enumerate(refs, start=1))


def test_a_new_profile_brings_its_own_code_path(added_profile: str) -> None:
    """A profile JSON naming another architecture quotes that architecture's model: no code edit."""
    profile = profiles.load_profile(added_profile)
    path = eagle3_path(profile.verifier_architecture)
    inner = _tapping_model(profile.verifier_architecture)
    assert inner.__name__ == "Qwen3NextModel" and path[0].module.endswith(".qwen3_next")
    assert "aux_hidden_states" in _excerpt(path[0])


def test_the_tiny_verifiers_class_implements_eagle3_with_its_hooks() -> None:
    architecture = read_config(profiles.load_profile("tiny").verifier_path())["architectures"][0]
    support = eagle3_support(architecture)
    assert support.model_class.__name__ == architecture and support.implements
    names = [ref.qualname.rsplit(".", 1)[1] for ref in support.hooks]
    assert names[0] == "set_aux_hidden_state_layers" and len(names) >= 2
    assert set(names) <= set(_EAGLE3_HOOKS)
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

    refs = _hook_refs(Model)
    assert [r.qualname.split(".")[-2:] for r in refs] == [
        ["Base", "set_aux_hidden_state_layers"],
        ["Model", "get_eagle3_aux_hidden_state_layers"],
    ]
    assert _hook_refs(object) == ()


def test_a_class_without_eagle3() -> None:
    assert not eagle3_support("GPT2LMHeadModel").implements


def test_the_v2_runners_concat_is_quoted_from_its_own_file() -> None:
    text = _excerpt(V2_CONCAT)
    assert text.startswith("# vllm/v1/worker/gpu/spec_decode/autoregressive/speculator.py")
    assert "combine_hidden_states(" in text and "torch.cat(aux_hidden_states" in text


def test_engine_taps_asks_each_worker() -> None:
    calls = []

    def collective_rpc(method: str) -> list[list[int]]:
        calls.append(method)
        return [[2, 4, 5], [2, 4, 5]]

    assert engine_taps(SimpleNamespace(collective_rpc=collective_rpc)) == [(2, 4, 5)] * 2
    assert calls == ["workbook_taps"]
