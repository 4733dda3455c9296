"""Small-vector algebra for the pose augmentation ops: 3-vectors and quaternions as tuples of
their component tensors.

Vectors are tuples of their 3 component tensors (quaternions: 4, w first), each with the
joints/bones in the last dim: per-component arithmetic on contiguous tensors, no stacking, no
reduction over a size-3 dim (both slow on CPU). Also the two layout changes between joints
``(..., J, 3)`` and bone components (one product with a constant skeleton matrix each).
"""

from __future__ import annotations

import torch

from ..skeleton import Skeleton

Vec = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
Quat = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def _vec(x: torch.Tensor) -> Vec:
    """``(..., n, 3)`` -> contiguous components ``(..., n)`` (one copy)."""
    a, b, c = x.transpose(-1, -2).contiguous().unbind(-2)
    return a, b, c


def _bones_t(joints: torch.Tensor, skeleton: Skeleton) -> Vec:
    """Bone vectors as contiguous components ``(..., S)``: one product with the ``(J, S)``
    incidence matrix on the coordinate-major joints."""
    inc = skeleton.bone_matrix(1, joints.device, joints.dtype)  # (J, S): child +1, parent -1
    a, b, c = (joints.transpose(-1, -2) @ inc).unbind(-2)
    return a, b, c


def _compose_t(bones: Vec, root: torch.Tensor, skeleton: Skeleton) -> torch.Tensor:
    """Joints ``(..., J, 3)`` (a transposed view of coordinate-major memory) from bone
    components and the root ``(..., 3)``: one product with the ``(S, J)`` path matrix."""
    path = skeleton.tensor("path", root.device, root.dtype)  # (J, S)
    joints_t = torch.stack(bones, -2) @ path.T + root.unsqueeze(-1)  # (..., 3, J)
    return joints_t.transpose(-1, -2)


def _stack(v: Vec) -> torch.Tensor:
    return torch.stack(v, -1)


def _dot(a: Vec, b: Vec) -> torch.Tensor:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _cross(a: Vec, b: Vec) -> Vec:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _scale(a: Vec, s: torch.Tensor | float) -> Vec:
    return (a[0] * s, a[1] * s, a[2] * s)


def _sub(a: Vec, b: Vec) -> Vec:
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def _axpy(s: torch.Tensor, a: Vec, b: Vec) -> Vec:
    """``s * a + b``."""
    return (s * a[0] + b[0], s * a[1] + b[1], s * a[2] + b[2])


def _combo(a: Vec, b: Vec, c: Vec, w: torch.Tensor) -> Vec:
    """``w[:, 0] a + w[:, 1] b + w[:, 2] c`` with ``w (n, 3)`` per last-dim entry."""
    w0, w1, w2 = w.unbind(-1)
    return tuple(a[i] * w0 + b[i] * w1 + c[i] * w2 for i in range(3))  # over 3 coordinates


def _where(m: torch.Tensor, a: tuple, b: tuple) -> tuple:
    return tuple(torch.where(m, x, y) for x, y in zip(a, b, strict=True))


def _select(a: tuple, idx: torch.Tensor) -> tuple:
    return tuple(x.index_select(-1, idx) for x in a)


def _norm(a: Vec) -> torch.Tensor:
    return _dot(a, a).sqrt()


def _unit(a: Vec, eps: float = 1e-12) -> Vec:
    return _scale(a, 1 / _norm(a).clamp_min(eps))


def _angle(a: Vec, b: Vec) -> torch.Tensor:
    """Angle between unit vectors, accurate near 0 and pi (``atan2(|a x b|, a . b)``)."""
    return torch.atan2(_norm(_cross(a, b)), _dot(a, b))


def _quat_axis_angle(axis: Vec, angle: torch.Tensor) -> Quat:
    """Unit (or zero) ``axis`` and ``angle`` -> quaternion."""
    s = (angle / 2).sin()
    return ((angle / 2).cos(), axis[0] * s, axis[1] * s, axis[2] * s)


def _quat_from_rotvec(v: Vec) -> Quat:
    """Axis-angle -> quaternion; exactly the identity at zero."""
    n = _norm(v)
    return _quat_axis_angle(_scale(v, 1 / n.clamp_min(1e-30)), n)


def _quat_between(a: Vec, b: Vec) -> Quat:
    """The smallest rotation taking unit ``a`` to unit ``b``: ``normalize(1 + a.b, a x b)``
    (no trigonometry; exactly the identity for ``a == b``; undefined for ``b == -a``, which the
    limits never ask for)."""
    w = 1 + _dot(a, b)
    x, y, z = _cross(a, b)
    n = (w * w + x * x + y * y + z * z).sqrt().clamp_min(1e-30)
    return (w / n, x / n, y / n, z / n)


def _quat_mul(p: Quat, q: Quat) -> Quat:
    """Hamilton product ``p q`` (rotate by ``q``, then by ``p``)."""
    pw, px, py, pz = p
    qw, qx, qy, qz = q
    return (
        pw * qw - px * qx - py * qy - pz * qz,
        pw * qx + px * qw + py * qz - pz * qy,
        pw * qy - px * qz + py * qw + pz * qx,
        pw * qz + px * qy - py * qx + pz * qw,
    )


def _quat_rotate(q: Quat, v: Vec) -> Vec:
    """Rotate ``v`` by unit ``q``: ``v + w t + q_v x t`` with ``t = 2 q_v x v``."""
    u = q[1:]
    t = _scale(_cross(u, v), 2.0)
    return tuple(v[i] + q[0] * t[i] + c for i, c in enumerate(_cross(u, t)))  # 3 coordinates
