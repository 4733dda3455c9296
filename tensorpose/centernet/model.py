"""The CenterNet pose network ("Objects as Points") and its decoder: head outputs -> people.

- :func:`build_model`: small ResNet + deconvolution neck to stride :data:`STRIDE` and the
  CenterNet heads (:func:`~tensorpose.models.heads.centernet_pose_net`);
- :func:`decode_people`: sigmoid, 3x3 max-pool peaks, ``topk``, gather
  (:func:`~tensorpose.ops.heatmap.centernet_decode`), map pixels -> input pixels -> image pixels
  (inverse letterbox/augmentation matrix), OKS-NMS over all images of the batch at once
  (:func:`batched_oks_nms`).

Input geometry, targets, loss and evaluation around the network are task logic:
:class:`tensorpose.tasks.centernet.CenterNet`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..models.heads import PoseNet, centernet_pose_net
from ..ops.affine import invert_affine, transform_points
from ..ops.heatmap import centernet_decode
from ..ops.nms import COCO_SIGMAS, oks_nms

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "STRIDE",
    "batched_oks_nms",
    "build_model",
    "decode_people",
]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
STRIDE = 4  # the deconvolution neck of centernet_pose_net: stride 32 -> 4


def build_model(num_joints: int = 17, depth: int = 18, width: int = 32) -> PoseNet:
    """The CenterNet pose network: small ResNet (``depth`` 10/18, ``width`` stem channels),
    deconvolution neck to stride 4, heads ``heatmap, size, offset, joint_offset,
    joint_heatmaps, joint_sub_offset`` (see :class:`~tensorpose.models.heads.CenterNetHead`)."""
    return centernet_pose_net(num_joints, depth, width)


def decode_people(
    outputs: dict[str, torch.Tensor],
    matrices: torch.Tensor,
    stride: int = STRIDE,
    top_k: int = 20,
    joint_threshold: float = 0.1,
    nms_threshold: float = 0.9,
    sigmas: Sequence[float] = COCO_SIGMAS,
) -> dict:
    """People in image pixels from head outputs, all on the device.

    Args:
        outputs: the model's dict (logits for the two heatmaps), maps ``(S/4, S/4)``.
        matrices: ``(B, 2, 3)`` image -> input matrices of the batch.
        stride: input pixels per map pixel.
        top_k: people decoded per image.
        joint_threshold: joint-heatmap peak score needed to snap a regressed joint to it.
        nms_threshold: OKS above which a lower-scored person is suppressed (``>= 1``: off).
        sigmas: per-joint OKS constants for the NMS.

    Returns:
        dict with ``scores (B, k)`` (centre peak), ``boxes (B, k, 4)`` ``x1, y1, x2, y2``,
        ``keypoints (B, k, K, 2)``, ``keypoint_scores (B, k, K)`` (the joint heatmap in the
        cell of the final joint position), ``keep (B, k)`` bool (survived OKS-NMS), all in
        image pixels, people in decreasing score per image.
    """
    heat = torch.sigmoid(outputs["heatmap"].float())
    joint_heat = torch.sigmoid(outputs["joint_heatmaps"].float())
    d = centernet_decode(
        heat,
        outputs["size"].float(),
        outputs["offset"].float(),
        outputs["joint_offset"].float(),
        joint_heat,
        outputs["joint_sub_offset"].float(),
        k=top_k,
        joint_threshold=joint_threshold,
    )
    B, k, K = d["keypoints"].shape[:3]
    H, W = joint_heat.shape[-2:]
    kp = d["keypoints"]
    # the cell that holds the joint (targets put integer positions at trunc(x))
    ix = kp[..., 0].floor().clamp(0, W - 1).long()
    iy = kp[..., 1].floor().clamp(0, H - 1).long()
    flat = (iy * W + ix).transpose(1, 2)  # (B, K, k)
    kscore = joint_heat.flatten(2).gather(2, flat).transpose(1, 2)
    inv = invert_affine(matrices.double())
    s = float(stride)
    kp_img = transform_points((kp.double() * s).reshape(B, k * K, 2), inv).reshape(B, k, K, 2)
    x1, y1, x2, y2 = (d["boxes"].double() * s).unbind(-1)
    corners = torch.stack(
        [torch.stack([x1, y1], -1), torch.stack([x2, y1], -1),
         torch.stack([x1, y2], -1), torch.stack([x2, y2], -1)], -2,
    )  # fmt: skip
    c = transform_points(corners.reshape(B, k * 4, 2), inv).reshape(B, k, 4, 2)
    boxes = torch.cat([c.amin(-2), c.amax(-2)], -1)
    area = ((boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1])).clamp_min(1.0)
    scores = d["scores"]
    if nms_threshold < 1:
        full = torch.cat([kp_img, kscore.double().unsqueeze(-1)], -1)
        keep = batched_oks_nms(full, scores, area, nms_threshold, sigmas)
    else:
        keep = torch.ones_like(scores, dtype=torch.bool)
    return {
        "scores": scores,
        "boxes": boxes.float(),
        "keypoints": kp_img.float(),
        "keypoint_scores": kscore,
        "keep": keep,
    }


# ---------------------------------------------------------------------- OKS-NMS
def batched_oks_nms(
    keypoints: torch.Tensor,
    scores: torch.Tensor,
    areas: torch.Tensor,
    threshold: float,
    sigmas: Sequence[float] = COCO_SIGMAS,
) -> torch.Tensor:
    """OKS-NMS within each image of a batch, in ONE call of the per-set NMS: each image's poses
    are shifted far from the others' (OKS across images underflows to 0), the ``batched_nms``
    trick for boxes.

    Args:
        keypoints: ``(B, k, K, 3)`` image pixels and scores.
        scores: ``(B, k)``.
        areas: ``(B, k)`` person areas (pixels^2).
        threshold: suppress a pose whose OKS with a better-scored one exceeds it.

    Returns:
        ``keep (B, k)`` bool.
    """
    B, k = scores.shape
    xy = keypoints[..., :2].double()
    a = areas.double()
    # 10 sqrt(area) apart at least: exp(-d^2 / ((2 sigma)^2 area)) < exp(-100 / 0.05) = 0
    gap = (xy.amax() - xy.amin()) + 10 * a.max().sqrt() + 1
    shift = (torch.arange(B, device=xy.device, dtype=xy.dtype) * gap).view(B, 1, 1, 1)
    flat = torch.cat([xy + shift, keypoints[..., 2:].double()], -1).reshape(B * k, -1, 3)
    idx = oks_nms(flat, scores.reshape(-1), a.reshape(-1), threshold, sigmas)
    keep = torch.zeros(B * k, dtype=torch.bool, device=scores.device)
    keep[idx] = True
    return keep.view(B, k)
