"""3D pose metrics as batched tensor functions (definitions of VideoPose3D's ``common/loss.py``),
plus a streaming mean that stays on the device until :meth:`RunningMean.compute`.

Every metric takes ``pred`` and ``target`` of the same shape ``(..., J, 3)`` (``(..., T, J, 3)``
where a time axis is needed) and ``reduction``:

- ``"mean"``: one 0-dim tensor, the mean over everything (VideoPose3D's number);
- ``"none"``: the per-pose (per-frame) value, shape ``(...)``; for ``mpjve`` ``(..., T - 1)``,
  for ``bone_length_std`` per bone ``(..., S)``.

Units are those of the inputs (metres in, metres out). Nothing here synchronises with the host.
"""

from __future__ import annotations

import torch

from .ops.kinematics import bone_lengths
from .skeleton import Skeleton

__all__ = [
    "RunningMean",
    "bone_length_std",
    "mpjpe",
    "mpjve",
    "n_mpjpe",
    "p_mpjpe",
    "procrustes_align",
]

_REDUCTIONS = ("mean", "none")


def _check_pair(pred: torch.Tensor, target: torch.Tensor, min_dim: int = 2) -> None:
    for name, x in (("pred", pred), ("target", target)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() < min_dim or x.shape[-1] != 3:
            want = "(..., T, J, 3)" if min_dim == 3 else "(..., J, 3)"
            raise ValueError(f"{name} must have shape {want}, got {tuple(x.shape)}")
    if pred.shape != target.shape:
        raise ValueError(
            f"pred and target must have the same shape, got {tuple(pred.shape)} and "
            f"{tuple(target.shape)}"
        )


def _reduce(x: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "mean":
        return x.mean()
    if reduction == "none":
        return x
    raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def mpjpe(pred: torch.Tensor, target: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Mean per-joint position error: mean Euclidean distance over joints (protocol 1).

    Example:
        >>> round(mpjpe(torch.zeros(2, 17, 3), torch.ones(2, 17, 3)).item(), 4)  # sqrt(3)
        1.7321
    """
    _check_pair(pred, target)
    return _reduce(torch.linalg.vector_norm(pred - target, dim=-1).mean(-1), reduction)


def procrustes_align(pred: torch.Tensor, target: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """``pred (..., J, 3)`` moved by the similarity transform (scale, rotation, translation) that
    best fits ``target`` per pose, with the reflection fix (a proper rotation, det = +1).
    Batched SVD over all leading dims."""
    _check_pair(pred, target)
    mu_x = target.mean(-2, keepdim=True)
    mu_y = pred.mean(-2, keepdim=True)
    x0, y0 = target - mu_x, pred - mu_y
    norm_x = x0.square().sum((-2, -1), keepdim=True).sqrt().clamp_min(eps)
    norm_y = y0.square().sum((-2, -1), keepdim=True).sqrt().clamp_min(eps)
    x0, y0 = x0 / norm_x, y0 / norm_y
    h = x0.transpose(-1, -2) @ y0  # (..., 3, 3)
    u, s, vt = torch.linalg.svd(h)
    v = vt.transpose(-1, -2)
    # Reflection fix: flip the last singular vector where V U^T would be a reflection.
    sign = torch.sign(torch.linalg.det(v @ u.transpose(-1, -2)))
    sign = torch.where(sign == 0, torch.ones_like(sign), sign)
    fix = torch.ones_like(s)
    fix[..., -1] = sign
    v = v * fix.unsqueeze(-2)
    rot = v @ u.transpose(-1, -2)
    trace = (s * fix).sum(-1)[..., None, None]
    scale = trace * norm_x / norm_y
    trans = mu_x - scale * (mu_y @ rot)
    return scale * (pred @ rot) + trans


def p_mpjpe(pred: torch.Tensor, target: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """MPJPE after per-pose rigid alignment with scale (Procrustes, protocol 2)."""
    _check_pair(pred, target)
    aligned = procrustes_align(pred, target)
    return _reduce(torch.linalg.vector_norm(aligned - target, dim=-1).mean(-1), reduction)


def n_mpjpe(pred: torch.Tensor, target: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """MPJPE after the least-squares per-pose scale of ``pred`` (no rotation or translation)."""
    _check_pair(pred, target)
    norm_pred = pred.square().sum(-1).mean(-1, keepdim=True)
    norm_tgt = (target * pred).sum(-1).mean(-1, keepdim=True)
    scale = norm_tgt / norm_pred.clamp_min(1e-12)
    return mpjpe(scale.unsqueeze(-1) * pred, target, reduction)


def mpjve(pred: torch.Tensor, target: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Mean per-joint velocity error: MPJPE of the first differences along time (dim -3), in
    input units per frame. ``"none"`` gives ``(..., T - 1)``."""
    _check_pair(pred, target, min_dim=3)
    if pred.shape[-3] < 2:
        raise ValueError(
            f"mpjve needs at least 2 frames along dim -3, got shape {tuple(pred.shape)}"
        )
    vp = pred.diff(dim=-3)
    vt = target.diff(dim=-3)
    return _reduce(torch.linalg.vector_norm(vp - vt, dim=-1).mean(-1), reduction)


def bone_length_std(
    pred: torch.Tensor, skeleton: Skeleton, reduction: str = "mean"
) -> torch.Tensor:
    """Standard deviation over time (dim -3, population std) of each bone's length in
    ``pred (..., T, J, 3)``; ``"none"`` gives ``(..., S)``. Zero for a rigid skeleton."""
    if not isinstance(pred, torch.Tensor):
        raise TypeError(f"pred must be a torch.Tensor, got {type(pred).__name__}")
    if pred.dim() < 3 or pred.shape[-1] != 3:
        raise ValueError(f"pred must have shape (..., T, J, 3), got {tuple(pred.shape)}")
    lengths = bone_lengths(pred, skeleton)  # (..., T, S)
    return _reduce(lengths.std(dim=-2, correction=0), reduction)


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
