"""Training losses (functions; no state). 3D lifting: MPJPE, and for the kinematic head a
bone-length term and a bone-direction term ("Deep Kinematics Analysis")."""

from __future__ import annotations

import torch

from .metrics import mpjpe
from .ops.kinematics import decompose
from .skeleton import Skeleton

__all__ = ["bone_direction_loss", "bone_length_loss", "mpjpe_loss"]


def mpjpe_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean Euclidean joint distance of ``(..., J, 3)`` poses (VideoPose3D's training loss)."""
    return mpjpe(pred, target, "mean")


def bone_length_loss(
    lengths: torch.Tensor, target: torch.Tensor, skeleton: Skeleton
) -> torch.Tensor:
    """Mean absolute error between predicted bone lengths ``(B, 1, S, 1)`` (one per sequence) and
    the lengths of ``target (B, T, J, 3)`` (averaged over its frames)."""
    true_lengths, _ = decompose(target, skeleton)  # (B, T, S, 1)
    return (lengths - true_lengths.mean(-3, keepdim=True)).abs().mean()


def bone_direction_loss(
    directions: torch.Tensor, target: torch.Tensor, skeleton: Skeleton
) -> torch.Tensor:
    """Mean Euclidean distance between predicted unit bone directions ``(B, T, S, 3)`` and those
    of ``target (B, T, J, 3)``."""
    _, true_dirs = decompose(target, skeleton)
    return torch.linalg.vector_norm(directions - true_dirs, dim=-1).mean()
