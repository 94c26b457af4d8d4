"""The recipe behind the embedded default: tokenizer, corpus, verifier, self-distillation, drafter.

`make tiny-models` runs `build_tiny_pair()` into data/; tests run it with SMOKE settings into a
temporary folder. Every step is seeded.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer, Qwen3MoeForCausalLM

from helpers.common.paths import DATA_DIR, RECIPE_LOG
from helpers.common.profiles import Profile
from helpers.common.prompts import CATEGORIES
from helpers.eagle3.checkpoint import drafter_config, load_verifier, save_drafter
from helpers.eagle3.drafter import DrafterShape
from helpers.eagle3.train import MixedSampler, new_drafter, train_drafter
from helpers.engine.lifecycle import engine_kwargs, open_engine
from helpers.engine.runs import self_distill
from helpers.tiny.corpus import build_corpus, make_examples
from helpers.tiny.verifier import encode_examples
from kit.manifest import write_manifest
from kit.tiny_tokenizer import build_tokenizer
from kit.tiny_verifier import train_verifier

__all__ = [
    "VERIFIER_NAME",
    "RecipeConfig",
    "SMOKE",
    "local_profile",
    "build_tiny_pair",
    "resume_drafter",
]

VERIFIER_NAME = "tiny-qwen3-moe"
DRAFTER_NAME = "tiny-qwen3-moe-eagle3"


@dataclass(frozen=True)
class RecipeConfig:
    """Knobs of the recipe; the defaults build the shipped pair in about 15 minutes on 2 cores."""

    n_per_category: int = 6000
    held_out_per_category: int = 32
    verifier_steps: int = 450
    verifier_batch: int = 16
    seq_len: int = 384
    verifier_lr: float = 3e-3
    distill_per_category: int = 400
    drafter_steps: int = 300
    drafter_batch: int = 16
    drafter_lr: float = 2e-3
    ttt_steps: int = 4
    corpus_share: float = 0.3
    aux_layers: tuple[int, ...] = (2, 4, 5)
    seed: int = 0


#: A few steps of everything: for tests that the recipe writes a pair vLLM loads.
SMOKE = RecipeConfig(
    n_per_category=40,
    held_out_per_category=4,
    verifier_steps=4,
    verifier_batch=4,
    seq_len=128,
    distill_per_category=4,
    drafter_steps=3,
    drafter_batch=4,
)


def local_profile(out_dir: Path, k: int = 3) -> Profile:
    """A profile pointing at a pair built into out_dir (absolute paths)."""
    return Profile(
        name=f"local:{out_dir}",
        description="a pair built by the recipe",
        verifier=str(out_dir / VERIFIER_NAME),
        drafter=str(out_dir / DRAFTER_NAME),
        num_speculative_tokens=k,
        engine={"max_model_len": 1024},
        needs={"hub": False},
    )


def _drafter_config(shape: DrafterShape, cfg: RecipeConfig) -> dict[str, Any]:
    """The speculators config.json the recipe saves beside its drafter's weights."""
    return drafter_config(shape, list(cfg.aux_layers), f"data/{VERIFIER_NAME}")


def _log(msg: str, t0: float) -> None:
    """One progress line with elapsed seconds."""
    print(f"[tiny-models {time.time() - t0:6.0f}s] {msg}", flush=True)


def build_tiny_pair(out_dir: Path = DATA_DIR, cfg: RecipeConfig = RecipeConfig()) -> dict[str, Any]:
    """Build tokenizer, prompts, verifier and drafter into out_dir; return what was measured."""
    t0, log = time.time(), {"config": asdict(cfg)}
    tok_dir, ver_dir = out_dir / "tiny-tokenizer", out_dir / VERIFIER_NAME
    tok = build_tokenizer(tok_dir)
    tok = AutoTokenizer.from_pretrained(tok_dir)
    _log(f"tokenizer: {len(tok)} tokens -> {tok_dir}", t0)

    corpus = build_corpus(cfg.n_per_category, cfg.seed)
    prompts = _held_out_prompts(cfg.held_out_per_category, exclude={ex.user for ex in corpus})
    _save_prompts(prompts, out_dir / "prompts")
    encoded = encode_examples(tok, corpus)
    log["corpus_tokens"] = sum(map(len, encoded))
    _log(
        f"corpus: {len(corpus)} exchanges, {log['corpus_tokens']} tokens; held-out prompts saved",
        t0,
    )

    ts = time.time()
    verifier, losses = train_verifier(
        tok, encoded, cfg.verifier_steps, cfg.verifier_batch, cfg.seq_len, cfg.verifier_lr, cfg.seed
    )
    log["verifier"] = {
        "seconds": round(time.time() - ts, 1),
        "params": sum(p.numel() for p in verifier.parameters()),
        "loss_first": round(losses[0], 3),
        "loss_last10": round(sum(losses[-10:]) / len(losses[-10:]), 3),
        "eval_loss": {
            c: round(_eval_loss(verifier, encode_examples(tok, make_examples(c, 16, 999))), 3)
            for c in CATEGORIES
        },
    }
    verifier.save_pretrained(ver_dir)
    tok.save_pretrained(ver_dir)
    _log(f"verifier: {log['verifier']} -> {ver_dir}", t0)
    (out_dir / RECIPE_LOG).write_text(json.dumps(log, indent=2) + "\n", encoding="utf-8")
    log.update(_build_drafter(out_dir, cfg, verifier, encoded))
    log["total_seconds"] = round(time.time() - t0, 1)
    (out_dir / RECIPE_LOG).write_text(json.dumps(log, indent=2) + "\n", encoding="utf-8")
    write_manifest(out_dir)  # last: the digests of what is there now
    return log


def _build_drafter(
    out_dir: Path,
    cfg: RecipeConfig,
    verifier: Qwen3MoeForCausalLM,
    encoded: list[list[int]],
) -> dict[str, Any]:
    """Self-distil the saved verifier with vLLM, then train and save its EAGLE-3 drafter."""
    t0, log = time.time(), {}
    distill_prompts = [
        ex.user
        for c in CATEGORIES
        for ex in make_examples(c, cfg.distill_per_category, cfg.seed + 1)
    ]
    with open_engine(**engine_kwargs(local_profile(out_dir), k=0)) as llm:
        distilled = self_distill(llm, distill_prompts)
    log["self_distill"] = {
        "seconds": round(time.time() - t0, 1),
        "exchanges": len(distilled),
        "tokens": sum(map(len, distilled)),
    }
    _log(f"self-distillation: {log['self_distill']}", t0)
    ts = time.time()
    drafter = new_drafter(verifier, cfg.aux_layers, cfg.seed)
    sampler = MixedSampler(distilled, encoded, cfg.seq_len, cfg.corpus_share, cfg.seed)
    hist = train_drafter(
        drafter,
        verifier,
        sampler,
        cfg.drafter_steps,
        cfg.aux_layers,
        cfg.ttt_steps,
        cfg.drafter_batch,
        cfg.drafter_lr,
    )
    tail = hist.agreement[-10:]
    log["drafter"] = {
        "seconds": round(time.time() - ts, 1),
        "params": sum(p.numel() for p in drafter.parameters()),
        "loss_last10": round(sum(hist.loss[-10:]) / len(hist.loss[-10:]), 3),
        "top1_agreement_last10": [
            round(sum(a[j] for a in tail) / len(tail), 3) for j in range(cfg.ttt_steps)
        ],
    }
    save_drafter(drafter, out_dir / DRAFTER_NAME, _drafter_config(drafter.shape, cfg))
    _log(f"drafter: {log['drafter']} -> {out_dir / DRAFTER_NAME}", t0)
    return log


def resume_drafter(out_dir: Path = DATA_DIR, cfg: RecipeConfig = RecipeConfig()) -> dict[str, Any]:
    """Redo only the drafter stage on the verifier already saved in out_dir (updates the recipe
    log)."""
    tok = AutoTokenizer.from_pretrained(out_dir / VERIFIER_NAME)
    encoded = encode_examples(tok, build_corpus(cfg.n_per_category, cfg.seed))
    log_path = out_dir / RECIPE_LOG
    log = (
        json.loads(log_path.read_text(encoding="utf-8"))
        if log_path.is_file()
        else {"config": asdict(cfg)}
    )
    log.update(_build_drafter(out_dir, cfg, load_verifier(out_dir / VERIFIER_NAME), encoded))
    log_path.write_text(json.dumps(log, indent=2) + "\n", encoding="utf-8")
    write_manifest(out_dir)
    return log


def _save_prompts(prompts: dict[str, list[str]], out_dir: Path) -> None:
    """Write one JSON list of prompts per category."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for cat, items in prompts.items():
        (out_dir / f"{cat}.json").write_text(json.dumps(items, indent=1) + "\n", encoding="utf-8")


def _held_out_prompts(
    n_per_category: int, seed: int = 12345, exclude: set[str] | None = None
) -> dict[str, list[str]]:
    """User turns per category, from a different seed than training, minus any seen in training."""
    exclude = exclude or set()
    out: dict[str, list[str]] = {}
    for cat in CATEGORIES:
        prompts: list[str] = []
        for ex in make_examples(cat, n_per_category * 4, seed):
            if ex.user not in exclude and ex.user not in prompts:
                prompts.append(ex.user)
            if len(prompts) == n_per_category:
                break
        out[cat] = prompts
    return out


@torch.no_grad()
def _eval_loss(model: Qwen3MoeForCausalLM, encoded: list[list[int]], seq_len: int = 384) -> float:
    """Mean next-token loss over exchanges (each scored alone, truncated to seq_len)."""
    total, count = 0.0, 0
    for ids in encoded:
        x = torch.tensor([ids[:seq_len]])
        n = x.shape[1] - 1
        total += model(input_ids=x, labels=x).loss.item() * n
        count += n
    return total / max(1, count)
