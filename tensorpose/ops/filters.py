"""Temporal smoothing of keypoint tracks, batched over every signal at once.

Every coordinate of every joint of every track is an independent 1-D signal. The functions take
``observations (..., T, D)``, fold all leading dims and ``D`` into one batch of ``N`` signals,
and run ONE loop over the ``T`` time steps (the recurrence is inherent), each step a handful of
tensor ops over all ``N`` signals: no Python object per joint, no loop over tracks.

Missing observations are NaN (or ``False`` in ``mask``): the Kalman filter predicts through
them, the One-Euro filter holds its last output. Before a signal's first valid observation the
output is NaN; an all-missing signal stays NaN. The filters are post-processing, not
differentiable: they read their input detached and write into reused buffers.

Precision (measured in ``tests/ops/test_filters.py`` and ``benchmarks/filters.py``), on pixel
tracks of ~600 px. Each signal is filtered relative to its first valid value (the filters commute
with a constant shift), so the pixel offset costs float32 no bits.

* float64: equals filterpy (``KalmanFilter``, ``rts_smoother``) and the naive One-Euro loop to
  ~1e-12 px (tested at 1e-9; the CUDA variants of the tests run where a GPU is present).
* float32: the constant-velocity filter, its smoother and One-Euro agree with float64 to
  ~5e-4 px or better; the constant-acceleration model is worse conditioned (a large
  ``initial_variance`` on velocity and acceleration): ~2e-3 px filtered and ~3e-2 px smoothed
  during its start-up transient, ~1e-3 px after (30% missing, 1000 frames). The smoother takes
  its small 2x2 / 3x3 inverses in float64 either way. All far below detector jitter (pixels).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ._checks import check_tensor

__all__ = ["jitter", "kalman_filter", "kalman_smoother", "lag", "one_euro_filter"]

_MODELS = {"velocity": 2, "acceleration": 3}


def _positive(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a positive number, got {type(value).__name__}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value}")
    return float(value)


def _non_negative(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a non-negative number, got {type(value).__name__}")
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a non-negative finite number, got {value}")
    return float(value)


def _signals(
    observations: torch.Tensor, mask: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``observations (..., T, D)`` -> zero-filled ``z (T, N)`` and ``valid (T, N)`` with
    ``N = prod(...) * D`` (signal ``n`` is leading index ``n // D``, coordinate ``n % D``)."""
    check_tensor("observations", observations, 2)
    observations = observations.detach()
    T = observations.shape[-2]
    valid = ~torch.isnan(observations)
    if mask is not None:
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            raise TypeError(f"mask must be a bool tensor, got {getattr(mask, 'dtype', mask)}")
        m = mask.unsqueeze(-1) if mask.shape == observations.shape[:-1] else mask
        try:
            valid = valid & m.to(observations.device)
        except RuntimeError:
            raise ValueError(
                f"mask must have shape (..., T) or (..., T, D) matching observations "
                f"{tuple(observations.shape)}, got {tuple(mask.shape)}"
            ) from None
        if valid.shape != observations.shape:
            raise ValueError(
                f"mask {tuple(mask.shape)} broadcasts observations {tuple(observations.shape)} "
                f"to {tuple(valid.shape)}"
            )
    valid = valid & ~torch.isinf(observations)
    z = torch.where(valid, observations, 0.0)
    return z.movedim(-2, 0).reshape(T, -1), valid.movedim(-2, 0).reshape(T, -1)


def _center(z: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Subtract each signal's first valid value from ``z (T, N)``. The filters commute with a
    constant shift, and values near 0 keep float32 precise: pixel coordinates of ~1000 would
    spend 10 of float32's 24 bits on the offset."""
    first = valid.to(torch.uint8).argmax(0, keepdim=True)  # first valid step (0 if none)
    offset = z.gather(0, first).squeeze(0)  # z is 0 where invalid: never-valid -> 0
    return torch.where(valid, z - offset, 0.0), offset


def _unfold(x: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """``(T, N, *rest)`` back to ``(..., T, D, *rest)`` for observations of ``shape``."""
    T, rest = x.shape[0], x.shape[2:]
    x = x.reshape(T, *shape[:-2], shape[-1], *rest)
    return x.movedim(0, len(shape) - 2)


def _model(
    model: str,
    dt: float,
    process_noise: float,
    initial_variance: float | Sequence[float],
    dtype: torch.dtype,
    device: torch.device,
) -> tuple[int, torch.Tensor, torch.Tensor]:
    """State size ``n``, process noise ``Q (n, n)`` and prior ``P0 (n, n)``; the transition
    ``F = [[1, dt, dt^2/2], [0, 1, dt], [0, 0, 1]][:n, :n]`` is applied by :func:`_f_`."""
    if model not in _MODELS:
        raise ValueError(f"model must be one of {sorted(_MODELS)}, got {model!r}")
    n = _MODELS[model]
    # Discrete white noise on the highest derivative (filterpy's Q_discrete_white_noise):
    # Q = q * g g^T with g = (dt^2/2, dt) for n=2 and (dt^2/2, dt, 1) for n=3.
    g = torch.tensor([0.5 * dt * dt, dt, 1.0][:n], dtype=torch.float64)
    Q = process_noise * torch.outer(g, g)
    if isinstance(initial_variance, (int, float)) and not isinstance(initial_variance, bool):
        iv = [_positive("initial_variance", initial_variance)] * n
    else:
        iv = list(initial_variance)
        if len(iv) != n:
            raise ValueError(
                f"initial_variance must be a number or {n} numbers for model={model!r}, "
                f"got {len(iv)}"
            )
        iv = list(map(_positive, ["initial_variance"] * n, iv))
    kw = {"dtype": dtype, "device": device}
    return n, Q.to(**kw), torch.diag(torch.tensor(iv, **kw))


def _f_(v: torch.Tensor, dt: float, dim: int) -> torch.Tensor:
    """``v <- F v`` along ``dim`` (size n = 2 or 3), in place, with the Taylor transition
    ``F = [[1, dt, dt^2/2], [0, 1, dt], [0, 0, 1]]``: row i reads only rows > i, so updating in
    increasing order is exact. Elementwise ops instead of a matrix product: a BLAS call per step
    would spin up BLAS threads, which stall on a loaded CPU."""
    v.select(dim, 0).add_(v.select(dim, 1), alpha=dt)
    if v.shape[dim] == 3:
        v.select(dim, 0).add_(v.select(dim, 2), alpha=0.5 * dt * dt)
        v.select(dim, 1).add_(v.select(dim, 2), alpha=dt)
    return v


def _forward(
    z: torch.Tensor,
    valid: torch.Tensor,
    dt: float,
    Q: torch.Tensor,
    P0: torch.Tensor,
    r: float,
    keep_state: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Kalman forward pass over ``z (T, N)``.

    Returns ``started (T, N)`` (a valid observation has been seen) and either the filtered
    positions ``(T, N)`` or, with ``keep_state``, the filtered means and row-major covariances
    stacked component-major, ``(T, n + n^2, N)``.

    Mean and covariance of all signals live component-major in one ``s (n + n^2, N)``: every
    op runs along contiguous rows of ``N`` signals, and a step is about a dozen small
    elementwise ops on two reused buffers (on CPU, touching fresh memory every step costs more
    than the arithmetic)."""
    T, N = z.shape
    n = Q.shape[0]
    m = n + n * n
    dtype, device = z.dtype, z.device
    zeros = torch.zeros(n, dtype=dtype, device=device)
    Qb = Q.unsqueeze(-1)  # (n, n, 1)
    init = torch.cat([zeros, P0.reshape(-1)]).unsqueeze(-1)
    # Everything that depends only on which observations are valid, for all steps at once:
    started = valid.cumsum(0, dtype=torch.int32) > 0
    # (Re)start the state while no observation has been seen: s = [0, vec(P0)] (bounded values,
    # discarded), and at the first valid one the prior is x = (z0, 0, ...), P = P0.
    reset = torch.ones_like(started)
    reset[1:] = ~started[:-1]
    first_z = torch.where(valid & reset, z, 0.0)
    gate = valid.to(dtype)  # 0 turns the update into the identity
    reset = reset.unsqueeze(1)  # (T, 1, N)
    if keep_state:
        out = torch.empty(T, m, N, dtype=dtype, device=device)
    else:
        out = torch.empty(T, N, dtype=dtype, device=device)
        post = torch.empty(m, N, dtype=dtype, device=device)
    pred = init.expand(m, N).clone()
    for t in range(T):  # over time steps (the recurrence), every signal at once
        x, P = pred[:n], pred[n:].view(n, n, N)
        if t > 0:  # predict in place: x = F x, P = F P F^T + Q
            _f_(x, dt, 0)
            _f_(_f_(P, dt, 0), dt, 1).add_(Qb)
        torch.where(reset[t], init, pred, out=pred)
        pred[0] += first_z[t]
        # Update with H = (1, 0, ...): S = P00 + r, K = P[:, 0] / S, x += K (z - x0),
        # P -= K P[0, :] (equal to filterpy's Joseph form for the optimal gain; the row P[0, :]
        # and not the column: rounding leaves P slightly asymmetric, and the column form lets
        # that asymmetry grow through F in float32).
        p0 = P[:, 0]  # column 0 of P = P H^T, (n, N)
        k = p0 * (gate[t] / (p0[0] + r))
        o = out[t] if keep_state else post
        torch.addcmul(x, k, z[t] - x[0], out=o[:n])
        torch.addcmul(P, k.unsqueeze(1), P[0].unsqueeze(0), value=-1, out=o[n:].view(n, n, N))
        if keep_state:
            pred.copy_(o)
        else:
            out[t] = o[0]
            pred, post = post, pred
    return out, started


def _check_common(
    observations: torch.Tensor, dt: float, process_noise: float, measurement_noise: float
) -> tuple[float, float, float]:
    check_tensor("observations", observations, 2)
    return (
        _positive("dt", dt),
        _positive("process_noise", process_noise),
        _positive("measurement_noise", measurement_noise),
    )


def kalman_filter(
    observations: torch.Tensor,
    dt: float = 1.0,
    process_noise: float = 1.0,
    measurement_noise: float = 1.0,
    initial_variance: float | Sequence[float] = 1000.0,
    mask: torch.Tensor | None = None,
    model: str = "velocity",
    return_state: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Causal Kalman filter, a constant-velocity (or -acceleration) model per coordinate.

    Each coordinate of ``observations`` is one signal with state ``(position, velocity)``
    (``model="acceleration"``: ``(position, velocity, acceleration)``), transition
    ``F = [[1, dt], [0, 1]]`` (resp. ``[[1, dt, dt^2/2], [0, 1, dt], [0, 0, 1]]``),
    measurement ``H = [1, 0(, 0)]``, process noise ``Q = process_noise * g g^T`` with
    ``g = (dt^2/2, dt(, 1))`` (filterpy's ``Q_discrete_white_noise``) and measurement variance
    ``R = measurement_noise``. At its first valid observation ``z0`` a signal starts from
    ``x = (z0, 0(, 0))``, ``P = diag(initial_variance)`` and is updated with ``z0``; every later
    step predicts, then updates if the observation is valid. This equals, per signal,
    ``filterpy.kalman.KalmanFilter`` set up that way, then ``kf.update(z0)`` and
    ``kf.predict(); kf.update(z_or_None)`` per later step (float64: within 1e-9).

    Args:
        observations: ``(..., T, D)``; NaN marks a missing value (per coordinate).
        dt: time step between frames (e.g. ``1/fps`` for per-second units, ``1`` for per-frame).
        process_noise: ``q > 0``, variance of the white noise driving the highest derivative
            (units: ``unit^2 / dt^(2n-2)``); larger follows the data more closely.
        measurement_noise: ``r > 0``, observation variance (``unit^2``, e.g. ``px^2``).
        initial_variance: ``> 0``, one number or one per state component: the prior variance
            at a signal's first observation (large = trust the first observations).
        mask: optional bool ``(..., T)`` or ``(..., T, D)``, ``False`` = missing (combined with
            NaN).
        model: ``"velocity"`` (constant velocity) or ``"acceleration"``.
        return_state: also return the full state and covariance.

    Returns:
        ``positions (..., T, D)`` (NaN before a signal's first valid observation); with
        ``return_state``: ``state (..., T, D, n)`` and ``covariance (..., T, D, n, n)``
        instead, ``n = 2`` or ``3``.

    Example:
        >>> x = torch.tensor([[0.0], [1.1], [float("nan")], [2.9], [4.0]])
        >>> kalman_filter(x, measurement_noise=0.1).shape
        torch.Size([5, 1])
    """
    dt, q, r = _check_common(observations, dt, process_noise, measurement_noise)
    n, Q, P0 = _model(model, dt, q, initial_variance, observations.dtype, observations.device)
    z, valid = _signals(observations, mask)
    z, offset = _center(z, valid)
    out, started = _forward(z, valid, dt, Q, P0, r, keep_state=return_state)
    if not return_state:
        return _unfold(torch.where(started, out + offset, float("nan")), observations.shape)
    xs, Ps = _split_state(out, n)
    xs[..., 0] += offset
    return _finish_state(xs, Ps, started, observations.shape)


def _split_state(out: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(T, n + n^2, N)`` -> means ``(T, N, n)`` and covariances ``(T, N, n, n)``."""
    T, _, N = out.shape
    out = out.transpose(1, 2)
    return out[..., :n], out[..., n:].reshape(T, N, n, n)


def _finish_state(
    xs: torch.Tensor, Ps: torch.Tensor, started: torch.Tensor, shape: torch.Size
) -> tuple[torch.Tensor, torch.Tensor]:
    s = started.unsqueeze(-1)
    state = _unfold(torch.where(s, xs, float("nan")), shape)
    cov = _unfold(torch.where(s.unsqueeze(-1), Ps, float("nan")), shape)
    return state, cov


def kalman_smoother(
    observations: torch.Tensor,
    dt: float = 1.0,
    process_noise: float = 1.0,
    measurement_noise: float = 1.0,
    initial_variance: float | Sequence[float] = 1000.0,
    mask: torch.Tensor | None = None,
    model: str = "velocity",
    return_state: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Offline Rauch-Tung-Striebel smoother: :func:`kalman_filter`, then a backward pass.

    ``Pp_k = F P_k F^T + Q``, ``G_k = P_k F^T Pp_k^-1``,
    ``x^s_k = x_k + G_k (x^s_{k+1} - F x_k)``, ``P^s_k = P_k + G_k (P^s_{k+1} - Pp_k) G_k^T``:
    equal to filterpy's ``rts_smoother`` run on the filtered means and covariances from the
    first valid observation on (float64: within 1e-9). One loop over time steps, backwards;
    each step is a few elementwise ops over all signals (the gain uses a closed-form inverse of
    the 2x2 or 3x3 ``Pp``).
    Signals with a gap at the end are extrapolated from their last observation; before the
    first observation the output is NaN. Arguments and returns as :func:`kalman_filter`.

    Example:
        >>> x = torch.tensor([[0.0], [1.1], [float("nan")], [2.9], [4.0]])
        >>> kalman_smoother(x, measurement_noise=0.1).shape
        torch.Size([5, 1])
    """
    dt, q, r = _check_common(observations, dt, process_noise, measurement_noise)
    n, Q, P0 = _model(model, dt, q, initial_variance, observations.dtype, observations.device)
    z, valid = _signals(observations, mask)
    z, offset = _center(z, valid)
    out, started = _forward(z, valid, dt, Q, P0, r, keep_state=True)
    T, _, N = out.shape
    xs, Ps = out[:, :n], out[:, n:].view(T, n, n, N)  # component-major (T, n(, n), N)
    xsm = torch.empty_like(xs)
    xsm[-1] = xs[-1]
    Psm = None
    if return_state:
        Psm = torch.empty_like(Ps)
        Psm[-1] = Ps[-1]
    Qb = Q.unsqueeze(-1)
    # Loop over time steps, backwards (the smoother's recurrence); each step a few small
    # elementwise ops on (n, n, N) stacks, the gain from a closed-form symmetric inverse.
    for k in range(T - 2, -1, -1):  # over time steps, backwards
        FP = _f_(Ps[k].clone(), dt, 0)  # F P_k
        Pp = _f_(FP.clone(), dt, 1).add_(Qb)  # F P_k F^T + Q
        # The cofactor inverse loses float32 digits on the ill-conditioned early Pp (a large
        # initial_variance): take it in float64 (n(n+1)/2 numbers per signal, cheap).
        Pinv = _inv_sym_cm(Pp.to(torch.float64)).to(Pp.dtype)
        G = _matmul_cm(FP.transpose(0, 1), Pinv)  # P_k F^T Pp^-1
        d = xsm[k + 1] - _f_(xs[k].clone(), dt, 0)  # x^s_{k+1} - F x_k
        torch.add(xs[k], (G * d.unsqueeze(0)).sum(1), out=xsm[k])
        if Psm is not None:
            D = _matmul_cm(_matmul_cm(G, Psm[k + 1] - Pp), G.transpose(0, 1))
            torch.add(Ps[k], D, out=Psm[k])
    if not return_state:
        return _unfold(torch.where(started, xsm[:, 0] + offset, float("nan")), observations.shape)
    xsm = xsm.permute(0, 2, 1)  # (T, N, n)
    xsm[..., 0] += offset
    return _finish_state(xsm, Psm.permute(0, 3, 1, 2), started, observations.shape)


def _matmul_cm(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """Per-signal matrix product of component-major ``(n, n, N)`` stacks."""
    return (A.unsqueeze(2) * B.unsqueeze(0)).sum(1)


def _inv_sym_cm(A: torch.Tensor) -> torch.Tensor:
    """Inverse of symmetric positive definite component-major ``(n, n, N)`` stacks, n = 2 or 3,
    by cofactors (elementwise: no LAPACK call, no transposed copies)."""
    if A.shape[0] == 2:
        a, b, c = A[0, 0], A[0, 1], A[1, 1]
        inv = torch.stack([torch.stack([c, -b]), torch.stack([-b, a])])
        return inv / (a * c - b * b)
    a00, a01, a02, a11, a12, a22 = A[0, 0], A[0, 1], A[0, 2], A[1, 1], A[1, 2], A[2, 2]
    c00 = a11 * a22 - a12 * a12
    c01 = a02 * a12 - a01 * a22
    c02 = a01 * a12 - a02 * a11
    c11 = a00 * a22 - a02 * a02
    c12 = a01 * a02 - a00 * a12
    c22 = a00 * a11 - a01 * a01
    det = a00 * c00 + a01 * c01 + a02 * c02
    inv = torch.stack(
        [torch.stack([c00, c01, c02]), torch.stack([c01, c11, c12]), torch.stack([c02, c12, c22])]
    )
    return inv / det


def one_euro_filter(
    observations: torch.Tensor,
    fps: float,
    min_cutoff: float = 1.0,
    beta: float = 0.0,
    d_cutoff: float = 1.0,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """One-Euro filter (Casiez, Roussel, Vogel, CHI 2012): a first-order low-pass whose cutoff
    rises with speed, batched over every signal.

    Per valid sample at time ``t`` (seconds, ``frame / fps``) after the previous valid one at
    ``t'``: ``Te = t - t'``, ``alpha(fc) = 1 / (1 + tau / Te)`` with ``tau = 1 / (2 pi fc)``;
    ``dx = (x_t - x_t') / Te`` (raw signal, as in the authors' reference code),
    ``dx_hat = alpha(d_cutoff) dx + (1 - alpha(d_cutoff)) dx_hat'``,
    ``fc = min_cutoff + beta |dx_hat|``, ``x_hat = alpha(fc) x_t + (1 - alpha(fc)) x_hat'``.
    The first valid sample passes through with ``dx_hat = 0``.

    Missing samples (NaN or ``mask`` False) hold the last output; the next valid sample uses the
    real elapsed time ``Te`` (several frames), so the filter behaves as if it had been fed only
    the valid samples with their timestamps.

    Args:
        observations: ``(..., T, D)``.
        fps: frame rate (> 0).
        min_cutoff: minimum cutoff frequency in Hz (> 0): lower = smoother when slow.
        beta: speed coefficient (>= 0, in ``1 / unit``): higher = less lag when fast.
        d_cutoff: cutoff frequency of the derivative's low-pass, Hz (> 0).
        mask: optional bool ``(..., T)`` or ``(..., T, D)``, ``False`` = missing.

    Returns:
        ``(..., T, D)``, NaN before a signal's first valid sample.

    Example:
        >>> x = torch.tensor([[0.0], [1.1], [float("nan")], [2.9], [4.0]])
        >>> one_euro_filter(x, fps=30.0, beta=0.1)[2]  # held
        tensor([0.2724])
    """
    check_tensor("observations", observations, 2)
    fps = _positive("fps", fps)
    min_cutoff = _positive("min_cutoff", min_cutoff)
    beta = _non_negative("beta", beta)
    d_cutoff = _positive("d_cutoff", d_cutoff)
    z, valid = _signals(observations, mask)
    z, offset = _center(z, valid)
    T, N = z.shape
    dtype, device = z.dtype, z.device
    # Everything that depends only on which samples are valid, for all steps at once: the
    # previous valid frame, Te, the derivative of the raw signal and the derivative's alpha.
    frame = torch.arange(T, device=device).unsqueeze(-1)
    prev = torch.where(valid, frame, -1).cummax(0).values
    prev = torch.cat([torch.full_like(prev[:1], -1), prev[:-1]])  # last valid frame before t
    has_prev = prev >= 0
    step = valid & has_prev  # a filtering step; valid & ~has_prev is the first sample
    te = torch.where(has_prev, frame - prev, 1).to(dtype) / fps
    dx = torch.where(step, (z - z.gather(0, prev.clamp(min=0))) / te, 0.0)
    a_d = torch.where(step, 1.0 / (1.0 + (1.0 / (2.0 * math.pi * d_cutoff)) / te), 0.0)
    two_pi_te = torch.where(step, 2.0 * math.pi * te, 0.0)  # 0 -> alpha 0 -> hold
    first_z = torch.where(valid & ~has_prev, z, 0.0)
    del prev, has_prev, te
    out = torch.empty(T, N, dtype=dtype, device=device)
    dx_hat = torch.zeros(N, dtype=dtype, device=device)
    x_hat = torch.zeros(N, dtype=dtype, device=device)
    # Loop over time steps (the filter is a recurrence), every signal at once. Missing and
    # not-started signals have alpha = 0 (hold); the first sample enters through first_z.
    for t in range(T):  # over time steps (the recurrence)
        dx_hat = torch.lerp(dx_hat, dx[t], a_d[t])  # a_d dx + (1 - a_d) dx_hat
        # alpha(fc) = 1 / (1 + tau / Te) = r / (r + 1) with r = 2 pi fc Te
        r = dx_hat.abs().mul_(beta).add_(min_cutoff).mul_(two_pi_te[t])
        alpha = r.div_(r + 1.0)
        torch.lerp(x_hat + first_z[t], z[t], alpha, out=out[t])  # a x + (1 - a) x_hat
        x_hat = out[t]
    started = valid.cumsum(0, dtype=torch.int32) > 0
    return _unfold(torch.where(started, out + offset, float("nan")), observations.shape)


def jitter(x: torch.Tensor) -> torch.Tensor:
    """Mean acceleration magnitude ``|x[t+1] - 2 x[t] + x[t-1]|`` (units per frame^2) over all
    signals and the frames where all three samples are present: a direct measure of frame-to-
    frame jitter.

    Args:
        x: ``(..., T, D)`` with NaN for missing samples.

    Returns:
        a 0-dim tensor (NaN if no three consecutive samples are present).
    """
    check_tensor("x", x, 2)
    acc = torch.linalg.vector_norm(x[..., 2:, :] - 2 * x[..., 1:-1, :] + x[..., :-2, :], dim=-1)
    return acc.nanmean()


def lag(reference: torch.Tensor, smoothed: torch.Tensor, max_lag: int = 10) -> torch.Tensor:
    """Delay (in frames) of ``smoothed`` behind ``reference``: the shift ``tau`` minimising the
    mean squared difference between ``smoothed[t]`` and ``reference[t - tau]`` over all
    signals and the frames where both are present, refined to sub-frame precision by a
    parabola through the best integer shift and its neighbours. A causal filter gives
    ``tau > 0``; a zero-phase smoother ``tau ~ 0``.

    Args:
        reference: ``(..., T, D)`` raw signal, NaN for missing.
        smoothed: ``(..., T, D)``.
        max_lag: shifts ``-max_lag .. max_lag`` are tried.

    Returns:
        a 0-dim tensor.
    """
    check_tensor("reference", reference, 2)
    check_tensor("smoothed", smoothed, 2)
    if reference.shape != smoothed.shape:
        raise ValueError(
            f"reference {tuple(reference.shape)} and smoothed {tuple(smoothed.shape)} differ"
        )
    T = reference.shape[-2]
    L = int(max_lag)
    if not 1 <= L < T:
        raise ValueError(f"max_lag must be in [1, T-1] = [1, {T - 1}], got {max_lag}")
    pad = reference.new_full((*reference.shape[:-2], L, reference.shape[-1]), float("nan"))
    ref = torch.cat([pad, reference, pad], dim=-2)
    # windows[..., i, :, t] = reference[t + i - L]: all 2L+1 shifts at once (views, no loop).
    windows = ref.unfold(-2, T, 1)  # (..., 2L+1, D, T)
    err = (windows - smoothed.unsqueeze(-3).transpose(-1, -2)) ** 2
    mse = err.movedim(-3, 0).reshape(2 * L + 1, -1).nanmean(-1)  # per shift i, tau = L - i
    mse = torch.nan_to_num(mse, nan=float("inf"))
    i = torch.argmin(mse)
    # parabola through (i-1, i, i+1) where both neighbours exist (no host sync)
    a, b, c = mse[(i - 1).clamp(min=0)], mse[i], mse[(i + 1).clamp(max=2 * L)]
    den = a - 2 * b + c
    inner = (i > 0) & (i < 2 * L) & (den > 0) & torch.isfinite(den)
    offset = torch.where(inner, 0.5 * (a - c) / torch.where(inner, den, 1.0), 0.0)
    return (L - i).to(mse.dtype) - offset
