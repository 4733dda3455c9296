"""Non-maximum suppression as batched tensor functions: box NMS, per-class box NMS and OKS-NMS
of keypoint predictions.

Each function builds the whole pairwise overlap matrix (IoU or OKS) of the score-sorted
candidates at once, then solves the greedy suppression exactly with a Cluster-NMS-style
fixed-point iteration on its upper triangle (:func:`greedy_keep`); no Python loop over boxes.

Conventions, shared by all three (and by torchvision's ``nms`` for boxes):

- Candidates are visited in decreasing score order with a *stable* sort: of equal scores the
  lower index comes first (is kept first).
- A kept candidate suppresses a later one when their overlap is strictly greater than the
  threshold (``IoU > iou_threshold``); an overlap equal to the threshold keeps both. NaN
  overlaps (two zero-area boxes) suppress nothing.
- The result is the kept indices into the input, ``int64``, in that visiting order.

Memory is ``O(N^2)`` (``O(N^2 K)`` for OKS): meant for the hundreds to few thousands of
candidates of one image. The output size depends on the data, so each call reads back to the
host (one small read per fixed-point iteration): call it on a finished prediction, not inside
a training step.
"""

from __future__ import annotations

import torch

from ._checks import check_finite, check_tensor
from ._constants import constant

__all__ = [
    "COCO_SIGMAS",
    "batched_nms",
    "box_iou",
    "greedy_keep",
    "nms",
    "oks_matrix",
    "oks_nms",
]

COCO_SIGMAS = (
    0.026,
    0.025,
    0.025,
    0.035,
    0.035,
    0.079,
    0.079,
    0.072,
    0.072,
    0.062,
    0.062,
    0.107,
    0.107,
    0.087,
    0.087,
    0.089,
    0.089,
)
"""Per-keypoint OKS constants of the COCO-17 keypoints (equal to ``metrics2d.COCO_SIGMAS``;
``ops`` imports nothing above it, so the values live here too)."""


# ----------------------------------------------------------------------------- checks
def _check_threshold(name: str, value: float) -> float:
    if isinstance(value, torch.Tensor) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a Python number, got {type(value).__name__}")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value}")
    return float(value)


def _check_scores(scores: object, n: int, what: str) -> torch.Tensor:
    check_tensor("scores", scores)
    if scores.shape != (n,):
        raise ValueError(
            f"scores must have shape (N,) = ({n},) like {what}, got {tuple(scores.shape)}"
        )
    check_finite("scores", scores)
    return scores


def _check_boxes(boxes: object) -> torch.Tensor:
    check_tensor("boxes", boxes)
    if boxes.dim() != 2 or boxes.shape[1] != 4:
        raise ValueError(f"boxes must have shape (N, 4) (x1, y1, x2, y2), got {tuple(boxes.shape)}")
    check_finite("boxes", boxes)
    return boxes


def _check_keypoints(keypoints: object) -> torch.Tensor:
    check_tensor("keypoints", keypoints)
    if keypoints.dim() != 3 or keypoints.shape[2] != 3:
        raise ValueError(
            f"keypoints must have shape (N, K, 3) (x, y, score), got {tuple(keypoints.shape)}"
        )
    check_finite("keypoints", keypoints)
    return keypoints


def _check_areas(areas: object, n: int) -> torch.Tensor:
    check_tensor("areas", areas)
    if areas.shape != (n,):
        raise ValueError(
            f"areas must have shape (N,) = ({n},) like keypoints, got {tuple(areas.shape)}"
        )
    check_finite("areas", areas)
    return areas


# ----------------------------------------------------------------------------- core
def greedy_keep(suppress: torch.Tensor) -> torch.Tensor:
    """Exact greedy suppression from a pairwise suppression matrix.

    Candidates ``0 .. N-1`` are in visiting order (best first). ``suppress[i, j]`` says that
    ``i`` suppresses ``j`` if ``i`` is kept; only ``i < j`` is used. The greedy rule
    ``keep[j] = not any(keep[i] and suppress[i, j] for i < j)`` has exactly one solution,
    since ``keep[j]`` depends only on earlier entries.

    Solved Cluster-NMS style: start from "all kept" and iterate
    ``keep <- not any_i (A[i, j] and keep[i])`` on the strict upper triangle ``A`` until it
    stops changing. After ``t`` iterations the first ``t`` entries are final (induction on
    ``j``), so it stops after at most ``N`` iterations, and a state that does not change is a
    solution of the rule, hence the greedy result. Random boxes need a handful of iterations;
    a chain of boxes that each overlap only their neighbour needs about ``N`` (measured in
    ``benchmarks/nms.py``).

    Args:
        suppress: ``(N, N)`` bool.

    Returns:
        ``keep (N,)`` bool.
    """
    if not isinstance(suppress, torch.Tensor) or suppress.dtype != torch.bool:
        raise TypeError("suppress must be a bool torch.Tensor")
    if suppress.dim() != 2 or suppress.shape[0] != suppress.shape[1]:
        raise ValueError(f"suppress must have shape (N, N), got {tuple(suppress.shape)}")
    n = suppress.shape[0]
    # float32 counts are exact up to 2^24 suppressors; one GEMV per iteration
    A = torch.triu(suppress, diagonal=1).to(torch.float32)
    keep = torch.ones(n, dtype=torch.bool, device=suppress.device)
    # A loop over fixed-point iterations (at most N, usually a few), not over boxes; each
    # iteration reads one bool back to the host to test for the fixed point.
    while True:
        new = (keep.to(torch.float32) @ A) == 0
        if torch.equal(new, keep):
            return keep
        keep = new


def box_iou(boxes1: torch.Tensor, boxes2: torch.Tensor) -> torch.Tensor:
    """Pairwise IoU of ``x1, y1, x2, y2`` boxes, with torchvision's arithmetic (areas
    ``(x2 - x1) (y2 - y1)``, ``inter / (area1 + area2 - inter)``; two zero-area boxes give NaN).

    Args:
        boxes1: ``(N, 4)``; boxes2: ``(M, 4)``.

    Returns:
        ``(N, M)`` in the boxes' dtype.

    Example:
        >>> box_iou(torch.tensor([[0.0, 0.0, 2.0, 2.0]]), torch.tensor([[1.0, 0.0, 3.0, 2.0]]))
        tensor([[0.3333]])
    """
    a = _check_boxes(boxes1)
    b = _check_boxes(boxes2) if boxes2 is not boxes1 else a
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    w = (
        torch.minimum(a[:, None, 2], b[None, :, 2]) - torch.maximum(a[:, None, 0], b[None, :, 0])
    ).clamp_(min=0)
    h = (
        torch.minimum(a[:, None, 3], b[None, :, 3]) - torch.maximum(a[:, None, 1], b[None, :, 1])
    ).clamp_(min=0)
    inter = w.mul_(h)
    return inter / (area_a[:, None] + area_b[None, :] - inter)


def _sorted_order(scores: torch.Tensor) -> torch.Tensor:
    return torch.sort(scores, descending=True, stable=True).indices


def nms(boxes: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """Greedy non-maximum suppression of boxes (torchvision's ``nms`` semantics).

    Visits boxes in decreasing score order (stable: equal scores keep the lower index first),
    keeps a box unless a kept box overlaps it with ``IoU > iou_threshold``.

    Args:
        boxes: ``(N, 4)`` ``x1, y1, x2, y2``.
        scores: ``(N,)``.
        iou_threshold: in ``[0, 1]``.

    Returns:
        ``keep (M,)`` int64 indices into ``boxes``, in decreasing score order.

    Example:
        >>> boxes = torch.tensor([[0.0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30]])
        >>> nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5)
        tensor([0, 2])
    """
    _check_boxes(boxes)
    _check_scores(scores, boxes.shape[0], "boxes")
    thr = _check_threshold("iou_threshold", iou_threshold)
    order = _sorted_order(scores)
    b = boxes[order]
    keep = greedy_keep(box_iou(b, b) > thr)
    return order[keep]


def batched_nms(
    boxes: torch.Tensor, scores: torch.Tensor, idxs: torch.Tensor, iou_threshold: float
) -> torch.Tensor:
    """NMS within each category, all categories in one call.

    The same result as running :func:`nms` on each category alone and merging the kept
    indices in decreasing score order (stable). Boxes of different categories never suppress
    each other: the overlap matrix is masked by "same category", which is exact for any
    coordinates (torchvision's trick of shifting each category's boxes by ``idx * (max + 1)``
    reaches the same goal with one plain NMS, but rounds the shifted coordinates and assumes
    non-negative boxes; the masked matrix costs nothing extra here).

    Args:
        boxes: ``(N, 4)`` ``x1, y1, x2, y2``.
        scores: ``(N,)``.
        idxs: ``(N,)`` integer category (or image) of each box.
        iou_threshold: in ``[0, 1]``.

    Returns:
        ``keep (M,)`` int64 indices into ``boxes``, in decreasing score order.
    """
    _check_boxes(boxes)
    _check_scores(scores, boxes.shape[0], "boxes")
    if not isinstance(idxs, torch.Tensor):
        raise TypeError(f"idxs must be a torch.Tensor, got {type(idxs).__name__}")
    if idxs.shape != (boxes.shape[0],) or idxs.is_floating_point() or idxs.is_complex():
        raise ValueError(
            f"idxs must be an integer tensor of shape (N,) = ({boxes.shape[0]},) like boxes, "
            f"got {idxs.dtype} {tuple(idxs.shape)}"
        )
    thr = _check_threshold("iou_threshold", iou_threshold)
    order = _sorted_order(scores)
    b, c = boxes[order], idxs[order]
    keep = greedy_keep((box_iou(b, b) > thr) & (c[:, None] == c[None, :]))
    return order[keep]


def oks_matrix(
    keypoints: torch.Tensor,
    areas: torch.Tensor,
    sigmas: tuple[float, ...] | torch.Tensor = COCO_SIGMAS,
    vis_threshold: float | None = None,
) -> torch.Tensor:
    """Pairwise object keypoint similarity of predictions, as MMPose's ``oks_iou``.

    ``OKS[i, j] = mean_k exp(-e)``, ``e = d_k^2 / (2 sigma_k)^2 / ((a_i + a_j) / 2 + eps) / 2``
    with ``d_k`` the distance of joint ``k`` of the two predictions, ``a`` their areas (the mean
    of the two, so the matrix is symmetric) and ``eps`` float64's machine epsilon. With
    ``vis_threshold``, only joints whose scores are ``> vis_threshold`` in both predictions
    count (0 when none does).

    Args:
        keypoints: ``(N, K, 3)`` ``x, y, score``.
        areas: ``(N,)``.
        sigmas: ``K`` per-joint constants (default COCO's).
        vis_threshold: see above; ``None``: every joint counts.

    Returns:
        ``(N, N)`` in the keypoints' dtype.
    """
    _check_keypoints(keypoints)
    n, k = keypoints.shape[:2]
    _check_areas(areas, n)
    dt, dev = keypoints.dtype, keypoints.device
    if isinstance(sigmas, torch.Tensor):
        sig = sigmas.to(dev, dt)
    else:
        sig = constant(tuple(float(v) for v in sigmas), dev, dt)
    if sig.shape != (k,):
        raise ValueError(f"sigmas must have K={k} values (keypoints), got shape {tuple(sig.shape)}")
    var = (sig * 2) ** 2
    xy = keypoints[..., :2]
    d = xy[:, None] - xy[None, :]  # (N, N, K, 2)
    d2 = d[..., 0] ** 2 + d[..., 1] ** 2
    a = areas.to(dt)
    s = ((a[:, None] + a[None, :]) / 2 + torch.finfo(torch.float64).eps).unsqueeze(-1)
    e = d2 / var / s / 2
    if vis_threshold is None:
        return torch.exp(-e).mean(-1)
    v = keypoints[..., 2] > float(vis_threshold)
    both = (v[:, None] & v[None, :]).to(dt)
    return (torch.exp(-e) * both).sum(-1) / both.sum(-1).clamp_min(1)


def oks_nms(
    keypoints: torch.Tensor,
    scores: torch.Tensor,
    areas: torch.Tensor,
    threshold: float,
    sigmas: tuple[float, ...] | torch.Tensor = COCO_SIGMAS,
    vis_threshold: float | None = None,
) -> torch.Tensor:
    """Greedy OKS non-maximum suppression of keypoint predictions (MMPose's ``oks_nms``).

    Visits predictions in decreasing score order (stable: equal scores keep the lower index
    first; MMPose's reversed ``argsort`` orders ties differently) and keeps a prediction
    while its OKS with every kept one is ``<= threshold`` (``OKS > threshold`` suppresses).
    The OKS is :func:`oks_matrix` (mean of the two areas), computed in the keypoints' dtype
    (MMPose rounds it to float32).

    Args:
        keypoints: ``(N, K, 3)`` ``x, y, score``.
        scores: ``(N,)`` instance scores.
        areas: ``(N,)`` instance areas (e.g. box areas), pixels^2.
        threshold: in ``[0, 1]``.
        sigmas: ``K`` per-joint constants (default COCO's).
        vis_threshold: count only joints with scores above it in both predictions.

    Returns:
        ``keep (M,)`` int64 indices, in decreasing score order.
    """
    _check_keypoints(keypoints)
    _check_scores(scores, keypoints.shape[0], "keypoints")
    _check_areas(areas, keypoints.shape[0])
    thr = _check_threshold("threshold", threshold)
    order = _sorted_order(scores)
    oks = oks_matrix(keypoints[order], areas[order], sigmas, vis_threshold)
    keep = greedy_keep(oks > thr)
    return order[keep]
