"""Multi-view triangulation as pure tensor functions, batched over frames, people and joints.

Cameras follow :mod:`tensorpose.ops.camera` (OpenCV): ``K (C, 3, 3)``, ``dist (C, 5)``,
``R (C, 3, 3)``, ``t (C, 3)`` with ``x_cam = R @ x + t``. The steps:

1. :func:`~tensorpose.ops.camera.undistort_points` the observed pixels (OpenCV's scheme).
2. Weighted DLT (:func:`weighted_dlt`): for camera ``c`` with normalised observation ``(x, y)``
   and weight ``w`` (the detector's confidence, 0 below a threshold) the rows
   ``w (x P3 - P1)`` and ``w (y P3 - P2)`` of ``P = [R | t]``; the point is the eigenvector of
   the smallest eigenvalue of the ``(4, 4)`` normal matrix ``A^T A``, found for every point at
   once by :func:`smallest_eigenvector` (closed form: Laguerre's method on the characteristic
   polynomial from 0, then the adjugate of ``A^T A - lambda I``; equal to
   ``torch.linalg.eigh``'s and much faster on CPU for batches of 4 x 4 matrices).
3. :func:`triangulate_points`: while the camera with the largest reprojection error (pixels,
   through the lens distortion) is above ``max_error_px`` and more than ``min_cameras`` cameras
   remain, drop it and triangulate again; every point at once, with masks.
4. :func:`triangulate_people`: cross-view association of the person seen by the most cameras
   (every detection of every camera is a reference in turn; each is triangulated with every
   detection of every other camera, two views at a time, and each other camera contributes
   its detection of lowest mean reprojection error if below ``association_px``); each
   candidate is triangulated with step 3 and the one keeping the most (joint, camera)
   observations wins, ties broken by the lower mean error.

Points behind a camera get an infinite reprojection error in that camera (dropped first).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ._checks import check_last_dims, check_tensor
from .camera import _dist5, _project_broadcast, undistort_points

__all__ = [
    "PeopleTriangulation",
    "Triangulation",
    "dlt_normal_matrices",
    "reprojection_errors",
    "smallest_eigenvector",
    "triangulate_people",
    "triangulate_points",
    "weighted_dlt",
]

# ----------------------------------------------------------------------------- 4 x 4 eigen
# The 4 x 4 code works on "structure of arrays": a list of 16 contiguous (B,) tensors, one per
# matrix entry. Strided views N[..., i, j] of a (B, 4, 4) tensor are ~25x slower to combine.


def _adjugate_soa(m: list[list[torch.Tensor]]) -> list[list[torch.Tensor]]:
    """Adjugate (``det(M) M^-1``) of a 4 x 4 matrix given as rows of entries, elementwise."""
    s0 = m[0][0] * m[1][1] - m[1][0] * m[0][1]
    s1 = m[0][0] * m[1][2] - m[1][0] * m[0][2]
    s2 = m[0][0] * m[1][3] - m[1][0] * m[0][3]
    s3 = m[0][1] * m[1][2] - m[1][1] * m[0][2]
    s4 = m[0][1] * m[1][3] - m[1][1] * m[0][3]
    s5 = m[0][2] * m[1][3] - m[1][2] * m[0][3]
    c0 = m[2][0] * m[3][1] - m[3][0] * m[2][1]
    c1 = m[2][0] * m[3][2] - m[3][0] * m[2][2]
    c2 = m[2][0] * m[3][3] - m[3][0] * m[2][3]
    c3 = m[2][1] * m[3][2] - m[3][1] * m[2][2]
    c4 = m[2][1] * m[3][3] - m[3][1] * m[2][3]
    c5 = m[2][2] * m[3][3] - m[3][2] * m[2][3]
    return [
        [
            m[1][1] * c5 - m[1][2] * c4 + m[1][3] * c3,
            -m[0][1] * c5 + m[0][2] * c4 - m[0][3] * c3,
            m[3][1] * s5 - m[3][2] * s4 + m[3][3] * s3,
            -m[2][1] * s5 + m[2][2] * s4 - m[2][3] * s3,
        ],
        [
            -m[1][0] * c5 + m[1][2] * c2 - m[1][3] * c1,
            m[0][0] * c5 - m[0][2] * c2 + m[0][3] * c1,
            -m[3][0] * s5 + m[3][2] * s2 - m[3][3] * s1,
            m[2][0] * s5 - m[2][2] * s2 + m[2][3] * s1,
        ],
        [
            m[1][0] * c4 - m[1][1] * c2 + m[1][3] * c0,
            -m[0][0] * c4 + m[0][1] * c2 - m[0][3] * c0,
            m[3][0] * s4 - m[3][1] * s2 + m[3][3] * s0,
            -m[2][0] * s4 + m[2][1] * s2 - m[2][3] * s0,
        ],
        [
            -m[1][0] * c3 + m[1][1] * c1 - m[1][2] * c0,
            m[0][0] * c3 - m[0][1] * c1 + m[0][2] * c0,
            -m[3][0] * s3 + m[3][1] * s1 - m[3][2] * s0,
            m[2][0] * s3 - m[2][1] * s1 + m[2][2] * s0,
        ],
    ]


def _soa(M: torch.Tensor) -> list[list[torch.Tensor]]:
    flat = M.reshape(-1, 16).T.contiguous()  # (16, B)
    return [[flat[4 * i + j] for j in range(4)] for i in range(4)]


def _adjugate4(M: torch.Tensor) -> torch.Tensor:
    """Adjugate of ``M (..., 4, 4)`` (``det(M) M^-1`` where invertible)."""
    adj = _adjugate_soa(_soa(M))
    return torch.stack([torch.stack(r, -1) for r in adj], -2).reshape(M.shape)


LAGUERRE_STEPS = 10
"""Laguerre steps for the smallest root of the characteristic polynomial: from 0 they rise
monotonically to it (all roots are real) and converge cubically; clustered roots converge
faster than with Newton."""


RANK_TOL = 1e-14
"""Below this product of eigenvalue gaps (trace-normalised), :func:`smallest_eigenvector`
returns 0: the smallest eigenvalue is (numerically) repeated."""


def smallest_eigenvector(N: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigenvector of the smallest eigenvalue of symmetric positive semi-definite ``(..., 4, 4)``
    matrices, all at once with elementwise tensor code (no per-matrix LAPACK call).

    The characteristic polynomial ``p(l) = det(A - l I)`` of ``A = N / trace(N)`` has only real
    roots, so Laguerre's method from ``l = 0`` rises monotonically to the smallest one
    (:data:`LAGUERRE_STEPS` steps). The adjugate of ``A - l I`` is then, up to scale, the
    projector on that eigenvector: its column of largest diagonal entry, multiplied once more
    by the adjugate, is the eigenvector. Equal to ``torch.linalg.eigh``'s up to sign wherever
    the smallest eigenvalue is simple (to ~1e-14 in float64 when it is well separated; like
    any eigensolver's, the error grows as ``eps / gap`` as the two smallest eigenvalues meet).

    Args:
        N: ``(..., 4, 4)`` symmetric PSD (e.g. DLT normal matrices).

    Returns:
        ``v (..., 4)`` unit eigenvectors (zero where the smallest eigenvalue is repeated, e.g.
        ``N`` of rank < 3: no unique answer; see :data:`RANK_TOL`) and
        ``eigenvalue (...)``, the Rayleigh quotient ``v^T N v``.

    Example:
        >>> N = torch.diag(torch.tensor([3.0, 1.0, 0.5, 2.0], dtype=torch.float64))
        >>> v, lam = smallest_eigenvector(N)
        >>> v.abs().tolist(), round(float(lam), 12)
        ([0.0, 0.0, 1.0, 0.0], 0.5)
    """
    check_tensor("N", N, 2)
    check_last_dims("N", N, (4, 4), "symmetric 4 x 4 matrix")
    batch = N.shape[:-2]
    n = _soa(N)
    tr = n[0][0] + n[1][1] + n[2][2] + n[3][3]
    inv = 1 / tr.masked_fill(tr <= 0, 1.0)
    a = [[x * inv for x in row] for row in n]
    adj = _adjugate_soa(a)
    # Characteristic polynomial l^4 - c3 l^3 + c2 l^2 - c1 l + c0.
    c3 = a[0][0] + a[1][1] + a[2][2] + a[3][3]
    c2 = sum(a[i][i] * a[j][j] - a[i][j] * a[j][i] for i in range(4) for j in range(i + 1, 4))
    c1 = adj[0][0] + adj[1][1] + adj[2][2] + adj[3][3]  # sum of principal 3 x 3 minors
    c0 = a[0][0] * adj[0][0] + a[0][1] * adj[1][0] + a[0][2] * adj[2][0] + a[0][3] * adj[3][0]
    lam = torch.zeros_like(c0)
    at_root = c0 <= 0  # det <= 0 by rounding: 0 is (numerically) the smallest eigenvalue
    for _ in range(LAGUERRE_STEPS):  # fixed Laguerre steps, every matrix at once
        p = (((lam - c3) * lam + c2) * lam - c1) * lam + c0
        dp = ((4 * lam - 3 * c3) * lam + 2 * c2) * lam - c1
        d2p = (12 * lam - 6 * c3) * lam + 2 * c2
        dead = at_root | (p == 0)  # on the root
        ip = 1 / p.masked_fill(dead, 1.0)
        g = dp * ip
        h = g * g - d2p * ip
        root = (3 * (4 * h - g * g)).clamp_min(0).sqrt()
        den = g + root.copysign(g)  # the larger of |g - root|, |g + root|
        dead = dead | (den == 0)
        lam = lam - (4 / den.masked_fill(dead, 1.0)).masked_fill(dead, 0.0)
    m = [[a[i][j] - lam if i == j else a[i][j] for j in range(4)] for i in range(4)]
    adj = _adjugate_soa(m)
    # The column of largest diagonal entry (selects without a strided argmax).
    v, best = [adj[i][0] for i in range(4)], adj[0][0].abs()  # column 0
    for k in range(1, 4):  # the three other columns
        d = adj[k][k].abs()
        take = d > best
        v = [torch.where(take, adj[i][k], v[i]) for i in range(4)]
        best = torch.where(take, d, best)
    v = [sum(adj[i][j] * v[j] for j in range(4)) for i in range(4)]  # error ratio squared
    norm = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3]).sqrt()
    # c1 >= l2 l3 l4 and best ~ (l2 - l1)(l3 - l1)(l4 - l1) |v_k|^2 (trace-normalised):
    # below RANK_TOL the smallest eigenvalue is not simple (e.g. rank < 3): no unique answer.
    unique = (c1 > RANK_TOL) & (best > RANK_TOL)
    inv = 1 / norm.masked_fill(~unique | (norm == 0), 1.0)
    v = torch.stack([(x * inv).masked_fill(~unique, 0.0) for x in v])  # (4, B)
    rq = sum(n[i][j] * v[i] * v[j] for i in range(4) for j in range(4))
    return v.T.reshape(*batch, 4), rq.reshape(batch)


# ----------------------------------------------------------------------------- DLT
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


def dlt_normal_matrices(
    normalized: torch.Tensor, weights: torch.Tensor, R: torch.Tensor, t: torch.Tensor
) -> torch.Tensor:
    """Per-camera contributions ``w^2 (a a^T + b b^T)`` to the DLT normal matrix, with
    ``a = x P3 - P1``, ``b = y P3 - P2`` and ``P = [R | t]``.

    Args:
        normalized: ``(..., C, 2)`` undistorted normalised observations (any value where the
            weight is 0, NaN included).
        weights: ``(..., C)`` (0 = camera not used).
        R: ``(C, 3, 3)``; t: ``(C, 3)``.

    Returns:
        ``(..., C, 4, 4)``; their sum over ``C`` is the normal matrix.
    """
    P = torch.cat([R, t.unsqueeze(-1)], -1)  # (C, 3, 4)
    use = weights > 0
    xy = torch.where(use.unsqueeze(-1), normalized, 0.0)
    w = torch.where(use, weights, 0.0)
    a = xy[..., 0:1] * P[..., 2, :] - P[..., 0, :]
    b = xy[..., 1:2] * P[..., 2, :] - P[..., 1, :]
    rows = torch.stack([a, b], -2) * w[..., None, None]  # (..., C, 2, 4)
    return rows.transpose(-1, -2) @ rows


def _solve(N: torch.Tensor, eps: float = 1e-12) -> tuple[torch.Tensor, torch.Tensor]:
    """Homogeneous solution of normal matrices ``(..., 4, 4)`` -> points ``(..., 3)``, ok."""
    v, _ = smallest_eigenvector(N)
    w = v[..., 3]
    ok = w.abs() > eps
    X = v[..., :3] / torch.where(ok, w, torch.ones_like(w)).unsqueeze(-1)
    return torch.where(ok.unsqueeze(-1), X, float("nan")), ok


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
    Nc = dlt_normal_matrices(normalized, weights, R, t)
    X, ok = _solve(Nc.sum(-3))
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
    uv, z = _project_broadcast(points.unsqueeze(-2), K, _dist5("dist", dist), R, t)
    err = torch.linalg.vector_norm(uv - pixels, dim=-1)
    return torch.where(z > 0, err, float("inf"))


# ----------------------------------------------------------------------------- robust points
@dataclass
class Triangulation:
    """Result of :func:`triangulate_points` for points ``(...)`` seen by ``C`` cameras.

    Attributes:
        points: ``(..., 3)`` world coordinates (NaN where fewer than 2 usable cameras).
        errors: ``(..., C)`` reprojection error in pixels per camera used, NaN elsewhere.
        used: ``(..., C)`` bool, the cameras kept.
        mean_error: ``(...)`` mean of ``errors`` over the cameras used.
        valid: ``(...)`` at least ``min_cameras`` cameras kept, all within ``max_error_px``.
    """

    points: torch.Tensor
    errors: torch.Tensor
    used: torch.Tensor
    mean_error: torch.Tensor
    valid: torch.Tensor

    @property
    def num_cameras(self) -> torch.Tensor:
        """``(...)`` number of cameras used."""
        return self.used.sum(-1)


DROP_RULES = ("leave_one_out", "largest_error")


def _check_drop(drop: str, min_cameras: int) -> None:
    if drop not in DROP_RULES:
        raise ValueError(f"drop must be one of {DROP_RULES}, got {drop!r}")
    if min_cameras < 2:
        raise ValueError(f"min_cameras must be >= 2, got {min_cameras}")


def _robust(
    Nc: torch.Tensor,
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
    C = used.shape[-1]

    def solve(used: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        X, ok = _solve((Nc * used[..., None, None]).sum(-3))
        ok = ok & (used.sum(-1) >= 2)
        X = torch.where(ok.unsqueeze(-1), X, float("nan"))
        err = reprojection_errors(X, pixels, K, dist, R, t)
        return X, ok, torch.where(used, err, float("nan"))

    eye = torch.eye(C, dtype=torch.bool, device=used.device)
    # A loop over the number of cameras that can be dropped (at most C - min_cameras), each
    # iteration re-solving every point with its current camera mask.
    for _ in range(max(C - min_cameras, 0)):
        X, ok, err = solve(used)
        worst_err = torch.where(used, err.nan_to_num(nan=float("inf")), -1.0).amax(-1)
        if drop == "largest_error":
            ranked = torch.where(used, err.nan_to_num(nan=float("inf")), -1.0)
            worst = ranked.argmax(-1)
        else:  # leave one out: drop the camera without which the others agree best
            rest = used.unsqueeze(-2) & ~eye  # (..., C_left_out, C)
            Xo, oko = _solve((Nc.unsqueeze(-4) * rest[..., None, None]).sum(-3))
            oko = oko & (rest.sum(-1) >= 2)
            Xo = torch.where(oko.unsqueeze(-1), Xo, float("nan"))
            eo = reprojection_errors(Xo, pixels.unsqueeze(-3), K, dist, R, t)
            eo = torch.where(rest, eo.nan_to_num(nan=float("inf")), 0.0).sum(-1)
            eo = eo / rest.sum(-1).clamp_min(1)
            worst = torch.where(used & oko, eo, float("inf")).argmin(-1)  # first of equals
        drop_now = ok & (worst_err > max_error_px) & (used.sum(-1) > min_cameras)
        hit = torch.nn.functional.one_hot(worst, C).bool() & drop_now.unsqueeze(-1)
        used = used & ~hit
    X, ok, err = solve(used)
    n = used.sum(-1)
    enough = n >= min_cameras
    mean = torch.where(used, err, 0.0).sum(-1) / n.clamp_min(1)
    mean = torch.where(n > 0, mean, float("nan"))
    within = torch.where(used, err.nan_to_num(nan=float("inf")), 0.0).amax(-1) <= max_error_px
    X = torch.where((ok & enough).unsqueeze(-1), X, float("nan"))
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
    ``min_cameras`` cameras remain, that camera is dropped and the point triangulated again.

    Args:
        pixels: ``(..., C, 2)`` observed (distorted) pixels, NaN where missing.
        weights: ``(..., C)`` DLT row weights (confidences); 0 or NaN = not observed.
        K: ``(C, 3, 3)``; dist: ``(C, 4|5)``; R: ``(C, 3, 3)``; t: ``(C, 3)``.
        max_error_px: reprojection error threshold in pixels.
        min_cameras: never drop below this many cameras (>= 2).
        normalized: ``(..., C, 2)`` the undistorted observations when already computed.

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
    Nc = dlt_normal_matrices(normalized, w, R, t)
    return _robust(Nc, seen, pixels, K, dist, R, t, max_error_px, min_cameras, drop)


# ----------------------------------------------------------------------------- people
@dataclass
class PeopleTriangulation(Triangulation):
    """Result of :func:`triangulate_people` for ``T`` frames and ``J`` joints.

    Attributes (besides :class:`Triangulation`'s, with leading dims ``(T, J)``):
        person: ``(T, C)`` the detection index chosen in each camera (-1: none).
        score: ``(T,)`` observations kept minus a fraction for the mean error (-inf: nobody).
    """

    person: torch.Tensor = None  # type: ignore[assignment]
    score: torch.Tensor = None  # type: ignore[assignment]


def triangulate_people(
    keypoints: torch.Tensor,
    K: torch.Tensor,
    dist: torch.Tensor,
    R: torch.Tensor,
    t: torch.Tensor,
    min_confidence: float = 0.3,
    max_error_px: float = 15.0,
    association_px: float = 20.0,
    min_common_joints: int = 3,
    min_cameras: int = 2,
    drop: str = "leave_one_out",
) -> PeopleTriangulation:
    """Associate the person seen by the most cameras across views and triangulate all frames
    and joints at once.

    For every frame, every detection ``(a, p)`` of every camera is a reference: it is
    triangulated joint by joint with every detection ``q`` of every other camera ``b`` (two
    views, weighted DLT); the cost of ``(a, p, b, q)`` is the mean two-view reprojection error
    over the joints both see (at least ``min_common_joints``, else infinite). Camera ``b``
    joins the reference's candidate with its cheapest detection if that costs less than
    ``association_px``. Each candidate is triangulated with :func:`triangulate_points`; the
    frame's winner keeps the most (joint, camera) observations, ties broken by the lower mean
    reprojection error (``score = kept - e / (1 + e)``).

    Args:
        keypoints: ``(C, T, P, J, 3)`` ``x, y, confidence`` per camera, frame, detection slot
            and joint (confidence 0 or NaN for empty slots and missing joints).
        K, dist, R, t: the ``C`` cameras (see :func:`triangulate_points`).
        min_confidence: joints below it get weight 0.
        max_error_px: reprojection threshold of the camera dropping (pixels).
        association_px: two-view reprojection threshold for joining a reference (pixels).
        min_common_joints: joints two detections must share to be compared.
        min_cameras: see :func:`triangulate_points`.

    Returns:
        :class:`PeopleTriangulation` with ``points (T, J, 3)``, ``errors (T, J, C)``, ...,
        ``person (T, C)``.
    """
    check_tensor("keypoints", keypoints, 5)
    if keypoints.dim() != 5 or keypoints.shape[-1] != 3:
        raise ValueError(
            f"keypoints must have shape (C, T, P, J, 3) (x, y, confidence), "
            f"got {tuple(keypoints.shape)}"
        )
    C, T, P, J, _ = keypoints.shape
    dist = _check_cameras(C, K, dist, R, t)
    if C < 2:
        raise ValueError(f"keypoints must hold at least 2 cameras, got {C}")
    if not 0 <= min_confidence <= 1:
        raise ValueError(f"min_confidence must be in [0, 1], got {min_confidence}")
    if not association_px > 0:
        raise ValueError(f"association_px must be positive, got {association_px}")
    if min_common_joints < 1:
        raise ValueError(f"min_common_joints must be >= 1, got {min_common_joints}")
    if not max_error_px > 0:
        raise ValueError(f"max_error_px must be positive, got {max_error_px}")
    _check_drop(drop, min_cameras)
    xy, conf = keypoints[..., :2], keypoints[..., 2]
    seen = torch.isfinite(xy).all(-1) & (conf >= min_confidence) & (conf > 0)
    w = torch.where(seen, conf, 0.0)  # (C, T, P, J)
    norm = undistort_points(xy.reshape(C, -1, 2), K, dist).reshape(
        C, T, P, J, 2
    )  # every detection once
    Nd = dlt_normal_matrices(norm.movedim(0, -2), w.movedim(0, -1), R, t).movedim(
        -3, 0
    )  # (C, T, P, J, 4, 4)

    # Two-view costs of every detection pair of every camera pair (a < b).
    ia, ib = torch.triu_indices(C, C, 1, device=keypoints.device)
    Q = ia.numel()
    pair_N = Nd[ia].unsqueeze(3) + Nd[ib].unsqueeze(2)  # (Q, T, P, P, J, 4, 4)
    X, ok = _solve(pair_N)

    def cam_err(idx: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        shape = (Q, 1, 1, 1, 1)
        return reprojection_errors(
            X,
            obs.unsqueeze(-2),
            K[idx].view(*shape, 1, 3, 3),
            dist[idx].view(*shape, 1, 5),
            R[idx].view(*shape, 1, 3, 3),
            t[idx].view(*shape, 1, 3),
        ).squeeze(-1)

    err_a = cam_err(ia, xy[ia].unsqueeze(3))  # (Q, T, P, P, J)
    err_b = cam_err(ib, xy[ib].unsqueeze(2))
    both = seen[ia].unsqueeze(3) & seen[ib].unsqueeze(2) & ok
    e = torch.where(both, (err_a + err_b) / 2, 0.0)
    n = both.sum(-1)
    cost = torch.where(n >= min_common_joints, e.sum(-1) / n.clamp_min(1), float("inf"))
    full = torch.full((C, C, T, P, P), float("inf"), dtype=X.dtype, device=X.device)
    full[ia, ib] = cost
    full[ib, ia] = cost.transpose(-1, -2)  # full[a, b, t, p, q]

    # Candidates: reference (a, p) plus the cheapest detection of every other camera.
    best_cost, best_q = full.min(-1)  # (C_a, C_b, T, P_a)
    choice = torch.where(best_cost < association_px, best_q, -1).permute(0, 3, 2, 1)
    own = torch.arange(P, device=X.device).view(1, P, 1).expand(C, P, T)
    eye = torch.eye(C, dtype=torch.bool, device=X.device).view(C, 1, 1, C)
    choice = torch.where(eye, own.unsqueeze(-1), choice)  # (C_a, P_a, T, C)
    enabled = (seen.sum(-1) >= min_common_joints).permute(0, 2, 1)  # (C, P, T)

    # Triangulate every candidate with camera dropping.
    pick = choice.clamp_min(0)
    camera = torch.arange(C, device=X.device).view(1, 1, 1, C)
    frame = torch.arange(T, device=X.device).view(1, 1, T, 1)
    take = (choice >= 0).unsqueeze(-1)  # (C, P, T, C, 1)
    g_seen = (seen[camera, frame, pick] & take).transpose(-1, -2)  # (C, P, T, J, C)
    g_xy = xy[camera, frame, pick].transpose(-2, -3)  # (C, P, T, J, C, 2)
    g_N = Nd[camera, frame, pick].transpose(-3, -4)  # (C, P, T, J, C, 4, 4)
    res = _robust(g_N, g_seen, g_xy, K, dist, R, t, max_error_px, min_cameras, drop)
    kept = (res.valid * res.num_cameras).sum(-1)  # (C, P, T)
    n_valid = res.valid.sum(-1)
    err = torch.where(res.valid, res.mean_error, 0.0).sum(-1) / n_valid.clamp_min(1)
    score = kept - err / (1 + err)
    score = torch.where(enabled & (kept > 0), score, float("-inf"))

    # The winner of every frame.
    flat = score.reshape(C * P, T)
    win_score, win = flat.max(0)  # (T,)
    fr = torch.arange(T, device=X.device)

    def sel(x: torch.Tensor) -> torch.Tensor:
        return x.reshape(C * P, T, *x.shape[3:])[win, fr]

    found = torch.isfinite(win_score)
    person = torch.where(found.unsqueeze(-1), sel(choice), -1)
    f_j = found.view(T, 1)
    return PeopleTriangulation(
        points=torch.where(f_j.unsqueeze(-1), sel(res.points), float("nan")),
        errors=torch.where(f_j.unsqueeze(-1), sel(res.errors), float("nan")),
        used=sel(res.used) & f_j.unsqueeze(-1),
        mean_error=torch.where(f_j, sel(res.mean_error), float("nan")),
        valid=sel(res.valid) & f_j,
        person=person,
        score=win_score,
    )
