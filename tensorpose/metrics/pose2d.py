"""2D keypoint metrics as pure tensor functions: PCK@alpha (box- or head-normalised), AUC,
end-point error, COCO OKS; and COCO keypoint AP through pycocotools (optional ``coco`` extra).

Only joints with ``visibility > 0`` count. Reductions happen on the device; nothing reads
back to the host.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

import torch

from ..ops._constants import constant
from ..ops.nms import COCO_SIGMAS

__all__ = [
    "COCO_SIGMAS",
    "auc",
    "bbox_size",
    "coco_keypoint_ap",
    "epe",
    "joint_distance",
    "oks",
    "pck",
]


def _tensor(x: object, name: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")


def _check(pred: torch.Tensor, target: torch.Tensor, visibility: torch.Tensor) -> None:
    for x, name in ((pred, "pred"), (target, "target"), (visibility, "visibility")):
        _tensor(x, name)
    if pred.shape != target.shape or pred.dim() < 2 or pred.shape[-1] != 2:
        raise ValueError(
            f"pred and target must both be (..., K, 2), got {tuple(pred.shape)} and "
            f"{tuple(target.shape)}"
        )
    if not (pred.is_floating_point() and target.is_floating_point()):
        raise TypeError(f"pred and target must be floating point, got {pred.dtype}, {target.dtype}")
    if visibility.shape != pred.shape[:-1]:
        raise ValueError(
            f"visibility must have shape {tuple(pred.shape[:-1])}, got {tuple(visibility.shape)}"
        )


def _check_per_person(x: torch.Tensor, name: str, pred: torch.Tensor) -> None:
    """``x`` must hold one value per person: shape ``pred.shape[:-2]`` (e.g. ``(N,)``)."""
    _tensor(x, name)
    if x.shape != pred.shape[:-2]:
        raise ValueError(
            f"{name} must have shape {tuple(pred.shape[:-2])} (one value per person, pred is "
            f"{tuple(pred.shape)}), got {tuple(x.shape)}"
        )


def _check_number(x: object, name: str, low: float, inclusive: bool = True) -> None:
    ok = isinstance(x, (int, float)) and math.isfinite(x) and (x >= low if inclusive else x > low)
    if not ok:
        rel = ">=" if inclusive else ">"
        raise ValueError(f"{name} must be a finite number {rel} {low}, got {x!r}")


def bbox_size(boxes: torch.Tensor) -> torch.Tensor:
    """PCK normaliser from COCO boxes ``(..., 4)`` (x, y, w, h): ``max(w, h)``, ``(...)``."""
    _tensor(boxes, "boxes")
    if boxes.dim() < 1 or boxes.shape[-1] != 4:
        raise ValueError(f"boxes must have shape (..., 4), got {tuple(boxes.shape)}")
    return torch.maximum(boxes[..., 2], boxes[..., 3])


def joint_distance(keypoints: torch.Tensor, a: int, b: int) -> torch.Tensor:
    """A normaliser from two joints of the ground truth, e.g. a head segment for PCKh
    (MPII: head top and upper neck): ``||keypoints[..., a] - keypoints[..., b]||``.

    Args:
        keypoints: ``(..., K, D)``.
        a, b: joint indices in ``[0, K)``.

    Returns:
        ``(...)``.
    """
    _tensor(keypoints, "keypoints")
    if keypoints.dim() < 2:
        raise ValueError(f"keypoints must have shape (..., K, D), got {tuple(keypoints.shape)}")
    K = keypoints.shape[-2]
    for v, name in ((a, "a"), (b, "b")):
        if not isinstance(v, int) or not 0 <= v < K:
            raise ValueError(f"{name} must be a joint index in [0, {K}), got {v!r}")
    return (keypoints[..., a, :] - keypoints[..., b, :]).norm(dim=-1)


def pck(
    pred: torch.Tensor,
    target: torch.Tensor,
    visibility: torch.Tensor,
    normalizer: torch.Tensor,
    alpha: float = 0.2,
    per_joint: bool = False,
) -> torch.Tensor:
    """Percentage of correct keypoints: a visible joint is correct when its error is at most
    ``alpha * normalizer``.

    Args:
        pred, target: ``(..., K, 2)``.
        visibility: ``(..., K)``.
        normalizer: ``(...)`` per person, e.g. ``(N,)`` for ``pred (N, K, 2)``
            (:func:`bbox_size`, :func:`joint_distance`).
        alpha: threshold factor.
        per_joint: return ``(K,)`` per-joint values (NaN for a joint never visible) instead of
            the fraction over all visible joints.

    Returns:
        scalar (or ``(K,)``) in ``[0, 1]``; NaN when nothing is visible.
    """
    _check(pred, target, visibility)
    _check_per_person(normalizer, "normalizer", pred)
    _check_number(alpha, "alpha", 0.0)
    d = (pred - target).norm(dim=-1)
    ok = (d <= alpha * normalizer.unsqueeze(-1)).to(d.dtype)
    v = (visibility > 0).to(d.dtype)
    if per_joint:
        dims = tuple(range(d.dim() - 1))
        return (ok * v).sum(dims) / v.sum(dims)
    return (ok * v).sum() / v.sum()


def auc(
    pred: torch.Tensor,
    target: torch.Tensor,
    visibility: torch.Tensor,
    normalizer: torch.Tensor,
    max_alpha: float = 0.5,
    steps: int = 20,
) -> torch.Tensor:
    """Area under the PCK curve: the mean of PCK at ``steps`` thresholds
    ``alpha_i = max_alpha * i / steps``, ``i = 0 .. steps - 1`` (normalised to ``[0, 1]``).

    Args: as :func:`pck`.
    """
    _check(pred, target, visibility)
    _check_per_person(normalizer, "normalizer", pred)
    _check_number(max_alpha, "max_alpha", 0.0, inclusive=False)
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    d = (pred - target).norm(dim=-1) / normalizer.unsqueeze(-1)
    alphas = torch.arange(steps, device=d.device, dtype=d.dtype) * (max_alpha / steps)
    v = (visibility > 0).to(d.dtype)
    ok = (d.unsqueeze(-1) <= alphas).to(d.dtype) * v.unsqueeze(-1)  # (..., K, steps)
    curve = ok.reshape(-1, steps).sum(0) / v.sum()
    return curve.mean()


def epe(pred: torch.Tensor, target: torch.Tensor, visibility: torch.Tensor) -> torch.Tensor:
    """Mean end-point error (pixels) over the visible joints."""
    _check(pred, target, visibility)
    v = (visibility > 0).to(pred.dtype)
    return ((pred - target).norm(dim=-1) * v).sum() / v.sum()


def oks(
    pred: torch.Tensor,
    target: torch.Tensor,
    visibility: torch.Tensor,
    area: torch.Tensor,
    sigmas: tuple[float, ...] | torch.Tensor = COCO_SIGMAS,
) -> torch.Tensor:
    """Object keypoint similarity of each prediction with its ground truth (COCO's formula).

    ``OKS = mean over labelled joints of exp(-d^2 / (2 s^2 k^2))`` with ``s^2`` the object
    area and ``k = 2 sigma``.

    Args:
        pred, target: ``(..., K, 2)``.
        visibility: ``(..., K)`` of the ground truth.
        area: ``(...)`` ground-truth segment areas, one per person (``(N,)`` for
            ``pred (N, K, 2)``).
        sigmas: ``K`` per-joint constants (default COCO's).

    Returns:
        ``(...)``; 0 for a ground truth without labelled joints.
    """
    _check(pred, target, visibility)
    _check_per_person(area, "area", pred)
    if isinstance(sigmas, torch.Tensor):
        sig = sigmas.to(pred.device, pred.dtype)
    else:
        sig = constant(tuple(float(v) for v in sigmas), pred.device, pred.dtype)
    k2 = (2 * sig) ** 2
    if k2.dim() != 1 or k2.shape[0] != pred.shape[-2]:
        n = k2.shape[0] if k2.dim() == 1 else tuple(k2.shape)
        raise ValueError(f"sigmas has {n} values, keypoints have K={pred.shape[-2]}")
    d2 = (pred - target).square().sum(-1)
    e = d2 / k2 / (area.unsqueeze(-1) + torch.finfo(torch.float64).eps) / 2
    v = (visibility > 0).to(pred.dtype)
    return (torch.exp(-e) * v).sum(-1) / v.sum(-1).clamp_min(1)


AP_NAMES = ("AP", "AP50", "AP75", "APm", "APl", "AR", "AR50", "AR75", "ARm", "ARl")


def coco_keypoint_ap(
    annotations: str | Path | dict,
    results: str | Path | list[dict],
    image_ids: list[int] | None = None,
) -> dict[str, float]:
    """COCO keypoint AP/AR with pycocotools (the optional ``coco`` extra).

    Args:
        annotations: ground-truth JSON path or its loaded dict.
        results: results JSON path or list (see :func:`tensorpose.io.coco.coco_results`).
        image_ids: evaluate on these images only (default: every image with a result).

    Returns:
        ``{"AP", "AP50", "AP75", "APm", "APl", "AR", "AR50", "AR75", "ARm", "ARl"}``.

    Raises:
        ImportError: pycocotools is not installed (install the ``coco`` extra).
    """
    try:
        from pycocotools.coco import COCO
        from pycocotools.cocoeval import COCOeval
    except ImportError as e:
        raise ImportError(
            "COCO keypoint AP needs pycocotools: install the optional extra with "
            "pip install 'tensorpose[coco]' (or pip install pycocotools)"
        ) from e
    if not isinstance(annotations, dict):
        annotations = json.loads(Path(annotations).read_text())
    if not isinstance(results, list):
        results = json.loads(Path(results).read_text())
    if not isinstance(results, list):
        raise ValueError(f"results must be a list of result dicts, got {type(results).__name__}")
    need = ("image_id", "category_id", "keypoints", "score")
    for i, r in enumerate(results):
        if not isinstance(r, dict) or any(k not in r for k in need):
            raise ValueError(f"results[{i}] must be a dict with keys {need}, got {r!r:.80}")
    if not results:
        return dict.fromkeys(AP_NAMES, 0.0)
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO()
        gt.dataset = annotations
        gt.createIndex()
        dt = gt.loadRes(results)
        ev = COCOeval(gt, dt, "keypoints")
        ev.params.imgIds = sorted(image_ids or {r["image_id"] for r in results})
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return {n: float(v) for n, v in zip(AP_NAMES, ev.stats, strict=True)}
