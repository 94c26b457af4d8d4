"""helpers.eagle3.checkpoint: the config writer and loader round-trip."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from helpers.common.configs import read_config
from helpers.common.paths import DATA_DIR
from helpers.eagle3 import checkpoint
from helpers.eagle3.checkpoint import (
    WEIGHTS_FILE,
    _shape_from_config,
    drafter_config,
    load_drafter,
    load_in_speculators,
    save_drafter,
    to_speculators_names,
)
from helpers.eagle3.drafter import DrafterShape, Eagle3Drafter
from helpers.eagle3.taps import drafter_aux_layer_ids
from helpers.eagle3.vocab import prune_draft_vocab
from kit.tiny_recipe import DRAFTER_NAME

SHAPE = DrafterShape(
    hidden_size=32,
    vocab_size=50,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=16,
    intermediate_size=64,
    target_hidden_size=32,
)


def test_config_round_trips_through_disk(tmp_path) -> None:
    torch.manual_seed(0)
    d = Eagle3Drafter(SHAPE)
    config = drafter_config(SHAPE, [2, 4, 5], "data/tiny-qwen3-moe", num_speculative_tokens=3)
    save_drafter(d, tmp_path, config)
    loaded, config2 = load_drafter(tmp_path)
    assert config2 == config and _shape_from_config(config2) == SHAPE
    assert drafter_aux_layer_ids(config2) == (2, 4, 5)
    for name, tensor in d.state_dict().items():
        assert torch.equal(tensor, loaded.state_dict()[name])


def test_config_has_what_vllm_reads() -> None:
    config = drafter_config(SHAPE, [2, 4, 5], "v")
    assert config["speculators_model_type"] == "eagle3"
    assert config["transformer_layer_config"]["model_type"] == "llama"
    assert config["draft_vocab_size"] == 50 and config["target_hidden_size"] == 32
    assert config["speculators_config"]["verifier"]["name_or_path"] == "v"


def test_a_reduced_vocabulary_drafter_round_trips_with_its_maps(tmp_path) -> None:
    shape = DrafterShape(**{**SHAPE.to_dict(), "draft_vocab_size": 4})
    d = Eagle3Drafter(shape)
    d.d2t = torch.tensor([0, 1, 5, 40])
    d.t2d = torch.zeros(50, dtype=torch.bool)
    d.t2d[[0, 2, 7, 43]] = True
    config = drafter_config(shape, [2, 4, 5], "v")
    assert (
        config["draft_vocab_size"] == 4 and config["transformer_layer_config"]["vocab_size"] == 50
    )
    save_drafter(d, tmp_path, config)
    loaded, _ = load_drafter(tmp_path)
    assert loaded.shape == shape
    assert torch.equal(loaded.d2t, d.d2t) and torch.equal(loaded.t2d, d.t2d)


@pytest.mark.parametrize("keep", [100, 8, 0])
def test_a_damaged_weights_file_is_named(tmp_path, keep: int) -> None:
    save_drafter(Eagle3Drafter(SHAPE), tmp_path, drafter_config(SHAPE, [0, 1, 2], "v"))
    weights = tmp_path / WEIGHTS_FILE
    weights.write_bytes(weights.read_bytes()[:keep])
    with pytest.raises(ValueError, match="is not a readable safetensors file") as err:
        load_drafter(tmp_path)
    assert str(err.value).startswith(str(weights)) and "\n" not in str(err.value)


# --------------------------------------------------------------------------- speculators' names


def _legacy_copy(src: Path, out: Path) -> Path:
    """A copy of a drafter with the original EAGLE code's `midlayer.` names (this workbook's before)."""
    shutil.copytree(src, out)
    weights = load_file(str(out / WEIGHTS_FILE))
    save_file({n.replace("layers.0.", "midlayer."): t for n, t in weights.items()},
              str(out / WEIGHTS_FILE))  # fmt: skip
    return out


def test_saved_names_are_speculators_and_legacy_names_still_load(tmp_path) -> None:
    d = Eagle3Drafter(SHAPE)
    save_drafter(d, tmp_path / "new", drafter_config(SHAPE, [2, 4, 5], "v"))
    names = set(load_file(str(tmp_path / "new" / WEIGHTS_FILE)))
    assert "layers.0.self_attn.q_proj.weight" in names
    assert not any(n.startswith("midlayer.") for n in names)
    legacy = _legacy_copy(tmp_path / "new", tmp_path / "old")
    loaded, _ = load_drafter(legacy)
    assert all(torch.equal(t, loaded.state_dict()[n]) for n, t in d.state_dict().items())
    assert len(to_speculators_names(legacy)) == 10 and to_speculators_names(legacy) == []
    assert set(load_file(str(legacy / WEIGHTS_FILE))) == names


def test_speculators_loads_every_tensor_of_what_the_workbook_ships_and_writes(tmp_path) -> None:
    shipped = DATA_DIR / DRAFTER_NAME
    model, unmatched = load_in_speculators(shipped)
    assert unmatched == []
    weights = load_file(str(shipped / WEIGHTS_FILE))
    state = model.state_dict()
    assert all(torch.equal(state[n], t) for n, t in weights.items())
    config = read_config(shipped)
    save_drafter(Eagle3Drafter(_shape_from_config(config)), tmp_path / "saved", config)
    pruned = prune_draft_vocab(shipped, tmp_path / "pruned", list(range(0, 2048, 2)))
    for folder in (tmp_path / "saved", pruned):
        assert load_in_speculators(folder)[1] == [], folder
    # What the check reports where speculators would leave a layer freshly initialised:
    _, legacy = load_in_speculators(_legacy_copy(shipped, tmp_path / "legacy"))
    assert "layers.0.self_attn.q_proj.weight" in legacy and len(legacy) == 20


@pytest.mark.vllm
def test_vllm_drafts_the_same_with_either_name(tmp_path) -> None:
    from helpers.common.counters import acceptance_stats
    from helpers.common.profiles import load_profile
    from helpers.common.prompts import load_prompts
    from helpers.engine.lifecycle import engine_kwargs, open_engine
    from helpers.engine.runs import pooled, run_categories, sampling

    profile, prompts = load_profile("tiny"), load_prompts(2)
    legacy = _legacy_copy(DATA_DIR / DRAFTER_NAME, tmp_path / DRAFTER_NAME)
    accepted = {}
    for name, folder in (("speculators", DATA_DIR / DRAFTER_NAME), ("midlayer", legacy)):
        with open_engine(**engine_kwargs(profile, k=3, drafter=str(folder))) as llm:
            runs = run_categories(llm, prompts, sampling(32))
        accepted[name] = acceptance_stats(pooled(runs))
    assert accepted["speculators"]["spec_decode_accepted_tokens"] > 0
    assert accepted["speculators"] == accepted["midlayer"], accepted


def test_the_converter_names_a_folder_that_is_not_a_drafter(tmp_path) -> None:
    import subprocess
    import sys

    from helpers.common.paths import REPO_ROOT

    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "to_speculators.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stderr == ""
    assert done.stdout.strip().splitlines() == [
        f"{tmp_path}: not a drafter folder (needs config.json and model.safetensors)"
    ]


# ---------------------------------------------------------------------------------- a full disk

#: What safetensors' writer raises on a full disk (seen on a 64 KiB tmpfs, 2026-12-06): not an
#: OSError, and no path.
NO_SPACE = "Error while serializing: I/O error: No space left on device (os error 28)"


def drafter_bytes(d: Eagle3Drafter, config: dict) -> int:
    """What a drafter's checkpoint needs at least: its tensors and its config.json."""
    tensors = sum(t.numel() * t.element_size() for t in d.state_dict().values())
    return tensors + len(json.dumps(config, indent=2)) + 1


def test_a_full_disk_names_the_folder_the_bytes_and_the_fix(tmp_path, monkeypatch) -> None:
    def full(*_args, **_kwargs) -> None:
        raise SafetensorError(NO_SPACE)

    monkeypatch.setattr(checkpoint, "save_file", full)
    d, config = Eagle3Drafter(SHAPE), drafter_config(SHAPE, [0, 1, 2], "v")
    out = tmp_path / "checkpoints" / "step-0030"
    with pytest.raises(OSError) as err:
        save_drafter(d, out, config)
    message = str(err.value)
    assert "\n" not in message and str(out) in message, message
    assert f"it needs {drafter_bytes(d, config):,} bytes" in message, message
    assert "No space left on device" in message and "free some space" in message, message


def test_a_disk_that_fills_at_the_config_leaves_no_half_checkpoint(tmp_path) -> None:
    out = tmp_path / "step-0120"
    out.mkdir()
    (out / "config.json").symlink_to("/dev/full")  # a real ENOSPC once the weights are written
    with pytest.raises(OSError) as err:
        save_drafter(Eagle3Drafter(SHAPE), out, drafter_config(SHAPE, [0, 1, 2], "v"))
    assert str(out) in str(err.value) and "no room" in str(err.value), err.value
    assert not (out / WEIGHTS_FILE).exists(), "weights without a config.json were left"


def test_other_write_errors_pass_unchanged(tmp_path, monkeypatch) -> None:
    def broken(*_args, **_kwargs) -> None:
        raise SafetensorError("Error while serializing: something else")

    monkeypatch.setattr(checkpoint, "save_file", broken)
    with pytest.raises(SafetensorError, match="something else"):
        save_drafter(Eagle3Drafter(SHAPE), tmp_path, drafter_config(SHAPE, [0, 1, 2], "v"))
