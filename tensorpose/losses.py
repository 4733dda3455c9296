"""Losses as functions (Modules only where state is needed).

3D lifting: MPJPE, and for the kinematic head a bone-length term and a bone-direction term
("Deep Kinematics Analysis").

2D pose: the visibility-masked MSE of DeepPose (autograd and an explicit ``autograd.Function``
backward, which the DeepPose articles compare), SimpleBaseline's weighted heatmap MSE, and
CenterNet's penalty-reduced focal loss and sparse L1 regression losses.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .metrics.pose3d import mpjpe
from .ops.heatmap import gather_features
from .ops.kinematics import decompose
from .skeleton import Skeleton

__all__ = [
    "MaskedMSEFunction",
    "bone_direction_loss",
    "bone_length_loss",
    "bone_weights",
    "centernet_loss",
    "focal_loss",
    "heatmap_mse",
    "masked_mse",
    "masked_mse_explicit",
    "mpjpe_loss",
    "reg_l1_loss",
]


def _check_mse(pred: torch.Tensor, target: torch.Tensor, visibility: torch.Tensor) -> None:
    if pred.shape != target.shape:
        raise ValueError(
            f"pred and target must have the same shape, got {tuple(pred.shape)} and "
            f"{tuple(target.shape)}"
        )
    if pred.dim() < 2 or visibility.shape != pred.shape[:-1]:
        raise ValueError(
            f"visibility must have shape {tuple(pred.shape[:-1])} (pred without its last dim), "
            f"got {tuple(visibility.shape)}"
        )


def masked_mse(pred: torch.Tensor, target: torch.Tensor, visibility: torch.Tensor) -> torch.Tensor:
    """Squared error summed over the visible joints, divided by their number.

    ``sum_j v_j ||pred_j - target_j||^2 / max(1, sum_j v_j)`` with ``v_j = visibility_j > 0``.

    Args:
        pred: ``(..., K, D)`` predicted coordinates.
        target: ``(..., K, D)``.
        visibility: ``(..., K)``.

    Returns:
        a scalar (autograd builds the backward).
    """
    _check_mse(pred, target, visibility)
    m = (visibility > 0).to(pred.dtype)
    diff = (pred - target) * m.unsqueeze(-1)
    return diff.square().sum() / m.sum().clamp_min(1)


class MaskedMSEFunction(torch.autograd.Function):
    """:func:`masked_mse` with a hand-written backward: ``d loss / d pred = 2 g v (pred -
    target) / n``; ``target`` gets the negative (the visibility gets none)."""

    @staticmethod
    def forward(ctx, pred, target, visibility):
        m = (visibility > 0).to(pred.dtype).unsqueeze(-1)
        diff = (pred - target) * m
        n = m.sum().clamp_min(1)
        ctx.save_for_backward(diff, n)
        return diff.square().sum() / n

    @staticmethod
    def backward(ctx, grad):
        diff, n = ctx.saved_tensors
        g = diff * (2 * grad / n)
        return (
            g if ctx.needs_input_grad[0] else None,
            -g if ctx.needs_input_grad[1] else None,
            None,
        )


def masked_mse_explicit(
    pred: torch.Tensor, target: torch.Tensor, visibility: torch.Tensor
) -> torch.Tensor:
    """:func:`masked_mse` through :class:`MaskedMSEFunction` (explicit backward)."""
    _check_mse(pred, target, visibility)
    return MaskedMSEFunction.apply(pred, target, visibility)


def heatmap_mse(pred: torch.Tensor, target: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """SimpleBaseline's joints MSE: ``0.5 * mean((w (pred - target))^2)`` over batch, joints
    and pixels.

    Args:
        pred, target: ``(B, K, H, W)``.
        weights: ``(B, K)`` target weights (0 for joints without a target).
    """
    if pred.shape != target.shape or weights.shape != pred.shape[:2]:
        raise ValueError(
            f"expected pred/target (B, K, H, W) and weights (B, K); got {tuple(pred.shape)}, "
            f"{tuple(target.shape)}, {tuple(weights.shape)}"
        )
    w = weights.to(pred.dtype)[..., None, None]
    return 0.5 * ((pred - target) * w).square().mean()


def focal_loss(
    logits: torch.Tensor, target: torch.Tensor, alpha: float = 2.0, beta: float = 4.0
) -> torch.Tensor:
    """CenterNet's penalty-reduced pixel-wise focal loss ("Objects as Points", eq. 1).

    ``-1/N sum { (1 - p)^alpha log p           where target == 1
               { (1 - y)^beta p^alpha log(1 - p) otherwise``

    with ``p = sigmoid(logits)`` (log-probabilities computed stably from the logits) and ``N``
    the number of target peaks (at least 1; no host synchronisation).

    Args:
        logits: ``(B, C, H, W)`` raw outputs.
        target: same shape, gaussian-splatted targets in ``[0, 1]``.
    """
    if logits.shape != target.shape:
        raise ValueError(
            f"logits and target must have the same shape, got {tuple(logits.shape)} and "
            f"{tuple(target.shape)}"
        )
    p = torch.sigmoid(logits)
    pos = target.eq(1).to(logits.dtype)
    log_p, log_1mp = F.logsigmoid(logits), F.logsigmoid(-logits)
    pos_loss = log_p * (1 - p).pow(alpha) * pos
    neg_loss = log_1mp * p.pow(alpha) * (1 - target).pow(beta) * (1 - pos)
    return -(pos_loss.sum() + neg_loss.sum()) / pos.sum().clamp_min(1)


def reg_l1_loss(
    output: torch.Tensor, mask: torch.Tensor, index: torch.Tensor, target: torch.Tensor
) -> torch.Tensor:
    """CenterNet's sparse L1: the output map read at ``index`` against ``target`` where
    ``mask``; summed and divided by the number of masked values (+1e-4).

    Args:
        output: ``(B, C, H, W)``.
        mask: ``(B, N)`` or ``(B, N, C)``.
        index: ``(B, N)`` flat positions.
        target: ``(B, N, C)``.
    """
    pred = gather_features(output, index)
    m = mask.to(pred.dtype)
    if m.dim() == 2:
        m = m.unsqueeze(-1).expand_as(pred)
    return F.l1_loss(pred * m, target * m, reduction="sum") / (m.sum() + 1e-4)


def centernet_loss(
    outputs: dict[str, torch.Tensor],
    targets: dict[str, torch.Tensor],
    weights: dict[str, float] | None = None,
) -> dict[str, torch.Tensor]:
    """CenterNet multi-person pose loss from head outputs and
    :func:`tensorpose.ops.heatmap.centernet_targets`.

    Outputs (logits for the heatmaps): ``heatmap (B, 1, H, W)``, ``size``, ``offset``
    ``(B, 2, H, W)``, ``joint_offset (B, 2K, H, W)``, ``joint_heatmaps (B, K, H, W)``,
    ``joint_sub_offset (B, 2, H, W)``. Default weights as the reference: heatmaps 1, size 0.1,
    offsets 1, joint offsets 1.

    Returns:
        dict with ``loss`` (weighted sum) and each term.
    """
    w = {
        "heatmap": 1.0,
        "size": 0.1,
        "offset": 1.0,
        "joint_offset": 1.0,
        "joint_heatmaps": 1.0,
        "joint_sub_offset": 1.0,
    }
    w.update(weights or {})
    B, N, K = targets["joint_mask"].shape
    idx = targets["index"]
    jm = targets["joint_mask"]
    terms = {
        "heatmap": focal_loss(outputs["heatmap"], targets["heatmap"]),
        "size": reg_l1_loss(outputs["size"], targets["mask"], idx, targets["size"]),
        "offset": reg_l1_loss(outputs["offset"], targets["mask"], idx, targets["offset"]),
        "joint_offset": reg_l1_loss(
            outputs["joint_offset"],
            jm.repeat_interleave(2, dim=-1),
            idx,
            targets["joint_offset"].reshape(B, N, 2 * K),
        ),
        "joint_heatmaps": focal_loss(outputs["joint_heatmaps"], targets["joint_heatmaps"]),
        "joint_sub_offset": reg_l1_loss(
            outputs["joint_sub_offset"],
            jm.reshape(B, N * K),
            targets["joint_index"].reshape(B, N * K),
            targets["joint_sub_offset"].reshape(B, N * K, 2),
        ),
    }
    terms["loss"] = sum(w[k] * v for k, v in terms.items())
    return terms


def _weighted_mean(x: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """``x.mean()``, or ``sum(weights * x) / sum(weights)`` (``weights`` broadcast to ``x``;
    0 when every weight is 0)."""
    if weights is None:
        return x.mean()
    w = weights.to(x.dtype).expand_as(x)
    return (w * x).sum() / w.sum().clamp_min(torch.finfo(x.dtype).tiny)


def bone_weights(weights: torch.Tensor, skeleton: Skeleton) -> torch.Tensor:
    """Joint weights ``(..., J)`` -> bone weights ``(..., S)``: the product of each bone's
    parent's and child's weights (a bone counts only where both its ends count)."""
    parent = skeleton.tensor("parents", weights.device)
    child = skeleton.tensor("children", weights.device)
    return weights.index_select(-1, parent) * weights.index_select(-1, child)


def mpjpe_loss(
    pred: torch.Tensor, target: torch.Tensor, weights: torch.Tensor | None = None
) -> torch.Tensor:
    """Mean Euclidean joint distance of ``(..., J, 3)`` poses (VideoPose3D's training loss);
    with ``weights (..., J)`` (broadcast; e.g. 0 for joints a take's skeleton does not place
    like the target's) the weighted mean over all poses and joints."""
    if weights is None:
        return mpjpe(pred, target, "mean")
    return _weighted_mean(torch.linalg.vector_norm(pred - target, dim=-1), weights)


def bone_length_loss(
    lengths: torch.Tensor,
    target: torch.Tensor,
    skeleton: Skeleton,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean absolute error between predicted bone lengths ``(B, 1, S, 1)`` (one per sequence) and
    the lengths of ``target (B, T, J, 3)`` (averaged over its frames); with joint ``weights
    (B, 1, J)`` the mean weighted by :func:`bone_weights`."""
    true_lengths, _ = decompose(target, skeleton)  # (B, T, S, 1)
    err = (lengths - true_lengths.mean(-3, keepdim=True)).abs()
    return _weighted_mean(
        err, None if weights is None else bone_weights(weights, skeleton)[..., None]
    )


def bone_direction_loss(
    directions: torch.Tensor,
    target: torch.Tensor,
    skeleton: Skeleton,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean Euclidean distance between predicted unit bone directions ``(B, T, S, 3)`` and those
    of ``target (B, T, J, 3)``; with joint ``weights (B, 1, J)`` the mean weighted by
    :func:`bone_weights`."""
    _, true_dirs = decompose(target, skeleton)
    err = torch.linalg.vector_norm(directions - true_dirs, dim=-1)
    return _weighted_mean(err, None if weights is None else bone_weights(weights, skeleton))
