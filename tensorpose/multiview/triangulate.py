"""Robust multi-view triangulation of points: weighted DLT with iterative camera dropping, for
every point at once (batched over frames, people and joints).

Cameras follow :mod:`tensorpose.ops.camera` (OpenCV): ``K (C, 3, 3)``, ``dist (C, 5)``,
``R (C, 3, 3)``, ``t (C, 3)`` with ``x_cam = R @ x + t``. The observed pixels are undistorted
(OpenCV's scheme) and triangulated with :func:`~tensorpose.multiview.dlt.weighted_dlt`'s normal
matrices; then :func:`triangulate_points`: while the largest reprojection error of a point
(pixels, through the lens distortion) is above ``max_error_px`` and more than ``min_cameras``
cameras remain, drop one camera and triangulate again; every point at once, with masks.
``drop="leave_one_out"`` (default) drops the camera without which the others agree best
(lowest mean reprojection error): robust to an outlying camera that pulls the DLT point
towards itself so that another camera shows the largest error. ``drop="largest_error"``
drops the camera of largest error. ``drop="pose2sim"`` is Pose2Sim's rule (its
``triangulation_from_best_cameras``, 0.10): while the MEAN reprojection error over the cameras
used is above ``max_error_px``, drop one more camera, choosing among every subset of that size
the one of lowest mean error (:func:`_mean_rule`); a point is valid when that mean is within the
threshold. Cross-view association of people:
:mod:`tensorpose.multiview.association`.

On CPU the work is restricted to the rows that need it (``nonzero``, free there); on other
devices every row runs at fixed shapes without host synchronisation. Both give the same
values (tested).

Points behind a camera get an infinite reprojection error in that camera (dropped first).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import torch

from ..ops._checks import check_last_dims, check_tensor
from ..ops.camera import undistort_points
from .dlt import (
    _UPPER,
    _check_cameras,
    _dlt_basis,
    _dlt_features,
    _on_rows,
    _solve_upper,
    reprojection_errors,
)

__all__ = ["DROP_RULES", "Triangulation", "triangulate_points"]


@dataclass
class Triangulation:
    """Triangulated points seen by ``C`` cameras: the result of :func:`triangulate_points`
    (tensors), and of a recording's triangulation
    (:func:`tensorpose.multiview.recording.triangulate_cameras`: host numpy, :meth:`numpy`).

    Attributes:
        points: ``(..., 3)`` world coordinates (NaN where fewer than 2 usable cameras).
        errors: ``(..., C)`` reprojection error in pixels per camera used, NaN elsewhere.
        used: ``(..., C)`` bool, the cameras kept.
        mean_error: ``(...)`` mean of ``errors`` over the cameras used.
        valid: ``(...)`` at least ``min_cameras`` cameras kept, all within ``max_error_px``.
        person: a recording's ``(T, C)`` detection chosen per camera (-1: none); ``None``
            for points alone.
        names: a recording's joint names; ``None`` for points alone.
        swapped: a recording's ``(T, C)`` cameras whose left and right were exchanged before
            the triangulation (:func:`tensorpose.multiview.swaps.find_swaps`; all False when
            not tested); ``None`` for points alone.
    """

    points: Any
    errors: Any
    used: Any
    mean_error: Any
    valid: Any
    person: Any = None
    names: list[str] | None = None
    swapped: Any = None

    @property
    def num_cameras(self) -> Any:
        """``(...)`` number of cameras used."""
        return self.used.sum(-1)

    def arrays(self) -> dict[str, Any]:
        """The per-point fields that are set (``names`` left out), by name."""
        return {k: v for k, v in vars(self).items() if k != "names" and v is not None}

    def numpy(self, names: list[str] | None = None) -> Triangulation:
        """The same fields as host numpy arrays (tensors copied from their device), with
        ``names`` (default: this one's)."""
        host = {k: v.cpu().numpy() if isinstance(v, torch.Tensor) else v
                for k, v in self.arrays().items()}  # fmt: skip
        return type(self)(**host, names=self.names if names is None else names)


DROP_RULES = ("leave_one_out", "largest_error", "pose2sim")


def _check_drop(drop: str, min_cameras: int) -> None:
    if drop not in DROP_RULES:
        raise ValueError(f"drop must be one of {DROP_RULES}, got {drop!r}")
    if min_cameras < 2:
        raise ValueError(f"min_cameras must be >= 2, got {min_cameras}")


def _robust(
    f: torch.Tensor,
    used: torch.Tensor,
    pixels: torch.Tensor,
    K: torch.Tensor,
    dist: torch.Tensor,
    R: torch.Tensor,
    t: torch.Tensor,
    max_error_px: float,
    min_cameras: int,
    drop: str,
) -> Triangulation:
    """Camera dropping on DLT features ``f (..., C, 4)`` (see :func:`_dlt_features`)."""
    C = used.shape[-1]
    basis = _dlt_basis(R, t)[..., _UPPER]  # (C, 4, 10): upper triangles only
    flat_basis = basis.flatten(0, 1)  # (C * 4, 10)
    nan = float("nan")
    others = ~torch.eye(C, dtype=torch.bool, device=used.device)

    def normal(used: torch.Tensor) -> torch.Tensor:
        return (f * used.unsqueeze(-1)).flatten(-2) @ flat_basis  # (..., 10)

    def solve10(N: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        X, ok = _solve_upper(N.reshape(-1, 10).T.contiguous())
        return X.reshape(*N.shape[:-1], 3), ok.reshape(N.shape[:-1])

    def full(N: torch.Tensor, px: torch.Tensor, use: torch.Tensor):
        X, ok = solve10(N)
        X = torch.where(ok.unsqueeze(-1), X, nan)
        err = reprojection_errors(X, px, K, dist, R, t)
        return X, ok, torch.where(use, err, nan)

    def solve(used: torch.Tensor):
        return _on_rows(used.sum(-1) >= 2, full, [normal(used), pixels, used], [nan, False, nan])

    def leave_one_out(fr: torch.Tensor, px: torch.Tensor, use: torch.Tensor):
        """The camera without which the others agree best (lowest mean reprojection error),
        and the point, its success and its errors without that camera."""
        rest = use.unsqueeze(-2) & others  # (rows, C_left_out, C)
        fu = fr * use.unsqueeze(-1)
        own = torch.einsum("...ck,ckm->...cm", fu, basis)  # each camera's share of N
        N = fu.flatten(-2) @ flat_basis
        Xo, oko = solve10(N.unsqueeze(-2) - own)
        oko = oko & (rest.sum(-1) >= 2)
        Xo = torch.where(oko.unsqueeze(-1), Xo, nan)
        eo = torch.where(rest, reprojection_errors(Xo, px.unsqueeze(-3), K, dist, R, t), nan)
        score = torch.where(rest, eo.nan_to_num(nan=float("inf")), 0.0).sum(-1)
        score = score / rest.sum(-1).clamp_min(1)
        worst = torch.where(use & oko, score, float("inf")).argmin(-1)  # first of equals
        pick = worst[..., None, None]
        return (
            worst,
            Xo.gather(-2, pick.expand(*worst.shape, 1, 3)).squeeze(-2),
            oko.gather(-1, worst.unsqueeze(-1)).squeeze(-1),
            eo.gather(-2, pick.expand(*worst.shape, 1, C)).squeeze(-2),
        )

    X, ok, err = solve(used)
    if drop == "pose2sim":
        return _mean_rule(f, used, pixels, (K, dist, R, t), (X, ok, err), max_error_px,
                          min_cameras)  # fmt: skip
    # A loop over the number of cameras that can be dropped (at most C - min_cameras); each
    # iteration re-solves the points that drop a camera.
    for _ in range(max(C - min_cameras, 0)):
        ranked = torch.where(used, err.nan_to_num(nan=float("inf")), -1.0)
        worst_err, worst = ranked.max(-1)
        drop_now = ok & (worst_err > max_error_px) & (used.sum(-1) > min_cameras)
        if drop == "leave_one_out":  # the solutions without the dropped camera come along
            worst, Xn, okn, errn = _on_rows(drop_now, leave_one_out, [f, pixels, used],
                                            [0, nan, False, nan])  # fmt: skip
        hit = (torch.arange(C, device=used.device) == worst.unsqueeze(-1)) & drop_now.unsqueeze(-1)
        used = used & ~hit
        if drop == "largest_error":
            Xn, okn, errn = _on_rows(drop_now, full, [normal(used), pixels, used],
                                     [nan, False, nan])  # fmt: skip
        X = torch.where(drop_now.unsqueeze(-1), Xn, X)
        ok = torch.where(drop_now, okn, ok)
        err = torch.where(drop_now.unsqueeze(-1), errn, err)
    return _result(X, ok, err, used, max_error_px, min_cameras)


def _mean_rule(
    f: torch.Tensor,
    seen: torch.Tensor,
    pixels: torch.Tensor,
    cameras: tuple[torch.Tensor, ...],
    start: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    max_error_px: float,
    min_cameras: int,
) -> Triangulation:
    """Pose2Sim's camera dropping on DLT features ``f (..., C, 4)``, from the solution with
    every camera seen (``start``: points, ok, errors).

    Level ``k = 1, 2, ...`` excludes ``k`` of the ``C`` cameras in every way
    (``itertools.combinations`` order; an excluded camera may be one not seen) and keeps the
    subset of lowest mean reprojection error (the first of equals). A point goes on to the next
    level while its mean error is above ``max_error_px`` and the cameras not seen plus ``k``
    leave at least ``min_cameras``; its result is the last level it reached.
    """
    K, dist, R, t = cameras
    X, ok, err = start
    C = seen.shape[-1]
    nan, dev = float("nan"), seen.device
    basis = _dlt_basis(R, t)[..., _UPPER]  # (C, 4, 10)
    own = torch.einsum("...ck,ckm->...cm", f * seen.unsqueeze(-1), basis)  # (..., C, 10)
    unseen = C - seen.sum(-1)
    used = seen

    def mean_of(e: torch.Tensor, use: torch.Tensor) -> torch.Tensor:
        return torch.where(use, e, 0.0).sum(-1) / use.sum(-1).clamp_min(1)

    def level(off: torch.Tensor):
        def best(own: torch.Tensor, seen: torch.Tensor, px: torch.Tensor):
            use = seen.unsqueeze(-2) & ~off  # (rows, S, C)
            Xs, oks = _solve_upper((use.to(own.dtype) @ own).reshape(-1, 10).T.contiguous())
            Xs, oks = Xs.reshape(*use.shape[:-1], 3), oks.reshape(use.shape[:-1])
            es = torch.where(use, reprojection_errors(Xs, px.unsqueeze(-3), K, dist, R, t), nan)
            score = torch.where(oks, mean_of(es, use), float("inf")).nan_to_num(float("inf"))
            i = score.argmin(-1)  # the first of equals, as numpy's nanargmin
            pick = i[..., None, None]

            def take(x: torch.Tensor) -> torch.Tensor:
                return x.gather(-2, pick.expand(*i.shape, 1, x.shape[-1])).squeeze(-2)

            return take(Xs), oks.gather(-1, i.unsqueeze(-1)).squeeze(-1), take(es), take(use)

        return best

    # A loop over the drop levels (at most C - min_cameras); each one re-solves the points
    # still above the threshold, every subset of that level at once.
    for k in range(1, C - min_cameras + 1):
        combos = torch.tensor(list(itertools.combinations(range(C), k)), device=dev)
        off = torch.zeros(len(combos), C, dtype=torch.bool, device=dev)
        off.scatter_(1, combos, True)
        go = ok & (mean_of(err, used) > max_error_px) & (unseen + k <= C - min_cameras)
        Xn, okn, errn, usen = _on_rows(go, level(off), [own, seen, pixels],
                                       [nan, False, nan, False])  # fmt: skip
        X = torch.where(go.unsqueeze(-1), Xn, X)
        ok = torch.where(go, okn, ok)
        err = torch.where(go.unsqueeze(-1), errn, err)
        used = torch.where(go.unsqueeze(-1), usen, used)
    return _result(X, ok, err, used, max_error_px, min_cameras, by_mean=True)


def _result(
    X: torch.Tensor,
    ok: torch.Tensor,
    err: torch.Tensor,
    used: torch.Tensor,
    max_error_px: float,
    min_cameras: int,
    by_mean: bool = False,
) -> Triangulation:
    """The :class:`Triangulation` of the points left after camera dropping: mean error over the
    cameras used, NaN points where too few cameras remain, ``valid`` where all are within
    ``max_error_px`` (``by_mean``: where their mean is)."""
    nan = float("nan")
    n = used.sum(-1)
    enough = n >= min_cameras
    mean = torch.where(used, err, 0.0).sum(-1) / n.clamp_min(1)
    mean = torch.where(n > 0, mean, nan)
    within = torch.where(used, err.nan_to_num(nan=float("inf")), 0.0).amax(-1) <= max_error_px
    if by_mean:
        within = mean.nan_to_num(nan=float("inf")) <= max_error_px
    X = torch.where((ok & enough).unsqueeze(-1), X, nan)
    return Triangulation(X, err, used, mean, ok & enough & within)


def triangulate_points(
    pixels: torch.Tensor,
    weights: torch.Tensor,
    K: torch.Tensor,
    dist: torch.Tensor,
    R: torch.Tensor,
    t: torch.Tensor,
    max_error_px: float = 15.0,
    min_cameras: int = 2,
    normalized: torch.Tensor | None = None,
    drop: str = "leave_one_out",
) -> Triangulation:
    """Weighted DLT with iterative dropping of the worst camera, for every point at once.

    While the largest reprojection error of a point is above ``max_error_px`` and more than
    ``min_cameras`` cameras remain, one camera is dropped and the point triangulated again:
    with ``drop="leave_one_out"`` the camera without which the others' mean reprojection
    error is lowest, with ``drop="largest_error"`` the camera of largest error; with
    ``drop="pose2sim"`` Pose2Sim's rule on the mean error (:func:`_mean_rule`). The loop is
    over the at most ``C - min_cameras`` drops; every point is handled at once.

    Args:
        pixels: ``(..., C, 2)`` observed (distorted) pixels, NaN where missing.
        weights: ``(..., C)`` DLT row weights (confidences); 0 or NaN = not observed.
        K: ``(C, 3, 3)``; dist: ``(C, 4|5)``; R: ``(C, 3, 3)``; t: ``(C, 3)``.
        max_error_px: reprojection error threshold in pixels.
        min_cameras: never drop below this many cameras (>= 2).
        normalized: ``(..., C, 2)`` the undistorted observations when already computed.
        drop: ``"leave_one_out"``, ``"largest_error"`` or ``"pose2sim"`` (see above).

    Returns:
        :class:`Triangulation`.
    """
    check_tensor("pixels", pixels, 2)
    check_last_dims("pixels", pixels, (None, 2), "pixels per camera")
    C = pixels.shape[-2]
    dist = _check_cameras(C, K, dist, R, t)
    if weights.shape != pixels.shape[:-1]:
        raise ValueError(
            f"weights must have shape {tuple(pixels.shape[:-1])}, got {tuple(weights.shape)}"
        )
    _check_drop(drop, min_cameras)
    if not max_error_px > 0:
        raise ValueError(f"max_error_px must be positive, got {max_error_px}")
    seen = torch.isfinite(pixels).all(-1) & (weights > 0)  # NaN > 0 is False
    w = torch.where(seen, weights, 0.0)
    if normalized is None:
        normalized = undistort_points(pixels.unsqueeze(-2), K, dist).squeeze(-2)
    f = _dlt_features(normalized, w)
    return _robust(f, seen, pixels, K, dist, R, t, max_error_px, min_cameras, drop)
