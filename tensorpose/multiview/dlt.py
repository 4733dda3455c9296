"""Weighted linear triangulation (DLT) of every point at once, and reprojection errors.

Cameras follow :mod:`tensorpose.ops.camera` (OpenCV): ``K (C, 3, 3)``, ``dist (C, 5)``,
``R (C, 3, 3)``, ``t (C, 3)`` with ``x_cam = R @ x + t``. For camera ``c`` with undistorted
normalised observation ``(x, y)`` (:func:`~tensorpose.ops.camera.undistort_points`) and weight
``w`` (the detector's confidence, 0 below a threshold) the rows ``w (x P3 - P1)`` and
``w (y P3 - P2)`` of ``P = [R | t]``; the point is the eigenvector of the smallest eigenvalue of
the ``(4, 4)`` normal matrix ``A^T A``, found for every point at once by
:func:`smallest_eigenvector`'s closed form (equal to
``torch.linalg.eigh``'s and much faster on CPU for batches of 4 x 4 matrices).

Points behind a camera get an infinite reprojection error in that camera.

The 4 x 4 eigensolver works on "structure of arrays": a list of 16 contiguous (B,) tensors, one
per matrix entry (strided views ``N[..., i, j]`` of a (B, 4, 4) tensor are ~25x slower to
combine): Laguerre's method on the characteristic polynomial, then the adjugate. On CPU the
triangulation ops compute only the rows that need it (:func:`_on_rows`, ``nonzero``, free
there); on other devices every row at fixed shapes without a host synchronisation; both give
the same values (tested).
"""

from __future__ import annotations

import torch

from ..ops._checks import check_last_dims, check_tensor
from ..ops.camera import opencv_dist5, project_uvz

__all__ = ["dlt_normal_matrices", "reprojection_errors", "smallest_eigenvector", "weighted_dlt"]


# ---------------------------------------------------------------------- row compaction
COMPACT_ON_CPU = True
"""On CPU, work only on the rows that need it (see :func:`_on_rows`); same values."""


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
    outs = fn(*[x.reshape(-1, *x.shape[len(shape) :]).index_select(0, idx) for x in inputs])
    result = []
    for o, fill in zip(outs, fills, strict=True):  # the function's few outputs
        full = torch.full((mask.numel(), *o.shape[1:]), fill, dtype=o.dtype, device=o.device)
        result.append(full.index_copy_(0, idx, o).reshape(*shape, *o.shape[1:]))
    return tuple(result)


# ---------------------------------------------------------------------- 4 x 4 eigensolver
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
            sub = tuple(c.index_select(0, slow) for c in coeffs)
            lam_s, _ = _laguerre(lam.index_select(0, slow), free.index_select(0, slow), sub,
                                 LAGUERRE_STEPS - FAST_STEPS)  # fmt: skip
            lam = lam.index_copy(0, slow, lam_s)
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


# ---------------------------------------------------------------------- DLT


def _check_cameras(C: int, K, dist, R, t) -> torch.Tensor:
    check_tensor("K", K, 3)
    check_last_dims("K", K, (3, 3), "intrinsic matrices")
    check_tensor("R", R, 3)
    check_last_dims("R", R, (3, 3), "rotation matrices")
    check_tensor("t", t, 2)
    check_last_dims("t", t, (3,), "translations")
    dist = opencv_dist5("dist", dist)
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
    u, v, z = project_uvz(points.unsqueeze(-2), K, opencv_dist5("dist", dist), R, t)
    ou, ov = pixels.unbind(-1)
    err = (u - ou).hypot_(v - ov)
    return torch.where(z > 0, err, float("inf"))
