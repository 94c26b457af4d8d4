"""The installed vLLM's own EAGLE-3 code path, quoted from its source, and the taps of a running
engine (notebook 02).

Notebook 02 reads the code that runs, not a description of it: `_excerpt` takes the lines of an
installed function that carry the idea (with their file and line numbers), so when vLLM changes,
the notebook shows the new code. Which model code runs follows from the verifier's config.json:
vLLM's model registry maps its `architectures[0]` to a module and class (the trunk's
`vllm_source.model_class`), `eagle3_path` quotes that class's EAGLE-3 path, and `eagle3_support`
asks vLLM whether the class implements `SupportsEagle3` and locates its hooks (vLLM PR #26485 for
Qwen3-MoE) wherever this vLLM defines them, so a new verifier needs no edit here.

`engine_taps` asks the worker process of a running engine which layers its verifier actually
hands to the drafter; that needs the engine to load the trunk's `vllm_source.WORKER_PROBE` as its
worker extension, because vLLM sends method names, not functions, to its workers unless insecure
serialization is switched on.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from helpers.engine import vllm_source

__all__ = [
    "eagle3_path",
    "eagle3_path_markdown",
    "eagle3_support",
    "engine_taps",
    "V2_CONCAT",
]


def _load_model_class(architecture: str) -> type:
    """The installed vLLM's model class for an architecture (imports its module)."""
    module_name, class_name = vllm_source.model_class(architecture)
    return getattr(importlib.import_module(module_name), class_name)


def _collects_taps(cls: type) -> bool:
    """True for a model class whose forward (own or inherited) collects aux_hidden_states."""
    try:
        return "aux_hidden_states" in inspect.getsource(cls.forward)
    except (AttributeError, OSError, TypeError):
        return False


def _tapping_model(architecture: str) -> type:
    """The inner model class whose forward collects the EAGLE-3 taps (the causal LM's `self.model`):
    the one such class in the module of the causal LM or, for a subclass, of its nearest base."""
    causal_lm = _load_model_class(architecture)
    for base in causal_lm.__mro__:
        module = sys.modules.get(base.__module__)
        if module is None or not base.__module__.startswith("vllm."):
            continue
        found = [
            obj
            for obj in vars(module).values()
            if inspect.isclass(obj)
            and obj.__module__ == module.__name__
            and not getattr(obj, "supports_eagle3", False)  # the causal LMs themselves
            and _collects_taps(obj)
        ]
        if len(found) == 1:
            return found[0]
        if found:
            names = sorted(c.__qualname__ for c in found)
            raise ValueError(
                f"{architecture}: several classes of {module.__name__} collect "
                f"aux_hidden_states ({names}); quote one by hand"
            )
    raise ValueError(
        f"{architecture}: no model class of the installed vLLM collects aux_hidden_states, so "
        f"{causal_lm.__qualname__} cannot feed an EAGLE-3 drafter"
    )


@dataclass(frozen=True)
class _SourceRef:
    """An installed function and the words whose lines (with context) carry the idea."""

    title: str
    module: str
    qualname: str
    keep: tuple[str, ...] = ()


#: The drafter's side of one EAGLE-3 step, the same for every verifier.
#: Model Runner V2 (what vLLM runs EAGLE-3 with on a GPU with Triton, vllm/v1/worker/gpu/): its
#: speculator concatenates the taps and fuses them in one line (imported only where it runs).
V2_CONCAT = _SourceRef(
    "Model Runner V2's speculator concatenates the taps and fuses them with fc: [tokens, 3H] -> H",
    "vllm.v1.worker.gpu.spec_decode.autoregressive.speculator",
    "AutoRegressiveSpeculator.propose",
    ("combine_hidden_states(", "torch.cat(aux_hidden_states"),
)
_DRAFT_PATH: tuple[_SourceRef, ...] = (
    _SourceRef(
        "the V1 model runner (vLLM's runner on a CPU) concatenates the taps of every scheduled "
        "token: [tokens, 3H]",
        "vllm.v1.worker.gpu_model_runner",
        "GPUModelRunner.propose_draft_token_ids",
        ("target_hidden_states = torch.cat(",),
    ),
    _SourceRef(
        "the drafter fuses them with fc, 3H -> H",
        "vllm.model_executor.models.llama_eagle3",
        "Eagle3LlamaForCausalLM.combine_hidden_states",
        ("def combine_hidden_states", "self.model.fc("),
    ),
    _SourceRef(
        "its one decoder layer reads [embedding of the next token ‖ fused hidden state], 2H",
        "vllm.model_executor.models.llama_eagle3",
        "LlamaDecoderLayer.forward",
        ("torch.cat",),
    ),
)


def eagle3_path(architecture: str) -> tuple[_SourceRef, ...]:
    """One EAGLE-3 step through the installed vLLM for a verifier architecture, in data-flow order:
    its model's forward keeps the taps, which layers by default, then DRAFT_PATH."""
    module_name, class_name = vllm_source.model_class(architecture)
    inner = _tapping_model(architecture)
    refs = [
        _SourceRef(
            "the verifier's forward keeps tap k, the residual stream after k layers: the "
            "embeddings under 0, then after 0-based layer idx under idx + 1",
            inner.__module__,
            f"{inner.__qualname__}.forward",
            ("aux_hidden_states", "for layer_idx", "= layer("),
        )
    ]
    if hasattr(inner, "_maybe_add_hidden_state"):
        refs.append(
            _SourceRef(
                "one tap is hidden + residual: tap k = the output of 0-based layer k - 1 = "
                "transformers' hidden_states[k]",
                inner.__module__,
                f"{inner.__qualname__}._maybe_add_hidden_state",
            )
        )
    refs.append(
        _SourceRef(
            "which layers: the drafter's eagle_aux_hidden_state_layer_ids, else this default",
            module_name,
            f"{class_name}.get_eagle3_default_aux_hidden_state_layers",
            ("num_layers", "return"),
        )
    )
    return (*refs, *_DRAFT_PATH)


def _resolve(ref: _SourceRef) -> Any:
    """The installed object a SourceRef names (module attribute path)."""
    obj: Any = importlib.import_module(ref.module)
    for part in ref.qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _excerpt(ref: _SourceRef, context: int = 1, max_lines: int = 14) -> str:
    """The lines of the function that contain a keep word (± context), numbered as in the file (a
    decorated function's own file: torch.no_grad wraps some)."""
    fn = inspect.unwrap(_resolve(ref))
    lines, first = inspect.getsourcelines(fn)
    path = inspect.getsourcefile(fn) or "?"
    short = path[path.rfind("vllm/") :] if "vllm/" in path else path
    if ref.keep:
        wanted = {
            j
            for i, line in enumerate(lines)
            if any(word in line for word in ref.keep)
            for j in range(max(0, i - context), min(len(lines), i + context + 1))
        }
    else:
        wanted = set(range(len(lines)))
    defined = fn.__qualname__
    owner = ref.qualname.rsplit(".", 1)[0]
    name = defined if defined == ref.qualname else f"{defined}, inherited by {owner}"
    out, previous = [f"# {short}, {name}"], -2
    for i in sorted(wanted)[:max_lines]:
        if i != previous + 1:
            out.append("    ...")
        out.append(f"{first + i:5d}  {lines[i].rstrip()}")
        previous = i
    return "\n".join(out)


def eagle3_path_markdown(refs: Sequence[_SourceRef]) -> str:
    """Every excerpt under its numbered title, as Markdown with Python code blocks."""
    return "\n\n".join(
        f"**{i}. {ref.title}**\n\n```python\n{_excerpt(ref)}\n```"
        for i, ref in enumerate(refs, start=1)
    )


#: A verifier class's EAGLE-3 hooks, by every name vLLM gave them: PR #26485 put
#: `set_aux_hidden_state_layers` and `get_eagle3_aux_hidden_state_layers` on the class; 0.26.0 and
#: 0.31.0 define `set_aux_hidden_state_layers` and `get_eagle3_default_aux_hidden_state_layers` on
#: `SupportsEagle3` itself (model_executor/models/interfaces.py), and the runner calls those two.
_EAGLE3_HOOKS: tuple[str, ...] = (
    "set_aux_hidden_state_layers",
    "get_eagle3_default_aux_hidden_state_layers",
    "get_eagle3_aux_hidden_state_layers",
)


#: The lines of a hook (and of the class statement) that carry the idea.
_HOOK_KEEP = (
    "class ",
    "SupportsEagle3",
    "def ",
    "aux_hidden_state_layers",
    "num_layers",
    "return (",
)


def _implements_eagle3(cls: type) -> bool:
    """vLLM's own verdict (`supports_eagle3`): does the class implement `SupportsEagle3`?"""
    from vllm.model_executor.models.interfaces import supports_eagle3

    return bool(supports_eagle3(cls))


def _hook_refs(cls: type) -> tuple[_SourceRef, ...]:
    """Each EAGLE-3 hook the class has, quoted where this vLLM defines it (the class or a base)."""
    refs = []
    for name in _EAGLE3_HOOKS:
        owner = next((c for c in cls.__mro__ if name in vars(c)), None)
        if owner is not None:
            title = f"`{name}`, defined on `{owner.__qualname__}`"
            refs.append(
                _SourceRef(title, owner.__module__, f"{owner.__qualname__}.{name}", _HOOK_KEEP)
            )
    return tuple(refs)


@dataclass(frozen=True)
class _Eagle3Support:
    """The installed vLLM's class for a verifier architecture, and what it offers EAGLE-3."""

    architecture: str
    model_class: type
    implements: bool
    hooks: tuple[_SourceRef, ...]

    @property
    def explanation(self) -> str:
        """One line: the class, and whether (with which hooks) it can feed an EAGLE-3 drafter."""
        cls = f"{self.model_class.__module__}.{self.model_class.__qualname__}"
        if not self.implements:
            return f"{self.architecture}: {cls} does not implement SupportsEagle3: no EAGLE-3"
        hooks = ", ".join(ref.qualname for ref in self.hooks)
        return f"{self.architecture}: {cls} implements SupportsEagle3 (hooks: {hooks})"

    def sources(self) -> tuple[_SourceRef, ...]:
        """The class statement (its bases) and each hook, for `eagle3_path_markdown`."""
        cls = self.model_class
        title = f"`{cls.__qualname__}` and its bases"
        return (
            _SourceRef(title, cls.__module__, cls.__qualname__, ("class ", "SupportsEagle3")),
            *self.hooks,
        )


def eagle3_support(architecture: str) -> _Eagle3Support:
    """Find the architecture's class in the installed vLLM and check it for EAGLE-3 (imports it)."""
    cls = _load_model_class(architecture)
    return _Eagle3Support(architecture, cls, _implements_eagle3(cls), _hook_refs(cls))


def engine_taps(llm: Any) -> list[tuple[int, ...]]:
    """The verifier's tapped layers, read from each worker of a running engine (the trunk's
    `vllm_source.WORKER_PROBE`)."""
    return [tuple(t) for t in llm.collective_rpc("workbook_taps")]
