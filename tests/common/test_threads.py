"""helpers.common.threads: torch_threads restores the previous setting, even on error."""

from __future__ import annotations

import pytest
import torch

from helpers.common.threads import torch_threads


def test_threads_are_restored() -> None:
    before = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), torch_threads(1):
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before
