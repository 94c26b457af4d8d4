"""Checkpoints: an EAGLE-3 drafter in the speculators format (config.json + safetensors, tensor
names `fc`, `layers.0.*`, `norm`, `lm_head`, `d2t`/`t2d`) that speculators' `Eagle3DraftModel`
and vLLM both load, a local verifier.

Earlier versions of this workbook wrote the original EAGLE code's `midlayer.*` names, which vLLM
renames on load (`orig_to_new_substr={"midlayer.": "layers.0."}` in
vllm/model_executor/models/llama_eagle3.py) but speculators 0.9.0 does not: its
`Eagle3DraftModel` left those tensors freshly initialised. `load_drafter` still reads them;
`to_speculators_names` rewrites such a checkpoint in place (`scripts/to_speculators.py`).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from helpers.common.configs import read_config
from helpers.common.envinfo import torch_device
from helpers.common.paths import REPO_ROOT, restore_hint
from helpers.eagle3.drafter import DrafterShape, Eagle3Drafter

__all__ = [
    "WEIGHTS_FILE",
    "drafter_config",
    "save_drafter",
    "load_drafter",
    "to_speculators_names",
    "load_in_speculators",
    "load_verifier",
]

WEIGHTS_FILE = "model.safetensors"
#: The first drafter layer's name prefix in the original EAGLE code, and in speculators/vLLM.
_LEGACY_PREFIX, _LAYER_PREFIX = "midlayer.", "layers.0."
#: The errno values of a full disk and of a spent quota.
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def drafter_config(
    shape: DrafterShape,
    aux_layer_ids: list[int],
    verifier_name: str,
    num_speculative_tokens: int = 3,
    dtype: str = "float32",
) -> dict[str, Any]:
    """The speculators `config.json` of an eagle3 drafter with one Llama decoder layer."""
    layer = {
        "model_type": "llama",
        "vocab_size": shape.vocab_size,
        "hidden_size": shape.hidden_size,
        "intermediate_size": shape.intermediate_size,
        "num_hidden_layers": 1,
        "num_attention_heads": shape.num_attention_heads,
        "num_key_value_heads": shape.num_key_value_heads,
        "head_dim": shape.head_dim,
        "rms_norm_eps": shape.rms_norm_eps,
        "rope_theta": shape.rope_theta,
        "max_position_embeddings": shape.max_position_embeddings,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
    }
    return {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": "eagle3",
        "transformer_layer_config": layer,
        "draft_vocab_size": shape.draft_vocab,
        "norm_before_residual": True,
        "target_hidden_size": shape.target_hidden_size or shape.hidden_size,
        "eagle_aux_hidden_state_layer_ids": list(aux_layer_ids),
        "speculators_config": {
            "algorithm": "eagle3",
            "default_proposal_method": "greedy",
            "proposal_methods": [
                {"proposal_type": "greedy", "speculative_tokens": num_speculative_tokens}
            ],
            "verifier": {"name_or_path": verifier_name, "architectures": ["Qwen3MoeForCausalLM"]},
        },
        "torch_dtype": dtype,
    }


def _shape_from_config(config: dict[str, Any]) -> DrafterShape:
    """Rebuild the drafter's shape from its speculators config."""
    layer = config["transformer_layer_config"]
    return DrafterShape(
        hidden_size=layer["hidden_size"],
        vocab_size=layer["vocab_size"],
        num_attention_heads=layer["num_attention_heads"],
        num_key_value_heads=layer["num_key_value_heads"],
        head_dim=layer.get("head_dim", layer["hidden_size"] // layer["num_attention_heads"]),
        intermediate_size=layer["intermediate_size"],
        num_aux_layers=len(config["eagle_aux_hidden_state_layer_ids"]),
        target_hidden_size=config.get("target_hidden_size"),
        rms_norm_eps=layer.get("rms_norm_eps", 1e-6),
        rope_theta=layer.get("rope_theta", 10000.0),
        max_position_embeddings=layer.get("max_position_embeddings", 2048),
        draft_vocab_size=(
            None
            if config.get("draft_vocab_size", layer["vocab_size"]) == layer["vocab_size"]
            else config["draft_vocab_size"]
        ),
    )


def save_drafter(drafter: Eagle3Drafter, out_dir: Path, config: dict[str, Any]) -> None:
    """Write config.json and model.safetensors (fc, layers.0.*, norm, lm_head, d2t/t2d; no
    embed_tokens: vLLM and speculators take the verifier's). A full disk is one OSError line
    naming the folder, the bytes needed and the fix, and leaves no half checkpoint."""
    weights = {k: v.detach().cpu().contiguous().clone() for k, v in drafter.state_dict().items()}
    text = json.dumps(config, indent=2) + "\n"
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        save_file(weights, str(out_dir / WEIGHTS_FILE), metadata={"format": "pt"})
        (out_dir / "config.json").write_text(text, encoding="utf-8")
    except (OSError, SafetensorError) as err:
        code = _no_space(err)
        if code is None:
            raise
        for name in (WEIGHTS_FILE, "config.json"):
            (out_dir / name).unlink(missing_ok=True)
        needed = sum(t.numel() * t.element_size() for t in weights.values()) + len(text.encode())
        raise OSError(
            f"no room to save the drafter in {out_dir}: it needs {needed:,} bytes, its disk has "
            f"{_free_bytes(out_dir):,} free ({os.strerror(code)}); free some space there "
            "(`make clean` empties build/) and save again"
        ) from None


def _no_space(err: OSError | SafetensorError) -> int | None:
    """The errno of a full disk or a spent quota that `err` reports (safetensors' writer says
    "(os error 28)"), else None."""
    if isinstance(err, OSError):
        return err.errno if err.errno in _NO_SPACE else None
    return next((code for code in _NO_SPACE if f"(os error {code})" in str(err)), None)


def _free_bytes(path: Path) -> int:
    """Free bytes on the disk that holds `path` (or its nearest existing parent)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free


def load_weights(path: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of a .safetensors file; a damaged file fails in one line naming it and how to
    restore it (safetensors' own error names neither)."""
    try:
        return load_file(str(path))
    except SafetensorError as err:
        raise ValueError(
            f"{path} is not a readable safetensors file ({err}): {restore_hint(path)}"
        ) from None


def load_drafter(model_dir: Path) -> tuple[Eagle3Drafter, dict[str, Any]]:
    """Load a drafter saved by save_drafter or by speculators (one Llama layer; `midlayer.*`
    names of older checkpoints read as `layers.0.*`)."""
    config = read_config(model_dir)
    drafter = Eagle3Drafter(_shape_from_config(config))
    state = _renamed(load_weights(Path(model_dir) / WEIGHTS_FILE))
    state.pop("embed_tokens.weight", None)  # speculators saves the verifier's; ours borrows it
    drafter.load_state_dict(state, strict=True)
    return drafter.eval(), config


def _renamed(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The same tensors with the legacy `midlayer.` prefix written as `layers.0.`."""
    return {
        _LAYER_PREFIX + n[len(_LEGACY_PREFIX) :] if n.startswith(_LEGACY_PREFIX) else n: t
        for n, t in weights.items()
    }


def to_speculators_names(model_dir: str | Path) -> list[str]:
    """Rewrite a drafter's safetensors in place with speculators' names; the names it changed."""
    path = Path(model_dir) / WEIGHTS_FILE
    weights = load_weights(path)
    changed = [n for n in weights if n.startswith(_LEGACY_PREFIX)]
    if changed:
        save_file(_renamed(weights), str(path), metadata={"format": "pt"})
    return changed


def load_in_speculators(model_dir: str | Path, attention: str = "sdpa") -> tuple[Any, list[str]]:
    """The drafter loaded by speculators' own `Eagle3DraftModel`, and every tensor name that did
    not match: file tensors it has no place for, and its tensors the file lacks beyond those it
    takes from the verifier (`_keys_to_ignore_on_load_missing`), and `embed_tokens` where it is
    not the verifier's. Empty means nothing was left freshly initialised. (Its `from_pretrained`
    takes no `output_loading_info`, so the names are compared here.) `attention` is the model's
    attention implementation: "sdpa" or "eager" run on any device."""
    from speculators.models.eagle3 import Eagle3DraftModel, Eagle3SpeculatorConfig

    config = Eagle3SpeculatorConfig.from_pretrained(str(model_dir))
    # speculators' default is flex attention, whose block masks need rows in blocks of 128 here
    config.transformer_layer_config._attn_implementation = attention
    verifier = config.speculators_config.verifier
    if verifier.name_or_path and (REPO_ROOT / verifier.name_or_path).is_dir():
        verifier.name_or_path = str(REPO_ROOT / verifier.name_or_path)  # repo-relative in data/
    model = Eagle3DraftModel.from_pretrained(str(model_dir), config=config)
    own = set(model.state_dict())
    saved = set(load_weights(Path(model_dir) / WEIGHTS_FILE))
    optional = set(Eagle3DraftModel._keys_to_ignore_on_load_missing)
    unmatched = sorted((saved - own) | (own - saved - optional))
    if "embed_tokens.weight" not in saved and verifier.name_or_path:
        # speculators fills embed_tokens from the verifier only where it is still NaN; under
        # transformers 5.12.1 from_pretrained had initialised it (not the verifier's): refill it.
        torch.nn.init.constant_(model.embed_tokens.weight, torch.nan)
        model.load_verifier_weights()
        from speculators.utils.loading import load_model_layers

        theirs = load_model_layers(["embed_tokens.weight"], verifier.name_or_path)
        if not torch.equal(model.embed_tokens.weight, theirs["embed_tokens.weight"]):
            unmatched.append("embed_tokens.weight (not the verifier's)")
    return model, unmatched


def load_verifier(model_dir: str | Path, device: str | None = None) -> Any:
    """A local Qwen3-MoE verifier in float32, eval mode, through transformers, on `device` (default:
    the GPU when torch sees one, else the CPU)."""
    from transformers import Qwen3MoeForCausalLM

    try:
        model = Qwen3MoeForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    except SafetensorError as err:
        weights = Path(model_dir) / WEIGHTS_FILE
        where = weights if weights.is_file() else Path(model_dir)
        raise ValueError(
            f"{where}: the verifier's weights are not readable ({err}): {restore_hint(where)}"
        ) from None
    return model.to(device or torch_device()).eval()
