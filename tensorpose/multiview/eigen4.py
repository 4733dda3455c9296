"""The eigenvector of the smallest eigenvalue of batched symmetric 4 x 4 matrices, in closed form
with elementwise tensor code (Laguerre's method on the characteristic polynomial, then the
adjugate): the solver of the DLT normal matrices of :mod:`tensorpose.multiview.dlt`.

The 4 x 4 code works on "structure of arrays": a list of 16 contiguous (B,) tensors, one per
matrix entry. Strided views N[..., i, j] of a (B, 4, 4) tensor are ~25x slower to combine.
"""

from __future__ import annotations

import torch

from ..ops._checks import check_last_dims, check_tensor
from .rows import _compact

__all__ = ["smallest_eigenvector"]


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
