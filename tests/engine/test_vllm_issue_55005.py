"""helpers.engine.vllm_issue_55005: the corrected CPU expand kernel, in this process."""

from __future__ import annotations

import pytest

from helpers.engine import vllm_issue_55005 as fix


def test_fixed_expand_kernel_keeps_dtype_and_replaces() -> None:
    import torch

    cu = torch.tensor([2, 2, 5], dtype=torch.int32)
    out = torch.full((5,), -9.0)
    fix.fixed_expand_kernel(out, torch.tensor([0.3, 0.5, 0.0]), cu, 0, 1)
    assert out.tolist() == pytest.approx([0.3, 0.3, 1.0, 1.0, 1.0])
    ints = torch.zeros(5, dtype=torch.int32)
    fix.fixed_expand_kernel(ints, torch.tensor([7, 8, 9], dtype=torch.int32), cu, 0, 0)
    assert ints.tolist() == [7, 7, 9, 9, 9]


def test_cpu_expand_fix_in_process() -> None:
    """After the patch, vLLM's own expand_batch_to_tokens returns the right temperatures here."""
    pytest.importorskip("vllm")
    fix.patch_cpu_expand_kernel()
    assert fix.cpu_expand_kernel_ok()
    assert not fix.patch_cpu_expand_kernel()  # idempotent
    assert fix.ExpandKernelCheck().workbook_cpu_expand_ok()
