"""A monocular person's root trajectory in the camera frame, as pure batched tensor functions.

A lifter predicts root-relative joints; where the person is follows from the 2D keypoints: the
translation that best puts the predicted joints on the camera rays of their keypoints
(:func:`root_translation`, the least-squares step of
:func:`tensorpose.ops.camera.fit_to_rays`, one 3 x 3 solve per frame, all frames at once), then
a zero-phase low-pass over time (:func:`lowpass_trajectory`, Butterworth ``filtfilt``). The
depth is only known up to the scale of the predicted skeleton: a skeleton 5% too small puts the
person 5% too close (:func:`tensorpose.metrics.pose3d.trajectory_errors` measures a trajectory
against a reference after one global scale).

Conventions (OpenCV): camera ``x`` right, ``y`` down, ``z`` forward, metres.
"""

from __future__ import annotations

import torch

from ._checks import check_last_dims, check_tensor
from .butterworth import butterworth, filtfilt
from .camera import fit_to_rays

__all__ = ["lowpass_trajectory", "path_length", "root_translation"]


def root_translation(
    joints: torch.Tensor, rays: torch.Tensor, weights: torch.Tensor | None = None
) -> torch.Tensor:
    """Per frame, the translation ``t (..., 3)`` that best places ``joints`` on their rays.

    For root-relative ``joints`` (root at the origin) ``t`` is the root's position in the
    camera frame. Frames where fewer than two joints have a positive weight are fitted with
    every joint at weight one (e.g. frames whose joints were all bridged in time).

    Args:
        joints: ``(..., J, 3)`` root-relative camera-frame joints, metres.
        rays: ``(..., J, 2)`` normalised image coordinates ``K^-1 [u, v, 1]`` (undistorted).
        weights: ``(..., J)`` non-negative (e.g. 1 for detected joints, 0 for bridged ones);
            ``None``: all ones.

    Example:
        >>> P = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.5, 0.2]], dtype=torch.float64)
        >>> t0 = torch.tensor([0.1, -0.2, 4.0], dtype=torch.float64)
        >>> rays = (P + t0)[:, :2] / (P + t0)[:, 2:]
        >>> root_translation(P[None], rays[None])
        tensor([[ 0.1000, -0.2000,  4.0000]], dtype=torch.float64)
    """
    check_tensor("joints", joints, 2)
    check_last_dims("joints", joints, (3,), "x, y, z")
    w = torch.ones_like(joints[..., 0]) if weights is None else weights.to(joints)
    if w.shape != joints.shape[:-1]:
        raise ValueError(
            f"weights must have shape {tuple(joints.shape[:-1])}, got {tuple(w.shape)}"
        )
    few = (w > 0).sum(-1, keepdim=True) < 2
    w = torch.where(few, torch.ones_like(w), w)
    return fit_to_rays(joints, rays, w)[1]


def lowpass_trajectory(
    trajectory: torch.Tensor,
    fps: float,
    cutoff: float = 6.0,
    depth_cutoff: float | None = None,
    order: int = 2,
) -> torch.Tensor:
    """Zero-phase Butterworth low-pass of ``trajectory (..., T, 3)`` over ``T``
    (:func:`tensorpose.ops.butterworth.filtfilt`: ``order`` forward and backward, so
    ``2 * order`` in effect; edges padded by odd reflection).

    With ``depth_cutoff`` the camera-frame point is filtered as its ray ``x / z, y / z`` (at
    ``cutoff``) and its depth ``z`` (at ``depth_cutoff``), then put back together: a monocular
    fit knows the ray well (from the 2D) and the depth poorly (from the predicted skeleton's
    size), so the depth can be smoothed harder without lagging the sideways motion.

    A signal is returned unchanged where ``T < 3`` or its cutoff is not below the Nyquist
    frequency ``fps / 2`` (nothing to remove).
    """
    check_tensor("trajectory", trajectory, 2)
    check_last_dims("trajectory", trajectory, (3,), "x, y, z")
    if depth_cutoff is None:
        return _lowpass(trajectory, fps, cutoff, order)
    z = trajectory[..., 2:]
    ray = _lowpass(trajectory[..., :2] / z, fps, cutoff, order)
    depth = _lowpass(z, fps, depth_cutoff, order)
    return torch.cat([ray * depth, depth], -1)


def _lowpass(x: torch.Tensor, fps: float, cutoff: float, order: int) -> torch.Tensor:
    """``x (..., T, D)`` through a zero-phase low-pass (unchanged where it cannot be)."""
    T = x.shape[-2]
    if T < 3 or cutoff >= fps / 2:
        return x
    b, a = butterworth(order, cutoff, fps)
    return filtfilt(x, b, a, min(3 * max(len(a), len(b)), T - 1)).to(x)


def path_length(trajectory: torch.Tensor) -> torch.Tensor:
    """Distance travelled ``(...)``: the sum of the steps' lengths of ``trajectory (..., T, 3)``
    (non-finite steps left out)."""
    check_tensor("trajectory", trajectory, 2)
    step = torch.linalg.vector_norm(trajectory.diff(dim=-2), dim=-1)
    return step.nan_to_num(0.0, 0.0, 0.0).sum(-1)
