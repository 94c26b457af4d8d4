"""What building vLLM engines one after another inside one Python process needs (the CPU path).

vLLM is written for an engine in processes of its own. Run in the caller's process (see
`helpers.engine.lifecycle.start_engine`), three of its start-up steps reach into that process:

1. the CPU worker replaces `torch.set_num_threads` with a no-op that logs a warning, so the
   notebook's own torch work (`helpers.common.threads.torch_threads`) could no longer set threads;
2. the CPU platform re-registers its kernel overrides at every engine start (on a vLLM with that
   registry: `compat.FEATURES["kernel_override_registry"]`), and the registry's
   `_rebind_kernels` scans every loaded module, calling `vars(value).get(...)` on each value with a
   `__dict__`; an object whose `__dict__` is not a mapping breaks the scan with an AttributeError.
   llvmlite's FFI wrapper is one: numba loads it once an n-gram engine ran (vLLM's n-gram proposer
   uses numba), so every later engine start in that process failed;
3. its process-group setup silences C libraries with `suppress_stdout()`, which needs
   `sys.stdout.fileno()`; a Jupyter kernel's stdout has none when the kernel does not capture file
   descriptors (as under nbval), so the build failed with `UnsupportedOperation: fileno`.

`building_in_process()` undoes 1 after the build, hides from the scan in 2 the modules it cannot
read (none of them holds a vLLM kernel), and for 3 lends `sys.stdout` the process's fd 1 while
everything written to it still goes where it went.
"""

from __future__ import annotations

import contextlib
import io
import sys
import types
from collections.abc import Iterator, Mapping
from typing import Any

from helpers.engine import compat

__all__ = []  # used only inside helpers.engine


def _scannable(module: Any) -> bool:
    """False when vLLM's kernel scan would fail on one of the module's values (see the module
    doc)."""
    namespace = getattr(module, "__dict__", None)
    if not isinstance(namespace, Mapping):
        return True  # the scan skips these itself
    for value in list(namespace.values()):
        try:
            inner = value.__dict__
        except Exception:
            continue
        if not isinstance(inner, Mapping):
            return False
    return True


def _has_fileno(stream: Any) -> bool:
    """True when `stream.fileno()` answers (a Jupyter kernel's stdout may not)."""
    try:
        stream.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):
        return False
    return True


class _WithFileno:
    """A stream as it is, plus this process's fd 1 as its `fileno()`."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def fileno(self) -> int:
        return 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _ReadableModules:
    """`sys.modules` as vLLM's kernel registry reads it, less the modules its scan cannot read."""

    def __getitem__(self, name: str) -> Any:
        return sys.modules[name]

    def values(self) -> list[Any]:
        return [m for m in list(sys.modules.values()) if _scannable(m)]


@contextlib.contextmanager
def building_in_process() -> Iterator[None]:
    """Around `vllm.LLM(...)` in this process: the three guards of the module doc."""
    import torch

    set_num_threads = torch.set_num_threads
    dispatcher = None  # a vLLM without the kernel registry has no scan to guard
    if compat.supports("kernel_override_registry"):
        from vllm.triton_utils import dispatcher
    stdout = sys.stdout
    if not _has_fileno(stdout):
        sys.stdout = _WithFileno(stdout)
    saved = getattr(dispatcher, "sys", None)
    if saved is sys:
        dispatcher.sys = types.SimpleNamespace(modules=_ReadableModules())  # all it reads of sys
    try:
        yield
    finally:
        if saved is sys:
            dispatcher.sys = saved
        sys.stdout = stdout
        torch.set_num_threads = set_num_threads
