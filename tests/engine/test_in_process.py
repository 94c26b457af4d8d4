"""helpers.engine.in_process: the guards around building a vLLM engine inside this process."""

from __future__ import annotations

import io
import sys
import types

import pytest

from helpers.engine.in_process import _has_fileno, _scannable, building_in_process


class _NoMappingDict:
    """Like llvmlite's FFI wrapper: every unknown attribute, `__dict__` included, is a callable."""

    __slots__ = ()

    def __getattr__(self, name: str) -> object:
        return lambda *a: None


@pytest.fixture
def unreadable_module() -> types.ModuleType:
    module = types.ModuleType("workbook_test_unreadable")
    module.lib = _NoMappingDict()
    sys.modules[module.__name__] = module
    yield module
    del sys.modules[module.__name__]


def test_scannable_tells_the_unreadable_module_apart(unreadable_module: types.ModuleType) -> None:
    assert not _scannable(unreadable_module)
    assert _scannable(types) and _scannable(pytest)


def test_the_kernel_scan_fails_on_it_and_passes_with_the_guard(
    unreadable_module: types.ModuleType,
) -> None:
    dispatcher = pytest.importorskip("vllm.triton_utils.dispatcher")
    with pytest.raises(AttributeError):
        dispatcher._rebind_kernels([])  # vLLM's own scan, unguarded
    with building_in_process():
        dispatcher._rebind_kernels([])
        assert dispatcher.sys.modules["types"] is types  # lookups by name still reach sys.modules
    assert dispatcher.sys is sys


def test_torch_set_num_threads_is_restored_after_the_build() -> None:
    import torch

    original = torch.set_num_threads
    with building_in_process():
        torch.set_num_threads = lambda n: None  # what vLLM's CPU worker does
    assert torch.set_num_threads is original


def test_a_stdout_without_fileno_gets_fd_1_during_the_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    system_utils = pytest.importorskip("vllm.utils.system_utils")
    notebook_out = io.StringIO()  # like a kernel's stdout under nbval: fileno() raises
    monkeypatch.setattr(sys, "stdout", notebook_out)
    assert not _has_fileno(sys.stdout)
    with pytest.raises(io.UnsupportedOperation), system_utils.suppress_stdout():
        pass
    with building_in_process():
        with system_utils.suppress_stdout():  # what vLLM's process-group setup runs
            pass
        print("still reaches the notebook")
    assert sys.stdout is notebook_out
    assert notebook_out.getvalue() == "still reaches the notebook\n"
