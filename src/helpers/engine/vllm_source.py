"""The installed vLLM's model class for an architecture, and questions to a running engine's
workers: which layers its verifier taps, which model runner it runs.

vLLM's model registry maps a config.json's `architectures[0]` to a module and class
(`model_class`; notebook 02's chapter quotes that class's EAGLE-3 path). A running engine answers
about its workers when it loads `WorkerProbe` as its worker extension
(`worker_extension_cls=WORKER_PROBE`), because vLLM sends method names, not functions, to its
workers unless insecure serialization is switched on: `workbook_taps` (the tapped layers) and
`workbook_runner` (`engine_runner`).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "model_class",
    "WORKER_PROBE",
    "engine_runner",
    "runs_model_runner_v2",
]


def model_class(architecture: str) -> tuple[str, str]:
    """(module, class) that the installed vLLM's model registry maps an architecture to."""
    from vllm import ModelRegistry

    entry = ModelRegistry.models.get(architecture)
    if entry is None:
        raise ValueError(
            f"the installed vLLM has no model class for architecture {architecture!r} "
            f"(config.json architectures[0]): check the verifier, or upgrade vLLM"
        )
    if hasattr(entry, "module_name"):  # registered lazily, as every in-tree model
        return entry.module_name, entry.class_name
    return entry.model_cls.__module__, entry.model_cls.__qualname__


def _worker_taps(worker: Any) -> tuple[int, ...]:
    """Inside a vLLM worker: the layers the verifier hands to the drafter (empty without
    EAGLE-3)."""
    model = worker.model_runner.get_model()
    for module in (model, getattr(model, "model", None)):
        layers = getattr(module, "aux_hidden_state_layers", None)
        if layers:
            return tuple(int(x) for x in layers)
    return ()


def _worker_runner(worker: Any) -> str:
    """Inside a vLLM worker: the model runner's class, with its module."""
    cls = type(worker.model_runner)
    return f"{cls.__module__}.{cls.__qualname__}"


def engine_runner(llm: Any) -> str:
    """The model runner class of a running engine's (first) worker (WorkerProbe)."""
    return llm.collective_rpc("workbook_runner")[0]


class _WorkerProbe:
    """vLLM worker extension: answers questions about the worker it is mixed into."""

    def workbook_taps(self) -> tuple[int, ...]:
        """worker_taps of this worker."""
        return _worker_taps(self)

    def workbook_runner(self) -> str:
        """worker_runner of this worker."""
        return _worker_runner(self)


#: The dotted name vLLM loads WorkerProbe by (`worker_extension_cls`).
WORKER_PROBE = f"{__name__}.{_WorkerProbe.__qualname__}"


def runs_model_runner_v2(runner: str) -> bool:
    """True for vLLM's Model Runner V2 (vllm/v1/worker/gpu/), the one with block verification."""
    return runner.startswith("vllm.v1.worker.gpu.")
