"""Input checks shared by the ops: shapes are checked always (free, no device sync); finiteness
is checked where it costs no host synchronisation (CPU tensors, outside ``torch.compile``).
On CUDA a device-side assert is queued instead, so a training step never waits on the host."""

from __future__ import annotations

import torch


def check_tensor(name: str, x: object, min_dim: int = 1) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() < min_dim:
        raise ValueError(f"{name} must have at least {min_dim} dims, got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating point tensor, got {x.dtype}")
    return x


def check_finite(name: str, x: torch.Tensor) -> None:
    if torch.compiler.is_compiling():
        return
    if x.device.type == "cpu":
        # One cheap reduction; the exact (slower) scan runs only when the sum is not finite,
        # which also happens for huge finite values: those pass.
        if not bool(torch.isfinite(x.sum())):
            bad = (~torch.isfinite(x)).nonzero()
            if len(bad):
                raise ValueError(
                    f"{name} has non-finite values (first at index {tuple(bad[0].tolist())})"
                )
    elif x.device.type == "cuda":
        torch._assert_async(torch.isfinite(x).all(), f"{name} has non-finite values")


def check_last_dims(name: str, x: torch.Tensor, expected: tuple, what: str) -> None:
    """``expected``: tuple of ints or ``None`` (any) matched against the trailing dims."""
    shape = tuple(x.shape[-len(expected) :]) if x.dim() >= len(expected) else None
    if shape is None or any(e is not None and e != s for e, s in zip(expected, shape, strict=True)):
        want = "(..., " + ", ".join("*" if e is None else str(e) for e in expected) + ")"
        raise ValueError(f"{name} must have shape {want} ({what}), got {tuple(x.shape)}")


def broadcast_shapes(*shapes: tuple[int, ...]) -> torch.Size:
    """``torch.broadcast_shapes`` without its first-call cost (torch imports sympy for it,
    about 0.5 s); a pair that does not broadcast raises ``RuntimeError`` as torch does."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:  # argument shapes (a few tuples), not data
        for i, n in enumerate(s, ndim - len(s)):
            if n != 1 and out[i] not in (1, n):
                raise RuntimeError(f"shapes {[tuple(s) for s in shapes]} do not broadcast")
            if n != 1:
                out[i] = n
    return torch.Size(out)
