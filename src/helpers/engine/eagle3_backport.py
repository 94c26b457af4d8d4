"""The eagle3 patch (an appendix for vLLM < 0.11.1): PR #26485's EAGLE-3 hooks for Qwen3-MoE, on a vLLM that predates them.

vLLM PR #26485 ("Add EAGLE-3 Speculative Decoding Support for Qwen3 MoE", first released
in 0.11.1) changed one file, ``vllm/model_executor/models/qwen3_moe.py``:

* ``Qwen3MoeModel`` gained an ``aux_hidden_state_layers`` tuple, and its ``forward`` collects
  ``hidden_states + residual`` (the residual stream) *before* running each layer whose index
  is in that tuple, returning ``(hidden_states, aux_hidden_states)`` when any were collected;
* ``Qwen3MoeForCausalLM`` gained ``SupportsEagle3`` in its bases plus
  ``set_aux_hidden_state_layers(layers)`` and ``get_eagle3_aux_hidden_state_layers()``,
  which returns ``(2, L // 2, L - 3)``.

On vLLM < 0.11.1 :func:`apply_eagle3_patch` adds exactly that to the already-imported classes.
On a vLLM that has it (the workbook pins 0.31.0, where it lives on as ``EagleModelMixin`` and
``get_eagle3_default_aux_hidden_state_layers``) it checks ``supports_eagle3`` and does nothing.

Aux layer id ``k`` is the residual stream after ``k`` decoder layers, i.e. transformers'
``hidden_states[k]`` (``k = 0`` is the embeddings).
"""

from __future__ import annotations

import importlib
import logging
import types
import typing
from dataclasses import asdict, dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from helpers.common.envinfo import vllm_version
from helpers.eagle3.taps import default_aux_layers

__all__ = [
    "FIXED_IN",
    "PR_URL",
    "QWEN3_MOE_MODULE",
    "PATCH_MARKER",
    "patch_needed",
    "class_supports_eagle3",
    "apply_eagle3_patch",
    "Eagle3Status",
    "eagle3_status",
    "describe_patch",
]

logger = logging.getLogger(__name__)

#: First vLLM release whose Qwen3-MoE supports EAGLE-3 natively (PR #26485).
FIXED_IN: str = "0.11.1"
PR_URL: str = "https://github.com/vllm-project/vllm/pull/26485"
QWEN3_MOE_MODULE: str = "vllm.model_executor.models.qwen3_moe"
#: Class attribute that marks a class this workbook patched (its value: the PR it mirrors).
PATCH_MARKER: str = "_eagle3_workbook_patch"

# Resolved by apply_eagle3_patch so the patched forward never imports (keeps it traceable).
_PARALLEL_STATE: Any = None
_INTERMEDIATE_TENSORS: Any = None


# --------------------------------------------------------------------------- versions


def patch_needed(version: str) -> bool:
    """True for vLLM releases before 0.11.1 (judged by release number: '0.31.0+cpu' -> False)."""
    try:
        parsed = Version(version)
    except InvalidVersion as err:
        raise ValueError(f"not a vLLM version: {version!r}") from err
    return parsed.release[:3] < Version(FIXED_IN).release


# --------------------------------------------------------------------------- the patch


def _import_qwen3_moe() -> Any:
    """The installed vLLM's qwen3_moe module (imports vLLM: a few seconds)."""
    return importlib.import_module(QWEN3_MOE_MODULE)


def _eagle3_protocol() -> Any:
    """The installed vLLM's SupportsEagle3 protocol, or None if this vLLM has none."""
    try:
        return importlib.import_module("vllm.model_executor.models.interfaces").SupportsEagle3
    except (ImportError, AttributeError):
        return None


def class_supports_eagle3(model_cls: type) -> bool:
    """vLLM's own verdict (`supports_eagle3`) on a model class; the flag if vLLM lacks the check.

    `supports_eagle3` is `isinstance(cls, SupportsEagle3)` on a runtime-checkable Protocol: it
    passes when every protocol member exists on the class. (`issubclass` would raise TypeError,
    since the protocol has non-method members.)
    """
    try:
        check = importlib.import_module("vllm.model_executor.models.interfaces").supports_eagle3
    except (ImportError, AttributeError):
        return bool(getattr(model_cls, "supports_eagle3", False))
    return bool(check(model_cls))


def _pp_position() -> tuple[bool, bool]:
    """(is_first_rank, is_last_rank) of pipeline parallelism; (True, True) when PP is not set up."""
    state = _PARALLEL_STATE
    if state is None or getattr(state, "_PP", None) is None:
        return True, True
    group = state.get_pp_group()
    return group.is_first_rank, group.is_last_rank


def _to_intermediate(hidden_states: Any, residual: Any) -> Any:
    """The IntermediateTensors a non-last PP rank hands on (a dict without vLLM)."""
    tensors = {"hidden_states": hidden_states, "residual": residual}
    return _INTERMEDIATE_TENSORS(tensors) if _INTERMEDIATE_TENSORS is not None else tensors


def _embed(model: Any, input_ids: Any) -> Any:
    """Token embeddings via this vLLM's name for it (embed_input_ids or get_input_embeddings)."""
    embed = getattr(model, "embed_input_ids", None) or model.get_input_embeddings
    return embed(input_ids)


def _eagle3_model_forward(
    self: Any,
    input_ids: Any,
    positions: Any,
    intermediate_tensors: Any = None,
    inputs_embeds: Any = None,
) -> Any:
    """Qwen3MoeModel.forward as PR #26485 wrote it; the original forward when no taps are set."""
    if not self.aux_hidden_state_layers:
        return type(self)._eagle3_original_forward(
            self, input_ids, positions, intermediate_tensors, inputs_embeds
        )
    is_first, is_last = _pp_position()
    if is_first:
        hidden_states = inputs_embeds if inputs_embeds is not None else _embed(self, input_ids)
        residual = None
    else:
        hidden_states = intermediate_tensors["hidden_states"]
        residual = intermediate_tensors["residual"]
    aux_hidden_states = []
    start, end = getattr(self, "start_layer", 0), getattr(self, "end_layer", len(self.layers))
    for layer_idx in range(start, end):
        if layer_idx in self.aux_hidden_state_layers:
            aux = hidden_states + residual if residual is not None else hidden_states
            aux_hidden_states.append(aux)
        hidden_states, residual = self.layers[layer_idx](positions, hidden_states, residual)
    if not is_last:
        return _to_intermediate(hidden_states, residual)
    hidden_states, _ = self.norm(hidden_states, residual)
    if len(aux_hidden_states) > 0:
        return hidden_states, aux_hidden_states
    return hidden_states


def _fresh_forward(model_base_cls: type) -> Any:
    """A per-class copy of the patched forward (vLLM's compile wrapper swaps its __code__)."""
    fn = _eagle3_model_forward
    copy = types.FunctionType(fn.__code__, fn.__globals__, "forward", fn.__defaults__)
    copy.__qualname__ = f"{model_base_cls.__name__}.forward"
    copy.__doc__, copy.__module__ = fn.__doc__, fn.__module__
    copy.__annotations__ = dict(fn.__annotations__)
    return copy


def _set_aux_hidden_state_layers(self: Any, layers: tuple[int, ...]) -> None:
    """Tap the residual stream before each of `layers` (PR #26485)."""
    self.model.aux_hidden_state_layers = tuple(layers)


def _get_eagle3_aux_hidden_state_layers(self: Any) -> tuple[int, ...]:
    """vLLM's default taps for this model's depth: (2, L // 2, L - 3) (PR #26485)."""
    return default_aux_layers(len(self.model.layers))


def _protocol_members(protocol: Any) -> set[str]:
    """Every member a runtime isinstance() check of `protocol` looks for."""
    attrs = getattr(protocol, "__protocol_attrs__", None)
    return set(attrs) if attrs is not None else set(typing._get_protocol_attrs(protocol))


def _add_protocol(model_cls: type, protocol: Any) -> None:
    """Put SupportsEagle3 in the bases; make sure every member its isinstance() wants exists."""
    if protocol is None:
        return
    if protocol not in model_cls.__mro__:
        try:
            model_cls.__bases__ = (*model_cls.__bases__, protocol)
        except TypeError as err:  # layout/MRO clash: the structural members below still suffice
            logger.warning("eagle3 patch: could not add %s to bases (%s)", protocol.__name__, err)
    for member in _protocol_members(protocol):
        if not hasattr(model_cls, member) and hasattr(protocol, member):
            setattr(model_cls, member, getattr(protocol, member))


def _patch_classes(model_cls: type, model_base_cls: type) -> None:
    """Add PR #26485's members to the two classes (caller has checked they lack them)."""
    if PATCH_MARKER not in vars(model_base_cls):
        model_base_cls.aux_hidden_state_layers = ()
        model_base_cls._eagle3_original_forward = model_base_cls.forward
        model_base_cls.forward = _fresh_forward(model_base_cls)
    model_cls.supports_eagle3 = True
    model_cls.set_aux_hidden_state_layers = _set_aux_hidden_state_layers
    model_cls.get_eagle3_aux_hidden_state_layers = _get_eagle3_aux_hidden_state_layers
    _add_protocol(model_cls, _eagle3_protocol())
    setattr(model_cls, PATCH_MARKER, PR_URL)
    setattr(model_base_cls, PATCH_MARKER, PR_URL)


def _resolve_vllm_runtime() -> None:
    """Find vLLM's PP state and IntermediateTensors once, for the patched forward."""
    global _PARALLEL_STATE, _INTERMEDIATE_TENSORS
    targets = (("vllm.distributed.parallel_state", None), ("vllm.sequence", "IntermediateTensors"))
    for module, attr in targets:
        try:
            found = importlib.import_module(module)
        except ImportError:
            continue
        if attr is None:
            _PARALLEL_STATE = found
        else:
            _INTERMEDIATE_TENSORS = getattr(found, attr, None)


def apply_eagle3_patch(model_cls: type | None = None, model_base_cls: type | None = None) -> bool:
    """Give Qwen3-MoE PR #26485's EAGLE-3 hooks if it lacks them; True only if classes changed.

    Defaults to vLLM's Qwen3MoeForCausalLM (`model_cls`) and Qwen3MoeModel (`model_base_cls`).
    Idempotent, and a verified no-op where `supports_eagle3(model_cls)` already holds.
    """
    if model_cls is None or model_base_cls is None:
        module = _import_qwen3_moe()
        model_cls = model_cls or module.Qwen3MoeForCausalLM
        model_base_cls = model_base_cls or module.Qwen3MoeModel
    if class_supports_eagle3(model_cls):
        how = "already patched" if PATCH_MARKER in vars(model_cls) else "vLLM implements it"
        logger.info("eagle3 patch: %s supports EAGLE-3 (%s): no-op", model_cls.__name__, how)
        return False
    _resolve_vllm_runtime()
    _patch_classes(model_cls, model_base_cls)
    logger.info("eagle3 patch: added PR #26485's EAGLE-3 hooks to %s", model_cls.__name__)
    return True


# --------------------------------------------------------------------------- status


@dataclass(frozen=True)
class Eagle3Status:
    """Where this process stands on EAGLE-3 for Qwen3-MoE."""

    vllm_version: str
    patch_needed: bool
    class_supports_eagle3: bool | None
    patch_applied: bool
    explanation: str

    def as_dict(self) -> dict[str, Any]:
        """The status as a plain dict (for JSON or a notebook table)."""
        return asdict(self)


def _explain(version: str, needed: bool, supports: bool | None, applied: bool) -> str:
    """One line saying what the status means."""
    if not version:
        return "vLLM is not installed: nothing to patch"
    if applied:
        return f"vLLM {version} predates PR #26485; this workbook's eagle3 patch added its hooks"
    if supports is None:
        return f"vLLM {version} has PR #26485 (EAGLE-3 for Qwen3-MoE, {FIXED_IN}+): no patch needed"
    if supports:
        return f"vLLM {version}'s Qwen3MoeForCausalLM supports EAGLE-3 natively: patch is a no-op"
    if needed:
        return f"vLLM {version} predates PR #26485: call apply_eagle3_patch() or install the plugin"
    return f"vLLM {version} should, but its Qwen3MoeForCausalLM lacks EAGLE-3: check the install"


def eagle3_status(inspect_class: bool = True) -> Eagle3Status:
    """Installed vLLM, whether its Qwen3MoeForCausalLM supports EAGLE-3, whether we patched it."""
    version = vllm_version()
    needed = patch_needed(version) if version else False
    supports: bool | None = None
    applied = False
    if version and inspect_class:
        model_cls = _import_qwen3_moe().Qwen3MoeForCausalLM
        supports = class_supports_eagle3(model_cls)
        applied = PATCH_MARKER in vars(model_cls)
    explanation = _explain(version, needed, supports, applied)
    return Eagle3Status(version, needed, supports, applied, explanation)


def describe_patch() -> str:
    """Markdown stating exactly what the eagle3 patch changes, for the notebook."""
    return f"""\
**The eagle3 patch** (`helpers.engine.eagle3_backport`) re-applies [vLLM PR #26485]({PR_URL}) to a vLLM
older than {FIXED_IN}. It edits two already-imported classes in `{QWEN3_MOE_MODULE}`, no files:

| class | added by the patch |
|---|---|
| `Qwen3MoeModel` | `aux_hidden_state_layers = ()`; `forward` that, when that tuple is non-empty, appends `hidden_states + residual` before running each listed layer and returns `(hidden_states, aux_hidden_states)` — with no taps set it calls the original `forward` unchanged |
| `Qwen3MoeForCausalLM` | `SupportsEagle3` in its bases and `supports_eagle3 = True`; `set_aux_hidden_state_layers(layers)`; `get_eagle3_aux_hidden_state_layers()` → `(2, L // 2, L - 3)` |

* Tap `k` is the residual stream after `k` layers = transformers' `hidden_states[k]`; a drafter's
  `eagle_aux_hidden_state_layer_ids` overrides the default.
* On vLLM ≥ {FIXED_IN} (this workbook pins 0.31.0) the classes already pass `supports_eagle3`,
  so the patch changes nothing and `apply_eagle3_patch()` returns `False`.
* It reaches vLLM's spawned engine processes through the `vllm.general_plugins` entry point
  `eagle3_workbook = "helpers.engine.plugin:register"` (if `VLLM_PLUGINS` is set, list it there).
"""
