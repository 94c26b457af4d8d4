"""CPU threads for PyTorch work in the notebooks' own process."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "torch_threads",
]


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run a block with n intra-op threads, then restore the previous setting.

    At the tiny pair's size a second thread buys little, and when anything else is running on a
    2-core machine, two spinning OpenMP threads make each forward up to 10x slower.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
