"""Pairing checks at the config boundary: every key the checks read, replaced by a value of the
wrong type, is one named error and never an exception; the fault probe's cases one by one."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

import huggingface_hub
import pytest
import torch
from safetensors.torch import load_file, save_file

from helpers.common import configs
from helpers.engine import pairing
from helpers.engine.pairing import (
    _DRAFTER_LAYER_SCHEMA,
    _DRAFTER_TOP_SCHEMA,
    _verifier_schema,
    validate_pair,
)
from tests.conftest import DRAFTER_CONFIG, DRAFTER_NAME, VERIFIER_NAME, TinyPair
from tests.support import WRONG_VALUES, accepted


def put(config: dict, path: str, value: Any) -> dict:
    """Set a dotted key path (`a.b[0].c`) in `config`, making the objects on the way."""
    *parents, last = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    node: Any = config
    for step in parents:
        node = node[int(step[1:-1])] if step.startswith("[") else node.setdefault(step, {})
    if last.startswith("["):
        node[int(last[1:-1])] = value
    else:
        node[last] = value
    return config


def flat_config() -> dict:
    """The tiny drafter in the non-speculators layout: the layer's keys at the top level."""
    return {
        **DRAFTER_CONFIG["transformer_layer_config"],
        "architectures": ["LlamaForCausalLMEagle3"],
        "draft_vocab_size": DRAFTER_CONFIG["draft_vocab_size"],
        "target_hidden_size": DRAFTER_CONFIG["target_hidden_size"],
        "eagle_aux_hidden_state_layer_ids": DRAFTER_CONFIG["eagle_aux_hidden_state_layer_ids"],
    }


def cases(schema: dict[str, str], layout: str) -> list[Any]:
    """(layout, key, value) for every key of `schema` and every wrong value it does not take."""
    return [
        pytest.param(layout, path, value, id=f"{layout}:{path}={name}")
        for path, kind in schema.items()
        for name, value in WRONG_VALUES.items()
        if not accepted(kind, value)
    ]


DRAFTER_CASES = cases(_DRAFTER_TOP_SCHEMA, "speculators")
DRAFTER_CASES += cases(
    {f"transformer_layer_config.{k}": kind for k, kind in _DRAFTER_LAYER_SCHEMA.items()},
    "speculators",
)
DRAFTER_CASES += cases(_DRAFTER_LAYER_SCHEMA, "flat")
#: Every verifier key at the top level, where the tiny verifier holds them.
VERIFIER_CASES = cases(
    _verifier_schema({k.split(".")[0]: 1 for k in pairing._VERIFIER_MODEL_SCHEMA}), "verifier"
)
NULLABLE = [
    pytest.param(path, id=path)
    for path, kind in {
        **_DRAFTER_TOP_SCHEMA,
        **{f"transformer_layer_config.{k}": v for k, v in _DRAFTER_LAYER_SCHEMA.items()},
    }.items()
    if kind.endswith(" or null")
]


@pytest.fixture
def light_pair(tmp_path: Path, _tiny_pair_source: TinyPair) -> TinyPair:
    """The tiny pair's configs (copied, editable) with the drafter's weights linked, not copied."""
    verifier, drafter = tmp_path / VERIFIER_NAME, tmp_path / DRAFTER_NAME
    verifier.mkdir()
    drafter.mkdir()
    shutil.copy2(_tiny_pair_source.verifier / "config.json", verifier / "config.json")
    shutil.copy2(_tiny_pair_source.drafter / "config.json", drafter / "config.json")
    (drafter / "model.safetensors").symlink_to(
        (_tiny_pair_source.drafter / "model.safetensors").resolve()
    )
    return TinyPair(verifier, drafter)


def config_of(folder: Path) -> dict:
    """A model folder's config.json."""
    return json.loads((folder / "config.json").read_text())


def write_config(folder: Path, config: dict) -> None:
    """Replace a model folder's config.json."""
    (folder / "config.json").write_text(json.dumps(config))


def check(pair: TinyPair) -> pairing.PairingReport:
    """validate_pair on the CPU device checks, as a laptop runs it."""
    return validate_pair(pair.verifier, pair.drafter, max_model_len=1024, gpu=False)


# --------------------------------------------------------------------------- generated wrong types


def test_the_cases_cover_every_key_and_type() -> None:
    keys = {p.values[1] for p in DRAFTER_CASES if p.values[0] == "speculators"}
    assert len(keys) == len(_DRAFTER_TOP_SCHEMA) + len(_DRAFTER_LAYER_SCHEMA)
    assert {p.values[1] for p in DRAFTER_CASES if p.values[0] == "flat"} == set(
        _DRAFTER_LAYER_SCHEMA
    )
    seen = {p.id.rsplit("=", 1)[1] for p in DRAFTER_CASES}
    assert seen == set(WRONG_VALUES) - {"None"}, "null is absence in a model config"


@pytest.mark.parametrize(("layout", "path", "value"), DRAFTER_CASES)
def test_a_drafter_key_of_the_wrong_type_is_one_named_error(
    light_pair: TinyPair, layout: str, path: str, value: Any
) -> None:
    config = flat_config() if layout == "flat" else config_of(light_pair.drafter)
    write_config(light_pair.drafter, put(config, path, value))
    report = check(light_pair)  # must not raise
    assert report.codes() == ["config_field_invalid"], report.summary()
    message = report.problems[0].message
    assert message.startswith(f"drafter {light_pair.drafter / 'config.json'}: {path} is ")
    assert ", expected " in message and "\n" not in message


@pytest.mark.parametrize(("layout", "path", "value"), VERIFIER_CASES)
def test_a_verifier_key_of_the_wrong_type_is_one_named_error(
    light_pair: TinyPair, layout: str, path: str, value: Any
) -> None:
    write_config(light_pair.verifier, put(config_of(light_pair.verifier), path, value))
    report = check(light_pair)
    assert report.codes() == ["config_field_invalid"], report.summary()
    assert report.problems[0].message.startswith(
        f"verifier {light_pair.verifier / 'config.json'}: {path} is "
    )


@pytest.mark.parametrize("path", NULLABLE)
def test_null_is_absence_never_a_type_error_nor_a_crash(light_pair: TinyPair, path: str) -> None:
    write_config(light_pair.drafter, put(config_of(light_pair.drafter), path, None))
    codes = check(light_pair).codes()
    assert "config_field_invalid" not in codes and "check_crashed" not in codes


# --------------------------------------------------------------------------- the probe's cases


@pytest.mark.parametrize(
    ("path", "value", "says"),
    [
        ("draft_vocab_size", "2048", '"2048" (a string), expected a positive integer'),
        (
            "eagle_aux_hidden_state_layer_ids",
            ["a", 4, 5],
            '["a", 4, 5] (a list), expected a list of integers or null: item 0 is "a" (a string)',
        ),
        ("eagle_aux_hidden_state_layer_ids", 5, "5 (an integer), expected a list of integers"),
        ("transformer_layer_config.max_position_embeddings", "2048", '"2048" (a string)'),
        (
            "speculators_config.verifier",
            "Qwen/Qwen3",
            '"Qwen/Qwen3" (a string), expected a JSON object',
        ),
        ("speculators_config", [1], "[1] (a list), expected a JSON object"),
        (
            "transformer_layer_config.head_dim",
            "abc",
            '"abc" (a string), expected a positive integer',
        ),
        ("eagle_config", "on", '"on" (a string), expected a JSON object'),
        (
            "eagle_aux_hidden_state_layer_ids",
            [2.0, 4, 5],
            "[2.0, 4, 5] (a list), expected a list of integers or null: item 0 is 2.0 (a number)",
        ),
    ],
    ids=[
        "draft_vocab_size-str",
        "aux-ids-str-item",
        "aux-ids-int",
        "max_position_embeddings-str",
        "verifier-str",
        "speculators_config-list",
        "head_dim-str",
        "eagle_config-str",
        "aux-ids-float",
    ],
)
def test_the_probes_crashing_configs_are_one_line_each(
    light_pair: TinyPair, path: str, value: Any, says: str
) -> None:
    """These raised TypeError, ValueError or AttributeError (float ids: 'pairing OK')."""
    write_config(light_pair.drafter, put(config_of(light_pair.drafter), path, value))
    report = check(light_pair)
    assert not report.ok and report.codes() == ["config_field_invalid"]
    assert f"{path} is {says}" in report.problems[0].message


def edit_d2t(pair: TinyPair, dtype: torch.dtype) -> None:
    """A reduced draft vocabulary (a quarter) whose d2t is stored as `dtype`."""
    config = config_of(pair.drafter)
    vocab, hidden = config["transformer_layer_config"]["vocab_size"], config["target_hidden_size"]
    draft = vocab // 4
    write_config(pair.drafter, {**config, "draft_vocab_size": draft})
    weights = load_file(str(pair.drafter / "model.safetensors"))
    weights |= {
        "lm_head.weight": torch.zeros(draft, hidden),
        "d2t": torch.zeros(draft, dtype=dtype),
        "t2d": torch.zeros(vocab, dtype=torch.bool),
    }
    (pair.drafter / "model.safetensors").unlink()  # the link: write a file of its own
    save_file(weights, str(pair.drafter / "model.safetensors"))


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.float32, torch.bool])
def test_a_d2t_too_narrow_for_the_vocabulary_is_an_error(light_pair: TinyPair, dtype) -> None:
    edit_d2t(light_pair, dtype)
    report = check(light_pair)
    assert report.codes() == ["tensor_dtype_mismatch"], report.summary()
    message = report.problems[0].message
    assert message.startswith("d2t is ") and "up to 2047" in message and "int64" in message


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16])
def test_a_d2t_wide_enough_for_the_vocabulary_passes(light_pair: TinyPair, dtype) -> None:
    edit_d2t(light_pair, dtype)  # vLLM casts it into int64 and every offset survives
    assert check(light_pair).problems == []


def test_an_unforeseen_error_is_one_finding_naming_both_configs(
    light_pair: TinyPair, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args):
        raise KeyError("shape\nsecond line")

    monkeypatch.setattr(pairing, "_check_fc", broken)
    report = check(light_pair)
    assert report.codes() == ["check_crashed"] and not report.ok
    message = report.problems[0].message
    assert str(light_pair.drafter / "config.json") in message
    assert str(light_pair.verifier / "config.json") in message
    assert "KeyError" in message and "\n" not in message


def test_an_uncached_hub_drafter_offline_answers_at_once(
    light_pair: TinyPair, monkeypatch: pytest.MonkeyPatch
) -> None:
    def download(*args, **kwargs):
        raise AssertionError("hf_hub_download was called")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    started = time.monotonic()
    report = validate_pair(light_pair.verifier, "RedHatAI/uncached-speculator.eagle3", gpu=False)
    assert time.monotonic() - started < 2
    assert report.codes() == ["config_unavailable"]
    assert "not in the local HF cache and HF_HUB_OFFLINE is set" in report.problems[0].message
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)  # make test sets it for tiny
    monkeypatch.setattr(configs, "hub_reachable", lambda timeout: False)  # no network
    report = validate_pair(light_pair.verifier, "RedHatAI/uncached-speculator.eagle3", gpu=False)
    assert "the hub does not answer" in report.problems[0].message


def test_a_cached_hub_drafter_without_network_skips_its_headers_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def metadata(*args, **kwargs):
        raise AssertionError("get_safetensors_metadata was called: it retries without a network")

    monkeypatch.setattr(huggingface_hub, "get_safetensors_metadata", metadata)
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):  # make test sets them for tiny
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(pairing, "hub_reachable", lambda: False)
    with pytest.raises(OSError, match="the hub does not answer"):
        pairing._hub_weight_index("RedHatAI/some-speculator.eagle3")
    weights, problems = pairing._read_weights("RedHatAI/some-speculator.eagle3")
    assert weights is None and [p.code for p in problems] == ["weights_unreadable"]


# --------------------------------------------------------------------------- the schema covers the reads


class Recorder(dict):
    """A config that notes the key path of every read (get, [], in), nested objects and lists
    included."""

    def __init__(self, data: dict, reads: set[str], prefix: str = "") -> None:
        super().__init__(data)
        self.reads, self.prefix = reads, prefix

    def _wrap(self, key: str, value: Any) -> Any:
        """A nested object or list, recording under this key's path."""
        path = f"{self.prefix}{key}"
        if isinstance(value, dict):
            return Recorder(value, self.reads, f"{path}.")
        if isinstance(value, list):
            return RecordedList(value, self.reads, path)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        self.reads.add(f"{self.prefix}{key}")
        return self._wrap(key, super().get(key, default))

    def __getitem__(self, key: str) -> Any:
        self.reads.add(f"{self.prefix}{key}")
        return self._wrap(key, super().__getitem__(key))

    def __contains__(self, key: object) -> bool:
        self.reads.add(f"{self.prefix}{key}")
        return super().__contains__(key)


class RecordedList(list):
    """A list that notes `path[i]` when an item is read by index."""

    def __init__(self, data: list, reads: set[str], path: str) -> None:
        super().__init__(data)
        self.reads, self.path = reads, path

    def __getitem__(self, index: Any) -> Any:
        value = super().__getitem__(index)
        if not isinstance(index, int) or not isinstance(value, dict):
            return value
        self.reads.add(f"{self.path}[{index}]")
        return Recorder(value, self.reads, f"{self.path}[{index}].")


@pytest.mark.parametrize("layout", ["speculators", "flat"])
def test_every_key_the_checks_read_is_in_the_schema(
    light_pair: TinyPair, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    """If a check starts reading a key the schema does not type, this names it (the schema's own
    lookups are recorded too: they read only its keys)."""
    drafter = flat_config() if layout == "flat" else config_of(light_pair.drafter)
    drafter["eagle_config"] = {"norm_before_fc": False, "fc_norm": False}
    write_config(light_pair.drafter, drafter)
    reads: dict[str, set[str]] = {"verifier": set(), "drafter": set()}
    real = pairing.read_config

    def recorded(ref: Any) -> Any:
        role = "drafter" if Path(ref) == light_pair.drafter else "verifier"
        return Recorder(real(ref), reads[role])

    monkeypatch.setattr(pairing, "read_config", recorded)
    assert check(light_pair).ok
    drafter_schema = pairing._drafter_schema(config_of(light_pair.drafter))
    verifier_schema = _verifier_schema(config_of(light_pair.verifier))
    assert reads["drafter"] and reads["verifier"]
    assert sorted(reads["drafter"] - set(drafter_schema)) == []
    assert sorted(reads["verifier"] - set(verifier_schema)) == []
