"""Small constant tensors, built once per device and dtype.

``torch.tensor(python_values, device="cuda")`` copies from pageable host memory, which waits
for the stream: a host synchronisation on every call. Ops take their constants from here.
"""

from __future__ import annotations

import functools

import torch


@functools.lru_cache(maxsize=512)
def _cached(values: tuple, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype).to(device)


def constant(values: tuple, device, dtype: torch.dtype) -> torch.Tensor:
    """``torch.tensor(values)`` on ``device`` in ``dtype``, cached (``values``: nested tuples
    of numbers). Under ``torch.compile`` it is built inline (a graph constant)."""
    if torch.compiler.is_compiling():
        return torch.tensor(values, dtype=dtype, device=device)
    return _cached(values, torch.device(device), dtype)
