"""vLLM issue #55005: speculative sampling at T > 0 on a CPU reads uninitialised memory; the fix.

On CPUs without Triton, vLLM's `expand_kernel` fallback (`cpu_triton_utils._expand_kernel_impl`)
hands a new int64 copy of the float32 temperature / top-p buffers to its C++ kernel and never
copies it back: the rejection sampler then divides the verifier's logits by uninitialised memory
at every T > 0 request, so speculative outputs at T > 0 are garbage or crash.

The workbook's `vllm.general_plugins` entry point (`helpers.engine.plugin:register`) calls
`patch_cpu_expand_kernel()` in every vLLM process, so in-process engines and `vllm serve` alike
are fixed; it does nothing on a GPU (Triton present) or on a vLLM whose kernel is already right.
The worker extension that `EXPAND_KERNEL_CHECK` names, loaded by name as a `worker_extension_cls`,
lets a notebook ask the worker process itself whether the kernel it runs is correct.
"""

from __future__ import annotations

from typing import Any

from helpers.engine import compat

__all__ = [
    "EXPAND_KERNEL_CHECK",
]

_KERNEL_NAME = "vllm.v1.sample.rejection_sampler.expand_kernel"


def _fixed_expand_kernel(
    output: Any,
    input_val: Any,
    cu_num_tokens: Any,
    replace_from: Any,
    replace_to: Any,
    MAX_NUM_TOKENS: Any = None,
) -> None:
    """A correct CPU `expand_kernel`: repeat each request's value over its draft tokens, in any
    dtype.

    The broken one (`cpu_triton_utils._expand_kernel_impl`, where
    `compat.QUIRKS["cpu_expand_kernel"]` says it was seen) hands `_ensure_int64(output)` (a new
    int64 copy for the float32 temperature / top-p buffers) to its C++ kernel and never copies it
    back, and truncates float inputs to int64: the rejection sampler then divides the verifier's
    logits by uninitialized memory at every T > 0 request, so speculative outputs at T > 0 are
    garbage.
    """
    import torch

    counts = torch.diff(cu_num_tokens.long(), prepend=cu_num_tokens.new_zeros(1).long())
    values = torch.where(
        input_val == replace_from, torch.full_like(input_val, replace_to), input_val
    )
    total = int(counts.sum())
    output[:total] = values.repeat_interleave(counts).to(output.dtype)


def patch_cpu_expand_kernel() -> bool:
    """Swap in fixed_expand_kernel for vLLM's CPU fallback; True when something was patched.

    Must run in every vLLM worker process before `register_triton_kernel_overrides()` (a vLLM
    general plugin does: plugins load first in `WorkerWrapperBase.init_worker`); afterwards it also
    re-registers the override so an already-initialized process is fixed too.
    """
    if not compat.supports("kernel_override_registry"):
        return False  # no CPU kernel overrides (or no vLLM): no broken expand kernel to replace
    from vllm.triton_utils import HAS_TRITON
    from vllm.utils import cpu_triton_utils

    if HAS_TRITON or cpu_triton_utils._expand_kernel_impl is _fixed_expand_kernel:
        return False
    cpu_triton_utils._expand_kernel_impl = _fixed_expand_kernel
    from vllm.triton_utils import dispatcher

    if dispatcher._registry.pop(_KERNEL_NAME, None) is not None:
        dispatcher.register_kernels({_KERNEL_NAME: _fixed_expand_kernel})
    return True


def _cpu_expand_kernel_ok() -> bool:
    """True unless this vLLM's CPU kernel overrides expand float tensors wrongly (checked
    in-process)."""
    import torch
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return True
    from vllm.triton_utils import dispatcher
    from vllm.v1.sample import rejection_sampler

    if _KERNEL_NAME not in dispatcher._registry:
        current_platform.import_kernels()
        current_platform.register_triton_kernel_overrides()

    temps = torch.tensor([0.3, 0.7])
    got = rejection_sampler.expand_batch_to_tokens(
        temps, torch.tensor([2, 3], dtype=torch.int32), 3, replace_from=-1, replace_to=1
    )
    return torch.allclose(got, torch.tensor([0.3, 0.3, 0.7]))


class _ExpandKernelCheck:
    """vLLM worker extension: reports from inside the worker whether the expand kernel is
    correct."""

    def workbook_cpu_expand_ok(self) -> bool:
        """cpu_expand_kernel_ok() evaluated in the worker process (call via llm.collective_rpc)."""
        return _cpu_expand_kernel_ok()

    def workbook_expanded_temperatures(self, temperatures: list[float], drafts: int) -> list[float]:
        """What the worker's rejection sampler reads as each draft token's temperature.

        The tensors live on the worker's device: on a GPU the kernel is Triton's and reads CUDA
        memory.
        """
        import torch
        from vllm.v1.sample import rejection_sampler

        device = getattr(self, "device", None) or "cpu"
        per_request = torch.tensor(temperatures, dtype=torch.float32, device=device)
        cu = torch.arange(1, len(temperatures) + 1, dtype=torch.int32, device=device) * drafts
        expanded = rejection_sampler.expand_batch_to_tokens(
            per_request, cu, len(temperatures) * drafts, replace_from=-1, replace_to=1
        )
        return [round(float(t), 6) for t in expanded]


#: `worker_extension_cls` for vLLM: the worker imports this class by name.
EXPAND_KERNEL_CHECK = f"{__name__}.{_ExpandKernelCheck.__qualname__}"
