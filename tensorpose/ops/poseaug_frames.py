"""Body frames of a pose (pelvis, thorax): the coordinates ``(out, up, fwd)`` in which the pose
augmentation tables are written.

Frames and signs. Body frames have columns ``(out, up, fwd)``: ``left`` is from the right to the
left hip (pelvis frame) or shoulder (thorax frame), ``up`` from the pelvis to the spine (or from
the thorax to the neck) made orthogonal to ``left``, ``fwd = left x up`` (the way the body
faces). For a joint of the right side ``out = -left``, so tables read the same for both sides and
left/right parameters act as mirror images. Angles are radians in every function (tables are in
degrees, for reading).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from ..skeleton import Skeleton
from ._poseaug_base import _cached, _check_joints, _names_index
from ._vec3 import Vec, _axpy, _cross, _dot, _select, _stack, _sub, _unit, _vec

__all__ = ["H36M17_FRAMES", "body_frames"]


H36M17_FRAMES: dict[str, tuple[str, str, str, str]] = {
    "pelvis": ("l_hip", "r_hip", "pelvis", "spine"),
    "thorax": ("l_shoulder", "r_shoulder", "thorax", "neck"),
}
"""Body frames as ``(left joint, right joint, lower joint, upper joint)``: ``left`` axis from the
right to the left joint, ``up`` from lower to upper made orthogonal to it, ``fwd = left x up``."""


def _frame_axes(p: Vec, skeleton, frames) -> tuple[Vec, Vec, Vec]:
    """``left, up, fwd`` of joint components ``p``, each with ``len(frames)`` in the last dim."""
    idx = _cached(
        skeleton,
        ("poseaug_frames", tuple(frames.items()), p[0].device),
        lambda: torch.tensor(
            [_names_index(skeleton, q, "frames") for q in frames.values()], device=p[0].device
        ).T.contiguous(),
    )  # (4, Fr)
    left = _unit(_sub(_select(p, idx[0]), _select(p, idx[1])))
    up = _sub(_select(p, idx[3]), _select(p, idx[2]))
    up = _unit(_axpy(-_dot(up, left), left, up))
    return left, up, _cross(left, up)


def body_frames(
    joints: torch.Tensor,
    skeleton: Skeleton,
    frames: Mapping[str, tuple[str, str, str, str]] = H36M17_FRAMES,
) -> torch.Tensor:
    """Orthonormal body frames of a pose.

    Args:
        joints: ``(..., J, 3)``.
        frames: name -> ``(left joint, right joint, lower joint, upper joint)``.

    Returns:
        ``(..., len(frames), 3, 3)``: per frame, columns ``left, up, fwd`` (right-handed), in
        the order of ``frames``.
    """
    _check_joints("joints", joints, skeleton)
    return torch.stack([_stack(v) for v in _frame_axes(_vec(joints), skeleton, frames)], -1)
