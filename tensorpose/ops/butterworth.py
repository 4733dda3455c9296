"""Zero-phase Butterworth low-pass filtering, batched over every signal at once.

:func:`butterworth` designs the digital filter (``scipy.signal.butter``'s ``b, a``: analog
prototype, pre-warped, bilinear transform), :func:`lfilter` runs it causally and
:func:`filtfilt` forward then backward with odd padding at both ends and steady-state initial
conditions, as ``scipy.signal.filtfilt`` (its defaults ``padtype="odd"``,
``padlen = 3 * max(len(a), len(b))``) and as Pose2Sim's default 3D filter.

The recurrence is run in blocks of ``L`` frames: within a block the output is the block's input
through the (exact, finite) ``L x L`` impulse-response matrix plus the response to the state at
the block's start, so the only loop is over ``T / L`` block states (one small matmul each); every
signal (people x joints x coordinates) is one row of the same matmuls. In float64 it equals
scipy to ~1e-12 of the signal's range (``tests/ops/test_butterworth.py``).
"""

from __future__ import annotations

import cmath
import math

import torch

from ._checks import check_tensor

__all__ = ["butterworth", "filtfilt", "lfilter"]

_BLOCK = 64


def _poly(roots: list[complex]) -> list[complex]:
    coeffs = [1 + 0j]
    for r in roots:  # (order) factors, host constants
        coeffs = [a - r * b for a, b in zip([*coeffs, 0j], [0j, *coeffs], strict=True)]
    return coeffs


def butterworth(order: int, cutoff: float, fps: float) -> tuple[list[float], list[float]]:
    """Coefficients ``(b, a)`` of a digital low-pass Butterworth filter of ``order`` with its
    -3 dB point at ``cutoff`` Hz for samples at ``fps`` (``scipy.signal.butter(order,
    cutoff / (fps / 2))``). Host constants (Python floats), ``a[0] == 1``."""
    if not (isinstance(order, int) and 1 <= order <= 16):
        raise ValueError(f"order must be an integer in 1..16, got {order!r}")
    if not (math.isfinite(fps) and fps > 0 and math.isfinite(cutoff) and 0 < cutoff < fps / 2):
        raise ValueError(f"cutoff must be in (0, fps/2) = (0, {fps / 2:g}) Hz, got {cutoff!r}")
    warped = 4.0 * math.tan(math.pi * (cutoff / (fps / 2)) / 2.0)  # fs = 2 after normalising
    poles = [-cmath.exp(1j * math.pi * m / (2 * order)) * warped
             for m in range(-order + 1, order, 2)]  # fmt: skip
    gain = warped**order
    z_poles = [(4.0 + p) / (4.0 - p) for p in poles]
    den = 1 + 0j
    for p in poles:  # bilinear transform's gain
        den *= 4.0 - p
    gain = gain / den.real
    b = [gain * c.real for c in _poly([-1 + 0j] * order)]
    a = [c.real for c in _poly(z_poles)]
    return b, a


def _state_space(b: list[float], a: list[float], dtype, device):
    """Transposed direct form II (scipy's ``lfilter`` state): ``s' = A s + B x``,
    ``y = s[0] + b0 x``; and the steady-state state of a unit step (``lfilter_zi``)."""
    n = max(len(a), len(b)) - 1
    a = [v / a[0] for v in a] + [0.0] * (n + 1 - len(a))
    b = [v / a[0] for v in b] + [0.0] * (n + 1 - len(b))
    A = torch.zeros(n, n, dtype=torch.float64)
    A[:, 0] = -torch.tensor(a[1:], dtype=torch.float64)
    A[:-1, 1:] += torch.eye(n - 1, dtype=torch.float64)
    B = torch.tensor([b[i + 1] - a[i + 1] * b[0] for i in range(n)], dtype=torch.float64)
    zi = torch.linalg.solve(torch.eye(n, dtype=torch.float64) - A, B)
    return A.to(device, dtype), B.to(device, dtype), b[0], zi.to(device, dtype)


def _lfilter_rows(x: torch.Tensor, b, a, zi: torch.Tensor | None) -> torch.Tensor:
    """``x (N, T)`` through the filter, state ``zi (N, n)`` (None: zeros) -> ``(N, T)``."""
    A, B, d, _ = _state_space(b, a, x.dtype, x.device)
    N, T = x.shape
    n = A.shape[0]
    L = min(_BLOCK, T)
    powers = [torch.eye(n, dtype=x.dtype, device=x.device)]
    for _ in range(L):  # A^0 .. A^L (L small matrices, host loop over the block length)
        powers.append(powers[-1] @ A)
    P = torch.stack(powers)  # (L + 1, n, n)
    obs = P[:L, 0, :]  # (L, n): C A^i, C = e0
    h = torch.cat([x.new_tensor([d]), obs[: L - 1] @ B])  # impulse response h[0..L-1]
    i = torch.arange(L, device=x.device)
    lag = i[:, None] - i[None, :]
    H = torch.where(lag >= 0, h[lag.clamp_min(0)], 0.0)  # (L, L) lower-triangular Toeplitz
    G = (P[:L].flip(0) @ B).T  # (n, L): A^(L-1-k) B
    nb = -(-T // L)
    xb = torch.nn.functional.pad(x, (0, nb * L - T)).reshape(N, nb, L)
    ends = xb @ G.T  # (N, nb, n): each block's end state from a zero start
    states = x.new_zeros(N, nb, n)
    s = zi if zi is not None else x.new_zeros(N, n)
    AL = P[L].T
    for k in range(nb):  # the recurrence, one block at a time
        states[:, k] = s
        s = s @ AL + ends[:, k]
    y = xb @ H.T + states @ obs.T
    return y.reshape(N, nb * L)[:, :T]


def _rows(x: torch.Tensor) -> torch.Tensor:
    check_tensor("x", x, 2)
    return x.detach().movedim(-2, -1).reshape(-1, x.shape[-2])


def _unrows(y: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    return y.reshape(*shape[:-2], shape[-1], shape[-2]).movedim(-1, -2)


def lfilter(x: torch.Tensor, b: list[float], a: list[float]) -> torch.Tensor:
    """``scipy.signal.lfilter(b, a, x, axis=-2)`` (zero initial state) for ``x (..., T, D)``."""
    return _unrows(_lfilter_rows(_rows(x), b, a, None), x.shape)


def filtfilt(
    x: torch.Tensor, b: list[float], a: list[float], padlen: int | None = None
) -> torch.Tensor:
    """Zero-phase filtering along ``T`` of ``x (..., T, D)`` (no NaN): ``scipy.signal.filtfilt(b,
    a, x, axis=-2, padtype="odd", padlen=padlen)``; ``padlen`` defaults to scipy's
    ``3 * max(len(a), len(b))``.

    Raises:
        ValueError: ``T <= padlen`` (as scipy).
    """
    rows = _rows(x)
    T = rows.shape[1]
    edge = 3 * max(len(a), len(b)) if padlen is None else int(padlen)
    if edge < 0 or T <= edge:
        raise ValueError(f"filtfilt needs more than padlen={edge} frames, got {T}")
    if edge:
        head = 2 * rows[:, :1] - rows[:, 1 : edge + 1].flip(1)
        tail = 2 * rows[:, -1:] - rows[:, -edge - 1 : -1].flip(1)
        rows = torch.cat([head, rows, tail], 1)
    zi = _state_space(b, a, rows.dtype, rows.device)[3]
    y = _lfilter_rows(rows, b, a, zi * rows[:, :1])
    y = _lfilter_rows(y.flip(1), b, a, zi * y[:, -1:]).flip(1)
    return _unrows(y[:, edge : edge + T], x.shape)
