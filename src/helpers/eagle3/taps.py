"""EAGLE-3 taps: which verifier layers feed the drafter, and reading them from a transformers
verifier.

vLLM's EAGLE-3 default taps for an L-layer verifier are `(2, L // 2, L - 3)`
(`SupportsEagle3.get_eagle3_default_aux_hidden_state_layers`, which Qwen3-MoE gained with vLLM
PR #26485; tests/engine/test_vllm_source.py checks this copy against the installed vLLM for every
profile's verifier); a drafter's `eagle_aux_hidden_state_layer_ids` overrides them.

Tap id `k` is the residual stream after `k` decoder layers: the verifier's model `forward` stores
the embeddings under index 0 and, after the 0-based layer `idx`, `hidden + residual` under index
`idx + 1` (`EagleModelMixin._maybe_add_hidden_state`), so tap `k` is the output of the 0-based
layer `k - 1`, the same tensor as transformers' `hidden_states[k]` for `k < L` (transformers'
`hidden_states[L]` is after the final norm; the workbook keeps tap ids in `0..L-1`).
Plain Python and PyTorch: no vLLM import.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "default_aux_layers",
    "num_hidden_layers",
    "drafter_aux_layer_ids",
    "aux_layers_for",
    "verifier_taps",
]


def default_aux_layers(num_layers: int) -> tuple[int, ...]:
    """vLLM's default EAGLE-3 taps for an L-layer verifier: (2, L // 2, L - 3)."""
    if num_layers < 1:
        raise ValueError(f"num_layers must be >= 1, got {num_layers}")
    return (2, num_layers // 2, num_layers - 3)


def num_hidden_layers(config: dict) -> int:
    """The decoder depth L of a verifier config.json (or its text_config)."""
    for cfg in (config, config.get("text_config") or {}):
        if "num_hidden_layers" in cfg:
            return int(cfg["num_hidden_layers"])
    raise ValueError("verifier config has no num_hidden_layers: is this a decoder config.json?")


def drafter_aux_layer_ids(drafter_config: dict | None) -> tuple[int, ...] | None:
    """The drafter's eagle_aux_hidden_state_layer_ids (top level or eagle_config)."""
    if not drafter_config:
        return None
    ids = drafter_config.get("eagle_aux_hidden_state_layer_ids")
    if not ids:
        ids = (drafter_config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    return tuple(int(i) for i in ids) if ids else None


def _check_aux_layers(layers: tuple[int, ...], num_layers: int, source: str) -> tuple[int, ...]:
    """Return `layers` if distinct and in 0..L-1, else raise a ValueError saying how to fix it."""
    fix = (
        "set eagle_aux_hidden_state_layer_ids in the drafter's config.json to distinct ids "
        f"in 0..{num_layers - 1} (the default (2, L//2, L-3) breaks for small L)"
    )
    if len(set(layers)) != len(layers):
        raise ValueError(
            f"aux layers {layers} ({source}) repeat a layer for a {num_layers}-layer verifier: "
            f"vLLM taps only {len(set(layers))} distinct layers and the drafter's fc gets too "
            f"few inputs; {fix}"
        )
    bad = [k for k in layers if not 0 <= k < num_layers]
    if bad:
        raise ValueError(
            f"aux layers {layers} ({source}) include {bad}, outside 0..{num_layers - 1} for a "
            f"{num_layers}-layer verifier; {fix}"
        )
    return layers


def aux_layers_for(verifier_config: dict, drafter_config: dict | None = None) -> tuple[int, ...]:
    """The verifier layers EAGLE-3 taps: the drafter's override, else the default; validated."""
    num_layers = num_hidden_layers(verifier_config)
    override = drafter_aux_layer_ids(drafter_config)
    if override is not None:
        return _check_aux_layers(override, num_layers, "drafter eagle_aux_hidden_state_layer_ids")
    return _check_aux_layers(default_aux_layers(num_layers), num_layers, "vLLM default")


def verifier_taps(verifier: Any, x: Any, aux_layers: Sequence[int]) -> tuple[Any, Any]:
    """The verifier's concatenated tap states [B, T, 3H] (HF hidden_states[k]) and its logits [B, T,
    V]."""
    import torch

    with torch.no_grad():
        out = verifier(input_ids=x, output_hidden_states=True)
    return torch.cat([out.hidden_states[k] for k in aux_layers], -1), out.logits
