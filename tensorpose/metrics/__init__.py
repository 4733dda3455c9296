"""Metrics: 3D (:mod:`.pose3d`: MPJPE, P-MPJPE, N-MPJPE, MPJVE, bone-length std, trajectory
errors) and 2D (:mod:`.pose2d`: PCK, AUC, EPE, OKS, COCO AP through pycocotools)."""

from .pose2d import auc, bbox_size, coco_keypoint_ap, epe, joint_distance, oks, pck
from .pose3d import (
    bone_length_std,
    compare_with_reference,
    mpjpe,
    mpjve,
    n_mpjpe,
    p_mpjpe,
    trajectory_errors,
)

__all__ = [
    "auc",
    "bbox_size",
    "bone_length_std",
    "coco_keypoint_ap",
    "compare_with_reference",
    "epe",
    "joint_distance",
    "mpjpe",
    "mpjve",
    "n_mpjpe",
    "oks",
    "p_mpjpe",
    "pck",
    "trajectory_errors",
]
