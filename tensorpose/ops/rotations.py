"""Rotation conversions: Euler angles (any axis order), axis-angle, matrices. Radians.

Matrices act on column vectors: ``v' = R @ v``.
"""

from __future__ import annotations

import torch

from ._checks import check_last_dims, check_tensor

__all__ = ["axis_angle_to_matrix", "euler_to_matrix", "matrix_to_axis_angle"]


def _axis_matrix(axis: str, angle: torch.Tensor) -> torch.Tensor:
    c, s = torch.cos(angle), torch.sin(angle)
    one, zero = torch.ones_like(angle), torch.zeros_like(angle)
    if axis == "X":
        rows = (one, zero, zero, zero, c, -s, zero, s, c)
    elif axis == "Y":
        rows = (c, zero, s, zero, one, zero, -s, zero, c)
    else:
        rows = (c, -s, zero, s, c, zero, zero, zero, one)
    return torch.stack(rows, -1).reshape(*angle.shape, 3, 3)


def euler_to_matrix(angles: torch.Tensor, order: str) -> torch.Tensor:
    """Intrinsic Euler angles to matrices: ``R = R_{order[0]} @ R_{order[1]} @ R_{order[2]}``.

    This is the BVH convention: channels ``Zrotation Xrotation Yrotation`` give ``order="ZXY"``
    and ``angles[..., i]`` is the angle of the i-th listed channel.

    Args:
        angles: ``(..., 3)`` radians, in the order of ``order``.
        order: three letters from ``X``, ``Y``, ``Z`` (e.g. ``"ZXY"``; repeats such as ``"ZYZ"``
            are allowed).

    Returns:
        ``(..., 3, 3)``.

    Example:
        >>> R = euler_to_matrix(torch.tensor([0.0, 0.0, torch.pi / 2]), "XYZ")
        >>> v = R @ torch.tensor([1.0, 0.0, 0.0])
        >>> torch.allclose(v, torch.tensor([0.0, 1.0, 0.0]), atol=1e-6)
        True
    """
    check_tensor("angles", angles)
    check_last_dims("angles", angles, (3,), "three Euler angles")
    order = order.upper()
    if len(order) != 3 or any(a not in "XYZ" for a in order):
        raise ValueError(f"order must be three letters of X, Y, Z, got {order!r}")
    R = _axis_matrix(order[0], angles[..., 0])
    R = R @ _axis_matrix(order[1], angles[..., 1])
    return R @ _axis_matrix(order[2], angles[..., 2])


def axis_angle_to_matrix(axis_angle: torch.Tensor) -> torch.Tensor:
    """Rodrigues' formula: ``axis_angle (..., 3)`` (axis * angle) -> ``(..., 3, 3)``.

    Smooth at zero angle (Taylor terms below 1e-4 rad keep gradients finite).
    """
    check_tensor("axis_angle", axis_angle)
    check_last_dims("axis_angle", axis_angle, (3,), "axis * angle")
    sq = (axis_angle * axis_angle).sum(-1)
    small = sq < 1e-8
    safe = torch.where(small, torch.ones_like(sq), sq)
    theta = safe.sqrt()
    a = torch.where(small, 1 - sq / 6, torch.sin(theta) / theta)
    b = torch.where(small, 0.5 - sq / 24, (1 - torch.cos(theta)) / safe)
    x, y, z = axis_angle.unbind(-1)
    zero = torch.zeros_like(x)
    K = torch.stack((zero, -z, y, z, zero, -x, -y, x, zero), -1).reshape(*x.shape, 3, 3)
    eye = torch.eye(3, dtype=axis_angle.dtype, device=axis_angle.device)
    return eye + a[..., None, None] * K + b[..., None, None] * (K @ K)


def matrix_to_axis_angle(matrix: torch.Tensor) -> torch.Tensor:
    """Rotation matrices ``(..., 3, 3)`` -> axis-angle ``(..., 3)`` with angle in ``[0, pi]``.

    Uses the quaternion route (stable near 0 and pi).
    """
    check_tensor("matrix", matrix, 2)
    check_last_dims("matrix", matrix, (3, 3), "rotation matrix")
    m = matrix
    diag = torch.stack(
        (
            1 + m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2],
            1 + m[..., 0, 0] - m[..., 1, 1] - m[..., 2, 2],
            1 - m[..., 0, 0] + m[..., 1, 1] - m[..., 2, 2],
            1 - m[..., 0, 0] - m[..., 1, 1] + m[..., 2, 2],
        ),
        -1,
    )
    # Four candidate quaternions (w, x, y, z); pick the one with the largest pivot.
    q_abs = diag.clamp_min(0).sqrt()
    w = torch.stack(
        (
            torch.stack((q_abs[..., 0] ** 2, m[..., 2, 1] - m[..., 1, 2],
                         m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1]), -1),
            torch.stack((m[..., 2, 1] - m[..., 1, 2], q_abs[..., 1] ** 2,
                         m[..., 1, 0] + m[..., 0, 1], m[..., 0, 2] + m[..., 2, 0]), -1),
            torch.stack((m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] + m[..., 0, 1],
                         q_abs[..., 2] ** 2, m[..., 2, 1] + m[..., 1, 2]), -1),
            torch.stack((m[..., 1, 0] - m[..., 0, 1], m[..., 2, 0] + m[..., 0, 2],
                         m[..., 2, 1] + m[..., 1, 2], q_abs[..., 3] ** 2), -1),
        ),
        -2,
    )  # fmt: skip
    candidates = w / (2.0 * q_abs[..., None].clamp_min(0.1))
    best = q_abs.argmax(-1)
    q = candidates.gather(-2, best[..., None, None].expand(*best.shape, 1, 4)).squeeze(-2)
    q = torch.where(q[..., :1] < 0, -q, q)  # w >= 0: angle in [0, pi]
    xyz = q[..., 1:]
    sin_half = torch.linalg.vector_norm(xyz, dim=-1, keepdim=True)
    angle = 2 * torch.atan2(sin_half, q[..., :1])
    small = sin_half < 1e-6
    scale = torch.where(small, 2 / q[..., :1].clamp_min(1e-6), angle / sin_half.clamp_min(1e-12))
    return xyz * scale
