"""Non-maximum suppression as batched tensor functions: box NMS, per-category box NMS and
OKS-NMS of keypoint predictions, each equal to the greedy loop.

The overlaps (IoU or OKS) of the score-sorted candidates are computed as matrices, and the
greedy suppression is solved exactly with a Cluster-NMS-style fixed-point iteration on the
upper triangle of the suppression matrix (:func:`greedy_keep`); no Python loop over boxes.

Conventions, shared by all three (and by torchvision's ``nms`` for boxes):

- Candidates are visited in decreasing score order with a *stable* sort: of equal scores the
  lower index comes first (is kept first).
- A kept candidate suppresses a later one when their overlap is strictly greater than the
  threshold (``IoU > iou_threshold``); an overlap equal to the threshold keeps both. NaN
  overlaps (two zero-area boxes) suppress nothing.
- The result is the kept indices into the input, ``int64``, in that visiting order.

On a CPU the sorted candidates are taken in tiles of a few hundred (:func:`_greedy`): a tile
first drops what the candidates kept so far suppress (one overlap block against the kept ones
only), then runs the fixed point on its own upper triangle. That keeps every temporary in
cache, computes no overlap of a suppressed candidate with later ones, and bounds the fixed
point's worst case (a chain of boxes that each overlap only their neighbours, about one
iteration per box) to tile-sized matrices. On a GPU the whole set is one tile.

The output size depends on the data, so each call reads back to the host (one small read per
tile and fixed-point iteration): call it on a finished prediction, not inside a training step.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

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
"""Per-keypoint OKS constants of the COCO-17 keypoints (the COCO evaluation's values; the one
definition, which ``metrics2d`` re-exports)."""


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


def _check_boxes(boxes: object, name: str = "boxes") -> torch.Tensor:
    check_tensor(name, boxes)
    if boxes.dim() != 2 or boxes.shape[1] != 4:
        raise ValueError(
            f"{name} must have shape (N, 4) (x1, y1, x2, y2), got {tuple(boxes.shape)}"
        )
    check_finite(name, boxes)
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
_TILE = 1 << 16  # CPU tile: about this many overlap values (times K for OKS) per temporary
_MIN_ROWS = 16
Overlap = Callable[[torch.Tensor | slice, int, int], torch.Tensor]


def _tile_rows(n: int, device: torch.device, width: int = 1) -> int:
    if device.type != "cpu":
        return max(n, 1)
    return max(1, min(n, max(_MIN_ROWS, math.isqrt(_TILE // width))))


def _fixed_point(A: torch.Tensor, alive: torch.Tensor) -> torch.Tensor:
    """Greedy keep of candidates in visiting order: ``A`` float32 0/1, the strict upper triangle
    of "``i`` suppresses ``j``"; ``alive`` bool, the candidates not already suppressed."""
    keep = alive
    # A loop over fixed-point iterations (at most N, usually a handful), not over boxes: each
    # is one matrix-vector product and reads one bool back to the host. (keep @ A)[j] counts
    # the kept suppressors of j: a sum of 0/1 terms, zero only when every term is.
    while True:
        new = alive & ((keep.to(A.dtype) @ A) == 0)
        if torch.equal(new, keep):
            return keep
        keep = new


def _greedy(n: int, suppresses: Overlap, device: torch.device, width: int = 1) -> torch.Tensor:
    """Greedy keep ``(n,)`` bool of ``n`` candidates in visiting order.

    ``suppresses(rows, s, e)`` is the bool ``(len(rows), e - s)`` block "candidate ``rows[i]``
    suppresses candidate ``s + j`` if kept" (``rows``: an index tensor or a slice). Tiles of
    candidates go in order: a tile drops the candidates that the kept ones of earlier tiles
    suppress (final: those are decided), then the fixed point of :func:`greedy_keep` runs on
    the tile's upper triangle.
    """
    keep = torch.zeros(n, dtype=torch.bool, device=device)
    kept = torch.zeros(0, dtype=torch.long, device=device)
    rows = _tile_rows(n, device, width)
    # A loop over tiles of candidates (cache blocking on a CPU; one tile on a GPU), not boxes.
    for s in range(0, n, rows):
        e = min(n, s + rows)
        if len(kept):
            alive = ~suppresses(kept, s, e).amax(0)  # amax: a fast column reduction on a CPU
        else:
            alive = torch.ones(e - s, dtype=torch.bool, device=device)
        A = (
            suppresses(slice(s, e), s, e)
            .to(torch.float32)
            .mul_(_upper(rows, device)[: e - s, : e - s])
        )
        k = _fixed_point(A, alive)
        keep[s:e] = k
        if e < n:
            kept = torch.cat([kept, s + k.nonzero().squeeze(1)])
    return keep


@functools.lru_cache(maxsize=16)
def _upper(m: int, device: torch.device) -> torch.Tensor:
    """Float32 ``(m, m)`` strict upper triangle of ones, built once per size and device (by
    comparing indices: ``triu`` runs threaded even on tiny tensors, slow on a busy CPU)."""
    i = torch.arange(m, device=device)
    return (i[:, None] < i[None, :]).to(torch.float32)


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
    solution of the rule, hence the greedy result. Clustered detections need a handful of
    iterations; a chain of boxes that each overlap only their neighbour needs about ``N``.

    Args:
        suppress: ``(N, N)`` bool.

    Returns:
        ``keep (N,)`` bool.
    """
    if not isinstance(suppress, torch.Tensor) or suppress.dtype != torch.bool:
        raise TypeError("suppress must be a bool torch.Tensor")
    if suppress.dim() != 2 or suppress.shape[0] != suppress.shape[1]:
        raise ValueError(f"suppress must have shape (N, N), got {tuple(suppress.shape)}")
    i = torch.arange(suppress.shape[0], device=suppress.device)
    A = (suppress & (i[:, None] < i[None, :])).to(torch.float32)
    return _fixed_point(A, torch.ones_like(i, dtype=torch.bool))


def _iou_blocks(boxes: torch.Tensor) -> Overlap:
    """``iou(rows, s, e)``: IoU of boxes ``rows`` against boxes ``s:e`` (torchvision's
    arithmetic, written in place to keep temporaries few)."""
    x1, y1, x2, y2 = boxes.unbind(1)
    P = torch.stack([x1, y1, x2, y2, (x2 - x1) * (y2 - y1)])  # (5, N): one gather per block
    x1, y1, x2, y2, area = P.unbind(0)

    def iou(rows: torch.Tensor | slice, s: int, e: int) -> torch.Tensor:
        r = P[:, rows, None]
        w = torch.minimum(r[2], x2[None, s:e])
        w.sub_(torch.maximum(r[0], x1[None, s:e])).clamp_(min=0)
        h = torch.minimum(r[3], y2[None, s:e])
        h.sub_(torch.maximum(r[1], y1[None, s:e])).clamp_(min=0)
        inter = w.mul_(h)
        union = torch.add(r[4], area[None, s:e], out=h).sub_(inter)
        return inter.div_(union)

    return iou


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
    a, b = _check_boxes(boxes1, "boxes1"), _check_boxes(boxes2, "boxes2")
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    lt = torch.maximum(a[:, None, :2], b[None, :, :2])
    rb = torch.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = (rb - lt).clamp_(min=0)
    inter = wh[..., 0] * wh[..., 1]
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
    iou = _iou_blocks(boxes[order])
    keep = _greedy(len(order), lambda r, s, e: iou(r, s, e) > thr, boxes.device)
    return order[keep]


def batched_nms(
    boxes: torch.Tensor, scores: torch.Tensor, idxs: torch.Tensor, iou_threshold: float
) -> torch.Tensor:
    """NMS within each category, all categories in one call.

    The same result as running :func:`nms` on each category alone and merging the kept
    indices in decreasing score order (stable). Boxes of different categories never suppress
    each other: the suppression matrix is masked by "same category", which is exact for any
    coordinates (torchvision's trick of shifting each category's boxes by ``idx * (max + 1)``
    reaches the same goal with one plain NMS, but rounds the shifted coordinates and assumes
    non-negative boxes; the mask costs one comparison per pair here).

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
    iou, c = _iou_blocks(boxes[order]), idxs[order]

    def suppresses(r: torch.Tensor | slice, s: int, e: int) -> torch.Tensor:
        return (iou(r, s, e) > thr).logical_and_(c[r, None] == c[None, s:e])

    return order[_greedy(len(order), suppresses, boxes.device)]


def _oks_blocks(
    keypoints: torch.Tensor,
    areas: torch.Tensor,
    sigmas: tuple[float, ...] | torch.Tensor,
    vis_threshold: float | None,
) -> Overlap:
    """``oks(rows, s, e)``: OKS of predictions ``rows`` against predictions ``s:e``."""
    k = keypoints.shape[1]
    dt, dev = keypoints.dtype, keypoints.device
    if isinstance(sigmas, torch.Tensor):
        sig = sigmas.to(dev, dt)
    else:
        sig = constant(tuple(float(v) for v in sigmas), dev, dt)
    if sig.shape != (k,):
        raise ValueError(f"sigmas must have K={k} values (keypoints), got shape {tuple(sig.shape)}")
    var = (sig * 2) ** 2
    x, y = keypoints[..., 0].contiguous(), keypoints[..., 1].contiguous()
    a = areas.to(dt)
    eps = torch.finfo(torch.float64).eps
    # exp(-e) is 0 or denormal beyond this (torch's CPU exp is several times slower there):
    # those terms count as 0 (their true value is below 1e-304 in float64, 2e-35 in float32)
    cut = 700.0 if dt == torch.float64 else 80.0
    v = keypoints[..., 2] > float(vis_threshold) if vis_threshold is not None else None

    def oks(rows: torch.Tensor | slice, s: int, e: int) -> torch.Tensor:
        dx = x[rows, None] - x[None, s:e]  # (R, C, K)
        dy = y[rows, None] - y[None, s:e]
        d2 = dx.mul_(dx).add_(dy.mul_(dy))
        scale = ((a[rows, None] + a[None, s:e]) / 2 + eps).unsqueeze(-1)
        ex = d2.div_(var).div_(scale).div_(2)
        term = torch.where(ex < cut, torch.exp(-ex.clamp_(max=cut)), 0.0)
        if v is None:
            return term.mean(-1)
        both = (v[rows, None] & v[None, s:e]).to(dt)
        return (term * both).sum(-1) / both.sum(-1).clamp_min(1)

    return oks


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
    count (0 when none does). Terms below ``exp(-700)`` (float64) or ``exp(-80)`` (float32)
    count as 0.

    Args:
        keypoints: ``(N, K, 3)`` ``x, y, score``.
        areas: ``(N,)``.
        sigmas: ``K`` per-joint constants (default COCO's).
        vis_threshold: see above; ``None``: every joint counts.

    Returns:
        ``(N, N)`` in the keypoints' dtype.
    """
    _check_keypoints(keypoints)
    n = keypoints.shape[0]
    _check_areas(areas, n)
    oks = _oks_blocks(keypoints, areas, sigmas, vis_threshold)
    return oks(slice(0, n), 0, n)


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
    n, k = keypoints.shape[:2]
    _check_scores(scores, n, "keypoints")
    _check_areas(areas, n)
    thr = _check_threshold("threshold", threshold)
    order = _sorted_order(scores)
    oks = _oks_blocks(keypoints[order], areas[order], sigmas, vis_threshold)
    keep = _greedy(n, lambda r, s, e: oks(r, s, e) > thr, keypoints.device, width=k)
    return order[keep]
