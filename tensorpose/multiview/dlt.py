"""Weighted linear triangulation (DLT) of every point at once, and reprojection errors.

Cameras follow :mod:`tensorpose.ops.camera` (OpenCV): ``K (C, 3, 3)``, ``dist (C, 5)``,
``R (C, 3, 3)``, ``t (C, 3)`` with ``x_cam = R @ x + t``. For camera ``c`` with undistorted
normalised observation ``(x, y)`` (:func:`~tensorpose.ops.camera.undistort_points`) and weight
``w`` (the detector's confidence, 0 below a threshold) the rows ``w (x P3 - P1)`` and
``w (y P3 - P2)`` of ``P = [R | t]``; the point is the eigenvector of the smallest eigenvalue of
the ``(4, 4)`` normal matrix ``A^T A``, found for every point at once by
:func:`~tensorpose.multiview.eigen4.smallest_eigenvector`'s closed form (equal to
``torch.linalg.eigh``'s and much faster on CPU for batches of 4 x 4 matrices).

Points behind a camera get an infinite reprojection error in that camera.
"""

from __future__ import annotations

import torch

from ..ops._checks import check_last_dims, check_tensor
from ..ops.camera import _dist5, _project_uvz
from .eigen4 import _UPPER, _eigvec_soa

__all__ = ["dlt_normal_matrices", "reprojection_errors", "weighted_dlt"]


def _check_cameras(C: int, K, dist, R, t) -> torch.Tensor:
    check_tensor("K", K, 3)
    check_last_dims("K", K, (3, 3), "intrinsic matrices")
    check_tensor("R", R, 3)
    check_last_dims("R", R, (3, 3), "rotation matrices")
    check_tensor("t", t, 2)
    check_last_dims("t", t, (3,), "translations")
    dist = _dist5("dist", dist)
    for name, x in (("K", K), ("dist", dist), ("R", R), ("t", t)):  # argument checks
        if x.dim() < 2 or x.shape[-2 if name in ("dist", "t") else -3] != C:
            raise ValueError(f"{name} must hold C={C} cameras, got shape {tuple(x.shape)}")
    return dist


def _dlt_features(normalized: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``(..., C, 4)``: ``w^2 (x^2 + y^2), w^2 x, w^2 y, w^2`` (0 where the weight is 0)."""
    unused = ~(weights > 0)
    x, y = (v.masked_fill(unused, 0.0) for v in normalized.unbind(-1))  # components: fast
    w2 = weights.masked_fill(unused, 0.0).square()
    return torch.stack([(x.square() + y.square()) * w2, x * w2, y * w2, w2], -1)


def _dlt_basis(R: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """``(C, 4, 16)`` flattened matrices ``M_k`` with ``w^2 (a a^T + b b^T) = sum_k f_k M_k``
    for the features of :func:`_dlt_features` (``a = x P3 - P1``, ``b = y P3 - P2``)."""
    P = torch.cat([R, t.unsqueeze(-1)], -1)  # (C, 3, 4)
    P1, P2, P3 = P[:, 0], P[:, 1], P[:, 2]

    def outer(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return (u.unsqueeze(-1) * v.unsqueeze(-2)).flatten(-2)

    return torch.stack([
        outer(P3, P3),
        -(outer(P3, P1) + outer(P1, P3)),
        -(outer(P3, P2) + outer(P2, P3)),
        outer(P1, P1) + outer(P2, P2),
    ], -2)  # fmt: skip


def dlt_normal_matrices(
    normalized: torch.Tensor, weights: torch.Tensor, R: torch.Tensor, t: torch.Tensor
) -> torch.Tensor:
    """Per-camera contributions ``w^2 (a a^T + b b^T)`` to the DLT normal matrix, with
    ``a = x P3 - P1``, ``b = y P3 - P2`` and ``P = [R | t]``.

    Each is a combination of four constant matrices per camera with the coefficients
    ``w^2 (x^2 + y^2), w^2 x, w^2 y, w^2``, so sums over cameras are one matrix product.

    Args:
        normalized: ``(..., C, 2)`` undistorted normalised observations (any value where the
            weight is 0, NaN included).
        weights: ``(..., C)`` (0 = camera not used).
        R: ``(C, 3, 3)``; t: ``(C, 3)``.

    Returns:
        ``(..., C, 4, 4)``; their sum over ``C`` is the normal matrix.
    """
    f = _dlt_features(normalized, weights)
    N = torch.einsum("...ck,ckm->...cm", f, _dlt_basis(R, t))
    return N.unflatten(-1, (4, 4))


def _solve(N: torch.Tensor, eps: float = 1e-12) -> tuple[torch.Tensor, torch.Tensor]:
    """Homogeneous solution of flattened normal matrices ``(..., 16)`` -> points
    ``(..., 3)``, ok."""
    batch = N.shape[:-1]
    X, ok = _solve_upper(N.reshape(-1, 16)[:, _UPPER].T.contiguous(), eps)
    return X.reshape(*batch, 3), ok.reshape(batch)


SOLVE_BLOCK = 16384
"""On CPU, :func:`_solve_upper` takes this many matrices at a time: the eigensolver's hundreds
of elementwise passes then stay in the cache (110k random normal matrices, one thread: 75 ms in
one batch, 55 ms in blocks); every matrix is solved on its own, so the values are the same."""


def _solve_upper(u: torch.Tensor, eps: float = 1e-12) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_solve` on the upper triangles laid out as ``(10, B)`` (row-major order)."""
    if u.device.type == "cpu" and u.shape[1] > SOLVE_BLOCK:
        parts = [_solve_block(u[:, i : i + SOLVE_BLOCK], eps)
                 for i in range(0, u.shape[1], SOLVE_BLOCK)]  # fmt: skip
        return torch.cat([X for X, _ in parts]), torch.cat([ok for _, ok in parts])
    return _solve_block(u, eps)


def _solve_block(u: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    e = dict(zip(_UPPER, u, strict=True))
    v = _eigvec_soa([[e[4 * min(i, j) + max(i, j)] for j in range(4)] for i in range(4)])
    ok = v[3].abs() > eps
    iw = 1 / torch.where(ok, v[3], torch.nan)  # NaN where not solvable
    return torch.stack([v[0] * iw, v[1] * iw, v[2] * iw], -1), ok


def weighted_dlt(
    normalized: torch.Tensor, weights: torch.Tensor, R: torch.Tensor, t: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted linear triangulation of every point at once.

    Args:
        normalized: ``(..., C, 2)`` undistorted normalised observations.
        weights: ``(..., C)`` row weights (confidences; 0 = not used).
        R: ``(C, 3, 3)``; t: ``(C, 3)`` world -> camera.

    Returns:
        ``points (..., 3)`` (NaN where not solvable) and ``ok (...)``: at least two cameras and
        a finite solution.

    Example:
        >>> R = torch.eye(3, dtype=torch.float64).expand(2, 3, 3)
        >>> t = torch.tensor([[0.0, 0.0, 0.0], [-1.0, 0.0, 0.0]], dtype=torch.float64)
        >>> X = torch.tensor([0.5, 0.2, 4.0], dtype=torch.float64)
        >>> xy = (X + t)[:, :2] / (X + t)[:, 2:]
        >>> weighted_dlt(xy, torch.ones(2, dtype=torch.float64), R, t)[0]
        tensor([0.5000, 0.2000, 4.0000], dtype=torch.float64)
    """
    check_tensor("normalized", normalized, 2)
    check_last_dims("normalized", normalized, (None, 2), "normalised xy per camera")
    if weights.shape != normalized.shape[:-1]:
        raise ValueError(
            f"weights must have shape {tuple(normalized.shape[:-1])}, got {tuple(weights.shape)}"
        )
    f = _dlt_features(normalized, weights)
    X, ok = _solve(f.flatten(-2) @ _dlt_basis(R, t).flatten(0, 1))
    enough = (weights > 0).sum(-1) >= 2
    return torch.where(enough.unsqueeze(-1), X, float("nan")), ok & enough


def reprojection_errors(
    points: torch.Tensor,
    pixels: torch.Tensor,
    K: torch.Tensor,
    dist: torch.Tensor,
    R: torch.Tensor,
    t: torch.Tensor,
) -> torch.Tensor:
    """Pixel distance between ``points (..., 3)`` projected into every camera (with lens
    distortion) and the observed ``pixels (..., C, 2)``; ``inf`` where the point is not in front
    of the camera. Returns ``(..., C)``."""
    u, v, z = _project_uvz(points.unsqueeze(-2), K, _dist5("dist", dist), R, t)
    ou, ov = pixels.unbind(-1)
    err = (u - ou).hypot_(v - ov)
    return torch.where(z > 0, err, float("inf"))
