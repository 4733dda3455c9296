"""Small generic helpers with no home of their own: a streaming mean that stays on the device,
and seeding every random stream."""

from __future__ import annotations

import os
import random

import numpy as np
import torch

__all__ = ["RunningMean", "seed_everything"]


class RunningMean:
    """A weighted running mean kept on the device: :meth:`update` never synchronises;
    :meth:`compute` returns a Python float (one sync), to call at log intervals.

    Example:
        >>> m = RunningMean()
        >>> m.update(torch.tensor(2.0), 3); m.update(torch.tensor(4.0), 1)
        >>> m.compute()
        2.5
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.total: torch.Tensor | float = 0.0
        self.count: torch.Tensor | float = 0.0

    def update(self, value: torch.Tensor, weight: float | torch.Tensor = 1.0) -> None:
        """Add ``value`` (a mean over ``weight`` items) without leaving the device."""
        self.total = self.total + value.detach() * weight
        self.count = self.count + weight

    def compute(self) -> float:
        if isinstance(self.count, float) and self.count == 0.0:
            return float("nan")
        return float(self.total / self.count)


def seed_everything(seed: int, deterministic: bool = False) -> None:
    """Seed python, numpy, torch and every CUDA device; optionally deterministic kernels."""
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 - the global stream
    torch.manual_seed(seed)  # also seeds every CUDA device
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
