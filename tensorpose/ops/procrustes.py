"""Batched similarity (Procrustes) alignment of point sets, with the reflection fix."""

from __future__ import annotations

import torch

__all__ = ["procrustes_align"]


def procrustes_align(pred: torch.Tensor, target: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """``pred`` moved by the similarity transform (scale, rotation, translation) that best fits
    ``target`` per pose, with the reflection fix (a proper rotation, det = +1). One batched SVD
    over all leading dims.

    Args:
        pred: ``(..., J, 3)`` points to move.
        target: ``(..., J, 3)`` points to fit, the same shape.
        eps: floor of each centred point set's norm (degenerate poses stay finite).

    Returns:
        ``(..., J, 3)`` the aligned ``pred``.

    Example:
        >>> t = torch.randn(4, 17, 3, dtype=torch.float64)
        >>> p = 2.0 * t + 1.0  # a scaled, shifted copy aligns exactly
        >>> bool(torch.allclose(procrustes_align(p, t), t))
        True
    """
    for name, x in (("pred", pred), ("target", target)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() < 2 or x.shape[-1] != 3:
            raise ValueError(f"{name} must have shape (..., J, 3), got {tuple(x.shape)}")
    if pred.shape != target.shape:
        raise ValueError(
            f"pred and target must have the same shape, got {tuple(pred.shape)} and "
            f"{tuple(target.shape)}"
        )
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
