"""Shared helpers of the pose augmentation ops: argument checks, cached constant tables and
uniform draws from an explicit generator."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch

from ..skeleton import Skeleton
from ._checks import check_last_dims, check_tensor


def _check_generator(generator: object) -> torch.Generator:
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    return generator


def _check_range(name: str, r: Sequence[float], low: float | None = None) -> tuple[float, float]:
    if len(r) != 2 or not r[0] <= r[1]:
        raise ValueError(f"{name} must be (low, high) with low <= high, got {tuple(r)}")
    if low is not None and r[0] < low:
        raise ValueError(f"{name} must be >= {low}, got {tuple(r)}")
    return float(r[0]), float(r[1])


@functools.lru_cache(maxsize=256)
def _const(values: tuple, device: torch.device, dtype: torch.dtype | None) -> torch.Tensor:
    """A constant table as a tensor on ``device``, built once (no per-batch host copies)."""
    return torch.tensor(values, device=device, dtype=dtype)


def _uniform(shape, generator: torch.Generator, lo, hi, dtype) -> torch.Tensor:
    u = torch.rand(shape, generator=generator, device=generator.device, dtype=dtype)
    return lo + (hi - lo) * u


def _names_index(skeleton: Skeleton, names: Sequence[str], what: str) -> list[int]:
    out = []
    for n in names:  # joint names of a table (argument checks), not data
        if n not in skeleton.names:
            raise ValueError(
                f"{what}: joint {n!r} is not in skeleton {skeleton.name or skeleton.names}"
            )
        out.append(skeleton.names.index(n))
    return out


def _cached(skeleton: Skeleton, key: tuple, build):
    """A constant derived from tables, built once per skeleton (and key: device, dtype)."""
    value = skeleton._cache.get(key)
    if value is None:
        value = build()
        skeleton._cache[key] = value
    return value


def _check_joints(name: str, joints: torch.Tensor, skeleton: Skeleton) -> None:
    check_tensor(name, joints, 2)
    check_last_dims(name, joints, (skeleton.num_joints, 3), f"J={skeleton.num_joints} xyz")
