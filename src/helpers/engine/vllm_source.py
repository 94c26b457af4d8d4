"""The installed vLLM's own EAGLE-3 code path, quoted from its source, and the taps of a running engine.

Notebook 02 reads the code that runs, not a description of it: `excerpt` takes the lines of an
installed function that carry the idea (with their file and line numbers), so when vLLM changes,
the notebook shows the new code. `eagle3_support` finds the installed vLLM's class for a verifier
architecture through vLLM's model registry, asks vLLM whether it implements `SupportsEagle3`, and
locates its EAGLE-3 hooks (vLLM PR #26485 for Qwen3-MoE) wherever this vLLM defines them.
`engine_taps` asks the worker process of a running engine which layers its verifier actually
hands to the drafter; that needs the engine to load `WorkerProbe` as its worker extension
(`worker_extension_cls=WORKER_PROBE`), because vLLM sends method names, not functions, to its
workers unless insecure serialization is switched on.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from helpers.engine import compat

__all__ = [
    "SourceRef",
    "EAGLE3_PATH",
    "resolve",
    "excerpt",
    "eagle3_path_markdown",
    "HOOK_KEEP",
    "model_class",
    "implements_eagle3",
    "hook_refs",
    "Eagle3Support",
    "eagle3_support",
    "WORKER_PROBE",
    "WorkerProbe",
    "worker_taps",
    "engine_taps",
    "worker_runner",
    "engine_runner",
    "runs_model_runner_v2",
]


@dataclass(frozen=True)
class SourceRef:
    """An installed function and the words whose lines (with context) carry the idea."""

    title: str
    module: str
    qualname: str
    keep: tuple[str, ...] = ()


#: One EAGLE-3 step through the installed vLLM, in the order the data flows.
EAGLE3_PATH: tuple[SourceRef, ...] = (
    SourceRef(
        "1. the verifier's forward keeps the residual stream after the tapped layers",
        "vllm.model_executor.models.qwen3_moe",
        "Qwen3MoeModel.forward",
        ("aux_hidden_states", "for layer_idx", "layer(positions"),
    ),
    SourceRef(
        "2. one tap is hidden + residual: the pre-norm residual stream, as transformers' hidden_states[i]",
        "vllm.model_executor.models.interfaces",
        "EagleModelMixin._maybe_add_hidden_state",
    ),
    SourceRef(
        "3. which layers: the drafter's eagle_aux_hidden_state_layer_ids, else (2, L // 2, L - 3)",
        "vllm.model_executor.models.interfaces",
        "SupportsEagle3.get_eagle3_default_aux_hidden_state_layers",
        ("num_layers", "return"),
    ),
    SourceRef(
        "4. the model runner concatenates the taps of every scheduled token: [tokens, 3H]",
        "vllm.v1.worker.gpu_model_runner",
        "GPUModelRunner.propose_draft_token_ids",
        ("target_hidden_states = torch.cat(",),
    ),
    SourceRef(
        "5. the drafter fuses them with fc, 3H -> H",
        "vllm.model_executor.models.llama_eagle3",
        "Eagle3LlamaForCausalLM.combine_hidden_states",
        ("def combine_hidden_states", "self.model.fc("),
    ),
    SourceRef(
        "6. its one decoder layer reads [embedding of the next token ‖ fused hidden state], 2H",
        "vllm.model_executor.models.llama_eagle3",
        "LlamaDecoderLayer.forward",
        ("torch.cat",),
    ),
)


def resolve(ref: SourceRef) -> Any:
    """The installed object a SourceRef names (module attribute path)."""
    obj: Any = importlib.import_module(ref.module)
    for part in ref.qualname.split("."):
        obj = getattr(obj, part)
    return obj


def excerpt(ref: SourceRef, context: int = 1, max_lines: int = 14) -> str:
    """The lines of the function that contain a keep word (± context), numbered as in the file."""
    fn = resolve(ref)
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
    out, previous = [f"# {short}, {ref.qualname}"], -2
    for i in sorted(wanted)[:max_lines]:
        if i != previous + 1:
            out.append("    ...")
        out.append(f"{first + i:5d}  {lines[i].rstrip()}")
        previous = i
    return "\n".join(out)


def eagle3_path_markdown(refs: Sequence[SourceRef] = EAGLE3_PATH) -> str:
    """Every excerpt under its title, as Markdown with Python code blocks."""
    return "\n\n".join(f"**{ref.title}**\n\n```python\n{excerpt(ref)}\n```" for ref in refs)


#: The lines of a hook (and of the class statement) that carry the idea.
HOOK_KEEP = (
    "class ",
    "SupportsEagle3",
    "def ",
    "aux_hidden_state_layers",
    "num_layers",
    "return (",
)


def model_class(architecture: str) -> type:
    """The installed vLLM's class for a config.json architecture, from its model registry."""
    from vllm.model_executor.models import ModelRegistry

    registered = ModelRegistry.models.get(architecture)
    if registered is None:
        raise ValueError(f"this vLLM's model registry has no architecture {architecture!r}")
    return registered.load_model_cls()


def implements_eagle3(cls: type) -> bool:
    """vLLM's own verdict (`supports_eagle3`): does the class implement `SupportsEagle3`?"""
    from vllm.model_executor.models.interfaces import supports_eagle3

    return bool(supports_eagle3(cls))


def hook_refs(cls: type) -> tuple[SourceRef, ...]:
    """Each EAGLE-3 hook the class has, quoted where this vLLM defines it (the class or a base)."""
    refs = []
    for name in compat.EAGLE3_HOOKS:
        owner = next((c for c in cls.__mro__ if name in vars(c)), None)
        if owner is not None:
            title = f"`{name}`, defined on `{owner.__qualname__}`"
            refs.append(
                SourceRef(title, owner.__module__, f"{owner.__qualname__}.{name}", HOOK_KEEP)
            )
    return tuple(refs)


@dataclass(frozen=True)
class Eagle3Support:
    """The installed vLLM's class for a verifier architecture, and what it offers EAGLE-3."""

    architecture: str
    model_class: type
    implements: bool
    hooks: tuple[SourceRef, ...]

    @property
    def explanation(self) -> str:
        """One line: the class, and whether (with which hooks) it can feed an EAGLE-3 drafter."""
        cls = f"{self.model_class.__module__}.{self.model_class.__qualname__}"
        if not self.implements:
            return f"{self.architecture}: {cls} does not implement SupportsEagle3: no EAGLE-3"
        hooks = ", ".join(ref.qualname for ref in self.hooks)
        return f"{self.architecture}: {cls} implements SupportsEagle3 (hooks: {hooks})"

    def sources(self) -> tuple[SourceRef, ...]:
        """The class statement (its bases) and each hook, for `eagle3_path_markdown`."""
        cls = self.model_class
        title = f"`{cls.__qualname__}` and its bases"
        return (
            SourceRef(title, cls.__module__, cls.__qualname__, ("class ", "SupportsEagle3")),
            *self.hooks,
        )


def eagle3_support(architecture: str) -> Eagle3Support:
    """Find the architecture's class in the installed vLLM and check it for EAGLE-3 (imports it)."""
    cls = model_class(architecture)
    return Eagle3Support(architecture, cls, implements_eagle3(cls), hook_refs(cls))


def worker_taps(worker: Any) -> tuple[int, ...]:
    """Inside a vLLM worker: the layers the verifier hands to the drafter (empty without EAGLE-3)."""
    model = worker.model_runner.get_model()
    for module in (model, getattr(model, "model", None)):
        layers = getattr(module, "aux_hidden_state_layers", None)
        if layers:
            return tuple(int(x) for x in layers)
    return ()


def engine_taps(llm: Any) -> list[tuple[int, ...]]:
    """The verifier's tapped layers, read from each worker of a running engine (WorkerProbe)."""
    return [tuple(t) for t in llm.collective_rpc("workbook_taps")]


def worker_runner(worker: Any) -> str:
    """Inside a vLLM worker: the model runner's class, with its module."""
    cls = type(worker.model_runner)
    return f"{cls.__module__}.{cls.__qualname__}"


def engine_runner(llm: Any) -> str:
    """The model runner class of a running engine's (first) worker (WorkerProbe)."""
    return llm.collective_rpc("workbook_runner")[0]


class WorkerProbe:
    """vLLM worker extension: answers questions about the worker it is mixed into."""

    def workbook_taps(self) -> tuple[int, ...]:
        """worker_taps of this worker."""
        return worker_taps(self)

    def workbook_runner(self) -> str:
        """worker_runner of this worker."""
        return worker_runner(self)


#: The dotted name vLLM loads WorkerProbe by (`worker_extension_cls`).
WORKER_PROBE = f"{__name__}.WorkerProbe"


def runs_model_runner_v2(runner: str) -> bool:
    """True for vLLM's Model Runner V2 (vllm/v1/worker/gpu/), the one with block verification."""
    return runner.startswith("vllm.v1.worker.gpu.")
