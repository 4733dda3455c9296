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
3. :func:`triangulate_points`: while the largest reprojection error of a point (pixels,
   through the lens distortion) is above ``max_error_px`` and more than ``min_cameras``
   cameras remain, drop one camera and triangulate again; every point at once, with masks.
   ``drop="leave_one_out"`` (default) drops the camera without which the others agree best
   (lowest mean reprojection error): robust to an outlying camera that pulls the DLT point
   towards itself so that another camera shows the largest error. ``drop="largest_error"``
   drops the camera of largest error.
4. :func:`triangulate_people`: cross-view association. Every detection of every camera is a
   reference; it is triangulated joint by joint with every detection of every other camera
   (two views at a time, all frames at once); each other camera joins with its detection of
   lowest mean two-view reprojection error if below ``association_px``. The candidate with
   the most supporting (joint, camera) observations wins the frame and is triangulated with
   step 3.

On CPU the work is restricted to the rows that need it (``nonzero``, free there); on other
devices every row runs at fixed shapes without host synchronisation. Both give the same
values (tested).

Points behind a camera get an infinite reprojection error in that camera (dropped first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ._checks import check_last_dims, check_tensor
from .camera import _dist5, _project_uvz, undistort_points

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


_UPPER = [0, 1, 2, 3, 5, 6, 7, 10, 11, 15]  # row-major indices of the upper triangle


def _soa_sym(M: torch.Tensor) -> list[list[torch.Tensor]]:
    """Symmetric ``M (..., 4, 4)`` as rows of entries sharing the 10 upper-triangle tensors."""
    flat = M.reshape(-1, 16)[:, _UPPER].T.contiguous()  # (10, B)
    u = dict(zip(_UPPER, flat, strict=True))
    return [[u[4 * min(i, j) + max(i, j)] for j in range(4)] for i in range(4)]


def _adjugate4(M: torch.Tensor) -> torch.Tensor:
    """Adjugate of ``M (..., 4, 4)`` (``det(M) M^-1`` where invertible)."""
    adj = _adjugate_soa(_soa(M))
    return torch.stack([torch.stack(r, -1) for r in adj], -2).reshape(M.shape)


def _mm(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """``a b - c d`` with one temporary (fused, in place on a fresh tensor)."""
    return torch.mul(a, b).addcmul_(c, d, value=-1)


def _dot3(a, x, b, y, c, z) -> torch.Tensor:
    """``a x - b y + c z`` with one temporary."""
    return torch.mul(a, x).addcmul_(b, y, value=-1).addcmul_(c, z)


def _adjugate_sym(m: list[list[torch.Tensor]], keys) -> dict:
    """Entries ``keys`` (``(i, j)``, ``i <= j``) of the adjugate of a symmetric 4 x 4 matrix
    given as rows of entries (the same formulas as :func:`_adjugate_soa`, fused ops)."""
    s0 = _mm(m[0][0], m[1][1], m[0][1], m[0][1])
    s1 = _mm(m[0][0], m[1][2], m[1][0], m[0][2])
    s2 = _mm(m[0][0], m[1][3], m[1][0], m[0][3])
    s3 = _mm(m[0][1], m[1][2], m[1][1], m[0][2])
    s4 = _mm(m[0][1], m[1][3], m[1][1], m[0][3])
    s5 = _mm(m[0][2], m[1][3], m[1][2], m[0][3])
    c1 = _mm(m[2][0], m[3][2], m[3][0], m[2][2])
    c2 = _mm(m[2][0], m[3][3], m[3][0], m[2][3])
    c3 = _mm(m[2][1], m[3][2], m[3][1], m[2][2])
    c4 = _mm(m[2][1], m[3][3], m[3][1], m[2][3])
    c5 = _mm(m[2][2], m[3][3], m[3][2], m[2][3])
    formulas = {
        (0, 0): lambda: _dot3(m[1][1], c5, m[1][2], c4, m[1][3], c3),
        (0, 1): lambda: _dot3(m[0][1], c5, m[0][2], c4, m[0][3], c3).neg_(),
        (0, 2): lambda: _dot3(m[3][1], s5, m[3][2], s4, m[3][3], s3),
        (0, 3): lambda: _dot3(m[2][1], s5, m[2][2], s4, m[2][3], s3).neg_(),
        (1, 1): lambda: _dot3(m[0][0], c5, m[0][2], c2, m[0][3], c1),
        (1, 2): lambda: _dot3(m[3][0], s5, m[3][2], s2, m[3][3], s1).neg_(),
        (1, 3): lambda: _dot3(m[2][0], s5, m[2][2], s2, m[2][3], s1),
        (2, 2): lambda: _dot3(m[3][0], s4, m[3][1], s2, m[3][3], s0),
        (2, 3): lambda: _dot3(m[2][0], s4, m[2][1], s2, m[2][3], s0).neg_(),
        (3, 3): lambda: _dot3(m[2][0], s3, m[2][1], s1, m[2][2], s0),
    }
    return {k: formulas[k]() for k in keys}


LAGUERRE_STEPS = 10
"""Laguerre steps for the smallest root of the characteristic polynomial, after one Newton
step from 0: from there they rise monotonically to it (all roots are real) and converge
cubically; clustered roots converge far faster than with Newton."""

RANK_TOL = 1e-14
"""Below this product of eigenvalue gaps (trace-normalised), :func:`smallest_eigenvector`
returns 0: the smallest eigenvalue is (numerically) repeated."""

_ALL = [(i, j) for i in range(4) for j in range(i, 4)]
_PAIRS = [(i, j) for i in range(4) for j in range(i + 1, 4)]

COMPACT_ON_CPU = True
"""On CPU, work only on the rows that need it (see :func:`_on_rows`); same values."""

FAST_STEPS = 3
"""Laguerre steps taken for every matrix on CPU before only the ones still moving go on."""

CONVERGED = 1e-17
"""A Laguerre step below this (eigenvalues of the trace-normalised matrix are in [0, 1]) has
converged: the eigenvector error it leaves is ``CONVERGED / gap``, squared by the adjugate."""


def _laguerre(lam: torch.Tensor, free: torch.Tensor, coeffs: tuple, steps: int):
    """``steps`` Laguerre steps on ``l^4 - c3 l^3 + c2 l^2 - c1 l + c0`` from ``lam`` (below
    its smallest root), where ``free``; returns the new ``lam`` and the last step."""
    c0, c1, c2, c3 = coeffs
    nc1, c22, m3c3, m6c3 = -c1, 2 * c2, -3 * c3, -6 * c3
    free4 = free * 4.0
    step = torch.zeros_like(lam)
    for _ in range(steps):  # fixed Laguerre steps, every matrix at once (fused ops)
        t = torch.addcmul(c2, lam - c3, lam)
        p = torch.addcmul(c0, torch.addcmul(nc1, t, lam), lam)
        dp = torch.addcmul(nc1, torch.addcmul(c22, torch.add(m3c3, lam, alpha=4), lam), lam)
        d2p = torch.addcmul(c22, torch.add(m6c3, lam, alpha=12), lam)
        ip = p.reciprocal_()  # inf where p == 0: the step below turns NaN/inf and is zeroed
        g = dp.mul_(ip)
        gg = g * g
        h = torch.addcmul(gg, d2p, ip, value=-1)
        root = h.add_(gg, alpha=-0.25).mul_(12).clamp_min_(0).sqrt_()  # sqrt(3 (4h - g^2))
        den = root.copysign_(g).add_(g)  # the larger of |g - root|, |g + root|
        step = den.reciprocal_().mul_(free4).nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)
        lam = lam - step
    return lam, step


def _eigvec_soa(n: list[list[torch.Tensor]]) -> list[torch.Tensor]:
    """:func:`smallest_eigenvector` on a symmetric matrix given as rows of ``(B,)`` entries;
    returns the 4 entries of the unit eigenvector (0 where not unique)."""
    tr = n[0][0] + n[1][1] + n[2][2] + n[3][3]
    inv = 1 / tr.masked_fill(tr <= 0, 1.0)
    scaled = {(i, j): n[i][j] * inv for i, j in _ALL}
    a = [[scaled[min(i, j), max(i, j)] for j in range(4)] for i in range(4)]
    adj = _adjugate_sym(a, [(0, 0), (1, 1), (2, 2), (3, 3), (0, 1), (0, 2), (0, 3)])
    # Characteristic polynomial l^4 - c3 l^3 + c2 l^2 - c1 l + c0.
    c3 = a[0][0] + a[1][1] + a[2][2] + a[3][3]
    c2 = torch.zeros_like(c3)
    for i, j in _PAIRS:  # the 6 principal 2 x 2 minors
        c2.addcmul_(a[i][i], a[j][j]).addcmul_(a[i][j], a[i][j], value=-1)
    c1 = adj[0, 0] + adj[1, 1] + adj[2, 2] + adj[3, 3]  # sum of principal 3 x 3 minors
    c0 = torch.mul(a[0][0], adj[0, 0]).addcmul_(a[0][1], adj[0, 1])
    c0.addcmul_(a[0][2], adj[0, 2]).addcmul_(a[0][3], adj[0, 3])  # det, along row 0
    at_root = (c0 <= 0) | (c1 <= 0)  # det <= 0 by rounding: 0 is (numerically) the root
    free = ~at_root
    lam = (c0 / (c1 + at_root)) * free  # one Newton step from 0 (stays below the root)
    coeffs = (c0, c1, c2, c3)
    if _compact(c0.device) and c0.numel() > 0:
        # CPU: a few steps for every matrix, then only for those still moving (compacted
        # with nonzero, free on CPU). Elsewhere: the fixed steps, no host synchronisation.
        lam, step = _laguerre(lam, free, coeffs, FAST_STEPS)
        slow = (step.abs() > CONVERGED).nonzero().squeeze(-1)
        if slow.numel():
            sub = tuple(c[slow] for c in coeffs)
            lam_s, _ = _laguerre(lam[slow], free[slow], sub, LAGUERRE_STEPS - FAST_STEPS)
            lam = lam.index_put((slow,), lam_s)
    else:
        lam, _ = _laguerre(lam, free, coeffs, LAGUERRE_STEPS)
    diag = [a[i][i] - lam for i in range(4)]
    m = [[diag[i] if i == j else a[i][j] for j in range(4)] for i in range(4)]
    adj = _adjugate_sym(m, _ALL)

    def e(i: int, j: int) -> torch.Tensor:
        return adj[min(i, j), max(i, j)]

    # The column of largest diagonal entry (selects without a strided argmax).
    v, best = [e(i, 0) for i in range(4)], adj[0, 0].abs()
    for k in range(1, 4):  # the three other columns
        d = adj[k, k].abs()
        take = d > best
        v = [torch.where(take, e(i, k), v[i]) for i in range(4)]
        best = torch.where(take, d, best)
    # One more application of the adjugate: the error ratio squared.
    v = [torch.mul(e(i, 0), v[0]).addcmul_(e(i, 1), v[1]).addcmul_(e(i, 2), v[2])
         .addcmul_(e(i, 3), v[3]) for i in range(4)]  # fmt: skip
    norm = torch.mul(v[0], v[0]).addcmul_(v[1], v[1]).addcmul_(v[2], v[2])
    norm = norm.addcmul_(v[3], v[3]).sqrt_()
    # c1 >= l2 l3 l4 and best ~ (l2 - l1)(l3 - l1)(l4 - l1) |v_k|^2 (trace-normalised):
    # below RANK_TOL the smallest eigenvalue is not simple (e.g. rank < 3): no unique answer.
    unique = (c1 > RANK_TOL) & (best > RANK_TOL) & (norm > 0)
    inv = unique / (norm + ~unique)
    return [x * inv for x in v]


def smallest_eigenvector(N: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigenvector of the smallest eigenvalue of symmetric positive semi-definite ``(..., 4, 4)``
    matrices, all at once with elementwise tensor code (no per-matrix LAPACK call).

    The characteristic polynomial ``p(l) = det(A - l I)`` of ``A = N / trace(N)`` has only real
    roots, so from below its smallest root (one Newton step from 0 stays below it) Laguerre's
    method rises monotonically to it (:data:`LAGUERRE_STEPS` steps). The adjugate of
    ``A - l I`` is then, up to scale, the projector on that eigenvector: its column of largest
    diagonal entry, multiplied once more by the adjugate, is the eigenvector. Equal to
    ``torch.linalg.eigh``'s up to sign wherever the smallest eigenvalue is simple (to ~1e-14
    in float64 when it is well separated; like any eigensolver's, the error grows as
    ``eps / gap`` as the two smallest eigenvalues meet). Only the upper triangle is read.

    Args:
        N: ``(..., 4, 4)`` symmetric PSD (e.g. DLT normal matrices).

    Returns:
        ``v (..., 4)`` unit eigenvectors (zero where the smallest eigenvalue is repeated, e.g.
        ``N`` of rank < 3: no unique answer; see :data:`RANK_TOL`) and ``eigenvalue (...)``,
        the Rayleigh quotient ``v^T N v``.

    Example:
        >>> N = torch.diag(torch.tensor([3.0, 1.0, 0.5, 2.0], dtype=torch.float64))
        >>> v, lam = smallest_eigenvector(N)
        >>> v.abs().tolist(), round(float(lam), 12)
        ([0.0, 0.0, 1.0, 0.0], 0.5)
    """
    check_tensor("N", N, 2)
    check_last_dims("N", N, (4, 4), "symmetric 4 x 4 matrix")
    batch = N.shape[:-2]
    n = _soa_sym(N)
    v = _eigvec_soa(n)
    rq = sum(n[i][i] * v[i] * v[i] for i in range(4))
    rq = rq + 2 * sum(n[i][j] * v[i] * v[j] for i in range(4) for j in range(i + 1, 4))
    return torch.stack(v, -1).reshape(*batch, 4), rq.reshape(batch)


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


def _dlt_features(normalized: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``(..., C, 4)``: ``w^2 (x^2 + y^2), w^2 x, w^2 y, w^2`` (0 where the weight is 0)."""
    use = weights > 0
    xy = torch.where(use.unsqueeze(-1), normalized, 0.0)
    w2 = torch.where(use, weights, 0.0).square().unsqueeze(-1)
    return torch.cat([xy.square().sum(-1, keepdim=True), xy, torch.ones_like(xy[..., :1])], -1) * w2


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


def _solve_upper(u: torch.Tensor, eps: float = 1e-12) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_solve` on the upper triangles laid out as ``(10, B)`` (row-major order)."""
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


def _compact(device: torch.device) -> bool:
    """Whether to compact rows with ``nonzero`` (CPU, eager): free there, a host
    synchronisation elsewhere. ``COMPACT_ON_CPU = False`` runs the fixed-shape path on CPU."""
    return device.type == "cpu" and COMPACT_ON_CPU and not torch.compiler.is_compiling()


def _on_rows(mask: torch.Tensor, fn, inputs: list[torch.Tensor], fills: list) -> tuple:
    """``fn(*rows) -> outputs`` for the rows where ``mask (...)`` holds; ``fills`` elsewhere.

    Every row is independent, so the values do not depend on the path: on CPU only the masked
    rows are computed (compacted with ``nonzero``, free there); on other devices every row is
    computed at fixed shapes and then masked, without a host synchronisation.
    """
    shape = mask.shape
    if not _compact(mask.device):
        outs = fn(*inputs)
        return tuple(
            torch.where(mask.view(*shape, *[1] * (o.dim() - len(shape))), o, fill)
            for o, fill in zip(outs, fills, strict=True)
        )
    idx = mask.reshape(-1).nonzero().squeeze(-1)
    outs = fn(*[x.reshape(-1, *x.shape[len(shape) :])[idx] for x in inputs])
    result = []
    for o, fill in zip(outs, fills, strict=True):
        full = torch.full((mask.numel(), *o.shape[1:]), fill, dtype=o.dtype, device=o.device)
        full[idx] = o
        result.append(full.reshape(*shape, *o.shape[1:]))
    return tuple(result)


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
    n = used.sum(-1)
    enough = n >= min_cameras
    mean = torch.where(used, err, 0.0).sum(-1) / n.clamp_min(1)
    mean = torch.where(n > 0, mean, nan)
    within = torch.where(used, err.nan_to_num(nan=float("inf")), 0.0).amax(-1) <= max_error_px
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
    error is lowest, with ``drop="largest_error"`` the camera of largest error. The loop is
    over the at most ``C - min_cameras`` drops; every point is handled at once.

    Args:
        pixels: ``(..., C, 2)`` observed (distorted) pixels, NaN where missing.
        weights: ``(..., C)`` DLT row weights (confidences); 0 or NaN = not observed.
        K: ``(C, 3, 3)``; dist: ``(C, 4|5)``; R: ``(C, 3, 3)``; t: ``(C, 3)``.
        max_error_px: reprojection error threshold in pixels.
        min_cameras: never drop below this many cameras (>= 2).
        normalized: ``(..., C, 2)`` the undistorted observations when already computed.
        drop: ``"leave_one_out"`` or ``"largest_error"`` (see above).

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


# ----------------------------------------------------------------------------- people
@dataclass
class PeopleTriangulation(Triangulation):
    """Result of :func:`triangulate_people` for ``T`` frames and ``J`` joints.

    Attributes (besides :class:`Triangulation`'s, with leading dims ``(T, J)``):
        person: ``(T, C)`` the detection index chosen in each camera (-1: none).
        score: ``(T,)`` the winner's association score: supporting (joint, camera)
            observations minus ``e / (1 + e)`` for its mean two-view error ``e`` (-inf: nobody).
    """

    person: torch.Tensor = None  # type: ignore[assignment]
    score: torch.Tensor = None  # type: ignore[assignment]


def _per_camera(keypoints) -> list[torch.Tensor]:
    if isinstance(keypoints, torch.Tensor):
        check_tensor("keypoints", keypoints, 5)
        if keypoints.dim() != 5 or keypoints.shape[-1] != 3:
            raise ValueError(
                f"keypoints must have shape (C, T, P, J, 3) (x, y, confidence), "
                f"got {tuple(keypoints.shape)}"
            )
        return list(keypoints.unbind(0))
    cams = list(keypoints)
    for c, k in enumerate(cams):  # argument checks per camera
        check_tensor(f"keypoints[{c}]", k, 4)
        if k.dim() != 4 or k.shape[-1] != 3:
            raise ValueError(f"keypoints[{c}] must have shape (T, P_c, J, 3), got {tuple(k.shape)}")
        if k.shape[0] != cams[0].shape[0] or k.shape[2] != cams[0].shape[2]:
            raise ValueError(
                f"keypoints[{c}] has {tuple(k.shape[::2][:2])} (T, J), camera 0 has "
                f"{tuple(cams[0].shape[::2][:2])}"
            )
    return cams


def triangulate_people(
    keypoints: torch.Tensor | list[torch.Tensor],
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

    1. Every detection ``p`` of every camera ``a`` is a reference: it is triangulated joint by
       joint with every detection ``q`` of every other camera ``b`` (two views, weighted DLT,
       all frames at once). The cost of ``(a, p, b, q)`` is the mean two-view reprojection
       error over the joints both see (at least ``min_common_joints``, else infinite).
    2. Camera ``b`` joins the reference's candidate with its cheapest detection if that costs
       less than ``association_px``. A candidate's score counts its supporting observations:
       the reference's joints plus, per joined camera, the joints whose two-view error is
       within ``max_error_px``; ties are broken by the lower mean cost ``e``
       (``score = support - e / (1 + e)``). The best candidate of each frame wins.
    3. The winner's detections are triangulated with :func:`triangulate_points` (weighted DLT
       and camera dropping).

    Args:
        keypoints: ``(C, T, P, J, 3)`` ``x, y, confidence`` per camera, frame, detection slot
            and joint (confidence 0 or NaN for empty slots and missing joints), or a list of
            ``C`` tensors ``(T, P_c, J, 3)`` (as many slots as each camera needs: less work).
        K, dist, R, t: the ``C`` cameras (see :func:`triangulate_points`).
        min_confidence: joints below it get weight 0.
        max_error_px: reprojection threshold (pixels) of the camera dropping and of the
            two-view support count.
        association_px: two-view cost threshold for joining a reference (pixels).
        min_common_joints: joints two detections must share to be compared.
        min_cameras, drop: see :func:`triangulate_points`.

    Returns:
        :class:`PeopleTriangulation` with ``points (T, J, 3)``, ``errors (T, J, C)``, ...,
        ``person (T, C)``. Not differentiable (the association is discrete): it runs under
        ``torch.inference_mode`` (less per-op overhead) and returns ordinary tensors.
    """
    with torch.inference_mode():
        res = _triangulate_people(keypoints, K, dist, R, t, min_confidence, max_error_px,
                                  association_px, min_common_joints, min_cameras, drop)  # fmt: skip
    return PeopleTriangulation(**{k: v.clone() for k, v in vars(res).items()})


def _triangulate_people(
    keypoints: torch.Tensor | list[torch.Tensor],
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
    cams = _per_camera(keypoints)
    C = len(cams)
    if C < 2:
        raise ValueError(f"keypoints must hold at least 2 cameras, got {C}")
    T, _, J, _ = cams[0].shape
    dist = _check_cameras(C, K, dist, R, t)
    if not 0 <= min_confidence <= 1:
        raise ValueError(f"min_confidence must be in [0, 1], got {min_confidence}")
    if not association_px > 0:
        raise ValueError(f"association_px must be positive, got {association_px}")
    if min_common_joints < 1:
        raise ValueError(f"min_common_joints must be >= 1, got {min_common_joints}")
    if not max_error_px > 0:
        raise ValueError(f"max_error_px must be positive, got {max_error_px}")
    _check_drop(drop, min_cameras)
    dev, dtype = K.device, K.dtype
    basis = _dlt_basis(R, t)  # (C, 4, 16)
    # Every detection of every camera at once: the cameras' detections, flattened, are padded
    # to one (C, L, 3) tensor (a loop over the C cameras to pack and unpack them).
    counts = [k[..., 0].numel() for k in cams]
    L = max(counts)
    packed = torch.zeros(C, L, 3, dtype=dtype, device=dev)
    for c, k in enumerate(cams):
        packed[c, : counts[c]] = k.reshape(-1, 3).to(device=dev, dtype=dtype)
    pxy, conf = packed[..., :2], packed[..., 2]
    pseen = torch.isfinite(pxy).all(-1) & (conf >= min_confidence) & (conf > 0)
    cidx = torch.arange(C, device=dev).view(C, 1).expand(C, L)

    def undistort(px: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor]:
        return (undistort_points(px.unsqueeze(-2), K[c], dist[c]).squeeze(-2),)

    (norm,) = _on_rows(pseen, undistort, [pxy, cidx], [0.0])  # (C, L, 2), seen points only
    pf = _dlt_features(norm, torch.where(pseen, conf, 0.0))  # (C, L, 4)
    pN = pf @ basis  # (C, L, 16)
    pU = pN[..., _UPPER].transpose(1, 2).contiguous()  # (C, 10, L) upper triangles
    xy, seen, fd = [], [], []
    for c, k in enumerate(cams):  # unpack to (T, P_c, J, ...) per camera
        shape, n = k.shape[:-1], counts[c]
        xy.append(pxy[c, :n].reshape(*shape, 2))
        seen.append(pseen[c, :n].reshape(shape))
        fd.append(pf[c, :n].reshape(*shape, 4))

    # 1. Two-view costs of every detection pair of every camera pair, solved in one batch.
    #    On CPU only the (frame, p, q, joint) rows where both detections see the joint are
    #    gathered (nonzero is free there); elsewhere every row, masked afterwards.
    pairs = [(a, b) for a in range(C) for b in range(a + 1, C)]
    compact = _compact(dev)
    Ns, obs, bins, valid, shapes = [], [], [], [], []
    offset = 0
    for a, b in pairs:  # a loop over camera pairs, gathering their detection pairs
        both_seen = seen[a].unsqueeze(2) & seen[b].unsqueeze(1)  # (T, P_a, P_b, J)
        T_, P_a, P_b, _ = both_seen.shape
        if compact:
            rows = both_seen.nonzero()
        else:
            grid = [torch.arange(n, device=dev) for n in both_seen.shape]
            rows = torch.stack(torch.meshgrid(*grid, indexing="ij"), -1).reshape(-1, 4)
        fr, p, q, j = rows.unbind(-1)
        ia = (fr * P_a + p) * J + j  # flat (frame, slot, joint) rows of camera a and b
        ib = (fr * P_b + q) * J + j
        Ns.append(pU[a].index_select(1, ia) + pU[b].index_select(1, ib))  # (10, rows)
        obs.append(torch.stack([xy[a].reshape(-1, 2).index_select(0, ia),
                                xy[b].reshape(-1, 2).index_select(0, ib)], -2))  # fmt: skip
        bins.append(offset + (fr * P_a + p) * P_b + q)  # the (frame, p, q) of every row
        if not compact:  # the compacted rows all see the joint in both views
            valid.append(both_seen.reshape(-1))
        shapes.append((T_, P_a, P_b))
        offset += T_ * P_a * P_b
    X, ok = _solve_upper(torch.cat(Ns, 1))
    sizes = [len(b) for b in bins]
    # Reprojection errors in the pair's two cameras (rows are grouped by pair).
    err = torch.cat([
        reprojection_errors(Xk, ok_obs, K[[a, b]], dist[[a, b]], R[[a, b]], t[[a, b]])
        for (a, b), Xk, ok_obs in zip(pairs, X.split(sizes), obs, strict=True)
    ])  # (n, 2)  # fmt: skip
    # Per (pair, frame, p, q): sums over the joints both see, as one scatter-add each.
    valid, bins = (torch.cat(valid) & ok if valid else ok), torch.cat(bins)
    e_sum = torch.zeros(offset, dtype=dtype, device=dev)
    e_sum.index_add_(0, bins, torch.where(valid, err.mean(-1), 0.0))
    n_sum = torch.zeros(offset, dtype=torch.long, device=dev).index_add_(0, bins, valid.long())
    good = valid & (err.amax(-1) <= max_error_px)
    s_sum = torch.zeros(offset, dtype=torch.long, device=dev).index_add_(0, bins, good.long())
    cost_all = torch.where(n_sum >= min_common_joints, e_sum / n_sum.clamp_min(1), float("inf"))
    sizes = [math.prod(sh) for sh in shapes]  # bins per pair
    inf = torch.tensor(float("inf"), dtype=dtype, device=dev)
    best_q = [[None] * C for _ in range(C)]  # best_q[a][b]: (T, P_a) cheapest q in b
    best_cost = [[None] * C for _ in range(C)]
    best_support = [[None] * C for _ in range(C)]
    for (a, b), shape, cost, support in zip(pairs, shapes, cost_all.split(sizes),
                                            s_sum.split(sizes), strict=True):  # fmt: skip
        cost, support = cost.view(shape), support.view(shape)  # (T, P_a, P_b)
        for ref, other, c_ab, s_ab in ((a, b, cost, support), (b, a, cost.mT, support.mT)):
            if c_ab.shape[-1] == 0:  # the other camera has no detection slot
                best_cost[ref][other] = inf.expand(c_ab.shape[:-1])
                best_q[ref][other] = torch.zeros(c_ab.shape[:-1], dtype=torch.long, device=dev)
                best_support[ref][other] = best_q[ref][other]
                continue
            bc, bq = c_ab.min(-1)
            best_cost[ref][other], best_q[ref][other] = bc, bq
            best_support[ref][other] = s_ab.gather(-1, bq.unsqueeze(-1)).squeeze(-1)

    # 2. One candidate per reference detection; the best of each frame wins.
    choices, scores = [], []
    for a in range(C):  # a loop over the reference cameras
        P_a = cams[a].shape[1]
        own = torch.arange(P_a, device=dev).expand(T, P_a)
        choice, support = [], seen[a].sum(-1)
        cost_sum = torch.zeros(T, P_a, dtype=dtype, device=dev)
        joined = torch.zeros(T, P_a, dtype=torch.long, device=dev)
        for b in range(C):  # the other cameras
            if b == a:
                choice.append(own)
                continue
            match = best_cost[a][b] < association_px
            choice.append(torch.where(match, best_q[a][b], -1))
            support = support + torch.where(match, best_support[a][b], 0)
            cost_sum = cost_sum + torch.where(match, best_cost[a][b], 0.0)
            joined = joined + match
        e = cost_sum / joined.clamp_min(1)
        score = support - e / (1 + e)
        enabled = seen[a].sum(-1) >= min_common_joints
        scores.append(torch.where(enabled, score, float("-inf")))
        choices.append(torch.stack(choice, -1))  # (T, P_a, C)
    score, choice = torch.cat(scores, 1), torch.cat(choices, 1)  # (T, sum P_c[, C])
    if score.shape[1] == 0:
        score = torch.full((T, 1), float("-inf"), dtype=dtype, device=dev)
        choice = torch.full((T, 1, C), -1, dtype=torch.long, device=dev)
    win_score, win = score.max(1)  # (T,)
    found = torch.isfinite(win_score)
    person = choice.gather(1, win.view(T, 1, 1).expand(T, 1, C)).squeeze(1)
    person = torch.where(found.unsqueeze(-1), person, -1)  # (T, C)

    # 3. Robust triangulation of the winners (gathered per camera: a loop over cameras).
    g_xy, g_seen, g_f = [], [], []
    frame = torch.arange(T, device=dev)
    for c in range(C):
        if cams[c].shape[1] == 0:
            g_xy.append(torch.full((T, J, 2), float("nan"), dtype=dtype, device=dev))
            g_seen.append(torch.zeros(T, J, dtype=torch.bool, device=dev))
            g_f.append(torch.zeros(T, J, 4, dtype=dtype, device=dev))
            continue
        q = person[:, c].clamp_min(0)
        g_xy.append(xy[c][frame, q])
        g_seen.append(seen[c][frame, q] & (person[:, c] >= 0).unsqueeze(-1))
        g_f.append(fd[c][frame, q])
    res = _robust(torch.stack(g_f, -2), torch.stack(g_seen, -1), torch.stack(g_xy, -2),
                  K, dist, R, t, max_error_px, min_cameras, drop)  # fmt: skip
    return PeopleTriangulation(
        points=res.points,
        errors=res.errors,
        used=res.used,
        mean_error=res.mean_error,
        valid=res.valid,
        person=person,
        score=win_score,
    )
