"""ops.filters against their naive twins: filterpy's KalmanFilter / rts_smoother run one signal at
a time, and a straightforward per-signal One-Euro loop."""

import math
import time

import numpy as np
import pytest
import torch
from filterpy.common import Q_discrete_white_noise
from filterpy.kalman import KalmanFilter

from tensorpose.ops.filters import jitter, kalman_filter, kalman_smoother, lag, one_euro_filter

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA")),
]
MODELS = {"velocity": 2, "acceleration": 3}


# ----------------------------------------------------------------------------- references
def filterpy_track(z, dt, q, r, iv, n=2, smooth=False):
    """One signal through filterpy: state set at the first valid observation (zero velocity),
    updated with it, then predict + update (None when missing) per step; optional RTS."""
    out = np.full(len(z), np.nan)
    ok = np.flatnonzero(~np.isnan(z))
    if len(ok) == 0:
        return out
    t0 = ok[0]
    kf = KalmanFilter(dim_x=n, dim_z=1)
    kf.F = (
        np.array([[1, dt], [0, 1.0]])
        if n == 2
        else np.array([[1, dt, 0.5 * dt * dt], [0, 1, dt], [0, 0, 1.0]])
    )
    kf.H = np.eye(1, n)
    kf.Q = Q_discrete_white_noise(n, dt, q)
    kf.R = np.array([[r]])
    kf.P = np.diag(np.broadcast_to(np.asarray(iv, dtype=float), (n,)))
    kf.x = np.zeros((n, 1))
    kf.x[0, 0] = z[t0]
    kf.update(z[t0])
    xs, Ps = [kf.x.copy()], [kf.P.copy()]
    for t in range(t0 + 1, len(z)):
        kf.predict()
        kf.update(None if np.isnan(z[t]) else z[t])
        xs.append(kf.x.copy())
        Ps.append(kf.P.copy())
    xs, Ps = np.array(xs), np.array(Ps)
    if smooth:
        xs, Ps, _, _ = kf.rts_smoother(xs, Ps)
    out[t0:] = xs[:, 0, 0]
    return out


def one_euro_track(z, fps, min_cutoff, beta, d_cutoff):
    """Straightforward One-Euro on one signal (Casiez et al. 2012), missing samples skipped
    (the output holds) and the next valid one using the real elapsed time."""
    out = np.full(len(z), np.nan)
    first, x_hat = True, np.nan
    for t, x in enumerate(z):
        if np.isnan(x):
            if not first:
                out[t] = x_hat
            continue
        if first:
            x_hat, dx_hat, x_prev, t_prev, first = x, 0.0, x, t, False
        else:
            te = (t - t_prev) / fps
            a_d = 1.0 / (1.0 + (1.0 / (2 * math.pi * d_cutoff)) / te)
            dx_hat = a_d * ((x - x_prev) / te) + (1 - a_d) * dx_hat
            fc = min_cutoff + beta * abs(dx_hat)
            a = 1.0 / (1.0 + (1.0 / (2 * math.pi * fc)) / te)
            x_hat = a * x + (1 - a) * x_hat
            x_prev, t_prev = x, t
        out[t] = x_hat
    return out


def per_signal(fn, obs):
    """Apply a 1-D reference to every signal of ``obs (..., T, D)``."""
    lead, T, D = obs.shape[:-2], obs.shape[-2], obs.shape[-1]
    flat = np.moveaxis(obs.reshape(-1, T, D), -1, 1).reshape(-1, T)
    res = np.stack([fn(s) for s in flat])
    return np.moveaxis(res.reshape(-1, D, T), 1, -1).reshape(*lead, T, D)


def tracks(shape=(3, 4, 60, 2), missing=0.15, seed=0):
    """Random-walk pixel tracks with missing samples, a late start and an all-missing signal."""
    rng = np.random.default_rng(seed)
    obs = 600 + np.cumsum(rng.normal(scale=4.0, size=shape), axis=-2)
    obs[rng.random(shape) < missing] = np.nan
    obs[0, 0, :9, 0] = np.nan  # starts late
    obs[0, 1, :, 1] = np.nan  # never observed
    obs[1, 2, -6:, :] = np.nan  # gap at the end
    return obs


# ----------------------------------------------------------------------------- Kalman
@pytest.mark.parametrize("model", ["velocity", "acceleration"])
@pytest.mark.parametrize("smooth", [False, True])
def test_kalman_equals_filterpy(model, smooth):
    obs = tracks()
    kw = dict(dt=0.5, process_noise=2.0, measurement_noise=9.0, initial_variance=100.0)
    fn = kalman_smoother if smooth else kalman_filter
    got = fn(torch.tensor(obs), model=model, **kw).numpy()
    n = MODELS[model]
    ref = per_signal(lambda z: filterpy_track(z, 0.5, 2.0, 9.0, 100.0, n=n, smooth=smooth), obs)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-9)


def test_kalman_state_and_per_component_initial_variance():
    obs = tracks(shape=(2, 3, 40, 2))
    iv = (4.0, 50.0, 3.0)
    state, cov = kalman_filter(
        torch.tensor(obs), process_noise=0.3, model="acceleration", initial_variance=iv,
        return_state=True,
    )  # fmt: skip
    assert state.shape == (2, 3, 40, 2, 3) and cov.shape == (2, 3, 40, 2, 3, 3)
    ref = per_signal(lambda z: filterpy_track(z, 1.0, 0.3, 1.0, iv, n=3), obs)
    np.testing.assert_allclose(state[..., 0].numpy(), ref, atol=1e-9)
    torch.testing.assert_close(cov, cov.transpose(-1, -2), rtol=0, atol=1e-9, equal_nan=True)
    sstate, scov = kalman_smoother(torch.tensor(obs), return_state=True)
    assert sstate.shape == (2, 3, 40, 2, 2) and scov.shape == (2, 3, 40, 2, 2, 2)
    # smoothing never increases the variance
    _, fcov = kalman_filter(torch.tensor(obs), return_state=True)
    ok = ~torch.isnan(scov[..., 0, 0])
    assert (scov[..., 0, 0][ok] <= fcov[..., 0, 0][ok] + 1e-9).all()


def test_mask_equals_nan():
    obs = torch.tensor(tracks())
    mask = ~torch.isnan(obs)
    filled = torch.nan_to_num(obs, nan=1e6)  # garbage where masked
    for fn in (kalman_filter, kalman_smoother):
        torch.testing.assert_close(fn(filled, mask=mask), fn(obs), equal_nan=True)
    torch.testing.assert_close(
        one_euro_filter(filled, 30.0, mask=mask), one_euro_filter(obs, 30.0), equal_nan=True
    )
    # a (..., T) mask drops whole frames
    frame_mask = torch.rand(obs.shape[:-1]) > 0.3
    nan_frames = obs.masked_fill(~frame_mask.unsqueeze(-1), float("nan"))
    torch.testing.assert_close(
        kalman_filter(obs, mask=frame_mask), kalman_filter(nan_frames), equal_nan=True
    )


# ----------------------------------------------------------------------------- One-Euro
@pytest.mark.parametrize("beta", [0.0, 0.05])
def test_one_euro_equals_reference(beta):
    obs = tracks()
    got = one_euro_filter(torch.tensor(obs), fps=60.0, min_cutoff=0.7, beta=beta, d_cutoff=1.3)
    ref = per_signal(lambda z: one_euro_track(z, 60.0, 0.7, beta, 1.3), obs)
    np.testing.assert_array_equal(np.isnan(got.numpy()), np.isnan(ref))
    np.testing.assert_allclose(got.numpy(), ref, rtol=0, atol=1e-9)


def test_one_euro_holds_through_gaps():
    x = torch.tensor([[1.0], [2.0], [float("nan")], [float("nan")], [5.0]], dtype=torch.float64)
    y = one_euro_filter(x, fps=30.0)
    assert y[2] == y[1] and y[3] == y[1] and y[0] == 1.0 and y[4] != y[1]


# ----------------------------------------------------------------------------- shared
FILTERS = {
    "kalman": lambda x, **k: kalman_filter(x, measurement_noise=4.0, **k),
    "rts": lambda x, **k: kalman_smoother(x, measurement_noise=4.0, **k),
    "kalman_ca": lambda x, **k: kalman_filter(
        x, model="acceleration", process_noise=0.05, measurement_noise=4.0, **k
    ),
    "rts_ca": lambda x, **k: kalman_smoother(x, model="acceleration", **k),
    "one_euro": lambda x, **k: one_euro_filter(x, 30.0, beta=0.02, **k),
}


@pytest.mark.parametrize("name", list(FILTERS))
def test_batched_equals_per_track(name):
    fn = FILTERS[name]
    obs = torch.tensor(tracks(shape=(5, 3, 50, 2)))
    batched = fn(obs)
    assert batched.shape == obs.shape
    for b in range(obs.shape[0]):  # the naive twin: one track at a time
        torch.testing.assert_close(batched[b], fn(obs[b]), rtol=0, atol=1e-10, equal_nan=True)


@pytest.mark.parametrize("name", list(FILTERS))
def test_missing_before_start_and_all_missing(name):
    obs = torch.tensor(tracks())
    out = FILTERS[name](obs)
    assert torch.isnan(out[0, 0, :9, 0]).all()  # starts late
    assert torch.isnan(out[0, 1, :, 1]).all()  # never observed: stays NaN
    everything_missing = torch.full((2, 30, 3), float("nan"), dtype=torch.float64)
    assert torch.isnan(FILTERS[name](everything_missing)).all()
    # only NaN where nothing has been seen yet
    started = (~torch.isnan(obs)).cumsum(-2) > 0
    assert torch.equal(~torch.isnan(out), started)


# float32 vs float64 on pixel tracks (~600 px, 30% missing, 1000 frames), in px: the
# constant-velocity filter, its smoother and One-Euro stay below ~5e-4 px; the constant-
# acceleration model is worse conditioned (initial_variance 1000 on velocity and acceleration):
# ~2e-3 px filtered, ~3e-2 px smoothed in its start-up transient. All far below detector jitter.
# (This case caught a float32 cofactor inverse in the smoother that was off by 50 px.)
F32_TOL = {"kalman": 1e-3, "rts": 2e-3, "kalman_ca": 1e-2, "rts_ca": 0.1, "one_euro": 1e-3}


@pytest.mark.parametrize("name", list(FILTERS))
def test_float32_precision(name):
    obs = torch.tensor(tracks(shape=(2, 3, 1000, 2), missing=0.3, seed=2))
    ref = FILTERS[name](obs)
    got = FILTERS[name](obs.float())
    assert got.dtype == torch.float32
    assert torch.equal(torch.isnan(got), torch.isnan(ref))
    err = (got.double() - ref).nan_to_num().abs().max()
    assert err <= F32_TOL[name], err


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(FILTERS))
def test_device(name, device):
    obs = torch.tensor(tracks(shape=(2, 3, 40, 2)))
    ref = FILTERS[name](obs)
    got = FILTERS[name](obs.to(device))
    assert got.device.type == device
    # float64; CUDA's fused multiply-adds round differently (1e-11 relative on ~600 px tracks)
    torch.testing.assert_close(got.cpu(), ref, rtol=1e-10, atol=1e-9, equal_nan=True)


def test_smooths_and_rts_has_no_lag():
    t = torch.arange(300, dtype=torch.float64)
    clean = torch.stack([200 * torch.sin(t / 25), 150 * torch.cos(t / 40)], -1)
    noisy = clean + torch.randn(clean.shape, generator=torch.Generator().manual_seed(0)) * 3
    for name, fn in FILTERS.items():
        assert jitter(fn(noisy)) < 0.5 * jitter(noisy), name
    filt = kalman_filter(noisy, process_noise=0.1, measurement_noise=9.0)
    rts = kalman_smoother(noisy, process_noise=0.1, measurement_noise=9.0)
    assert lag(clean, filt) > 0.02 and abs(float(lag(clean, rts))) < 0.02
    err = [(y - clean)[10:].abs().mean() for y in (rts, filt, noisy)]  # after the start-up
    assert err[0] < err[1] < err[2], err


def test_lag_and_jitter():
    t = torch.arange(200, dtype=torch.float64)
    x = torch.stack([torch.sin(t / 10), torch.cos(t / 7)], -1)
    for d in (0.0, 2.5, -1.25, 7.0):
        y = torch.stack([torch.sin((t - d) / 10), torch.cos((t - d) / 7)], -1)
        assert abs(float(lag(x, y)) - d) < 0.02
    line = torch.stack([t, 2 * t], -1)
    assert float(jitter(line)) == 0.0
    line[5] = float("nan")
    assert float(jitter(line)) == 0.0
    with pytest.raises(ValueError, match="reference"):
        lag(x, y[:-1])


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kw, arg",
    [
        ({"process_noise": 0.0}, "process_noise"),
        ({"process_noise": -1.0}, "process_noise"),
        ({"measurement_noise": 0}, "measurement_noise"),
        ({"measurement_noise": float("nan")}, "measurement_noise"),
        ({"dt": -0.1}, "dt"),
        ({"initial_variance": 0.0}, "initial_variance"),
        ({"initial_variance": (1.0, -1.0)}, "initial_variance"),
        ({"initial_variance": (1.0, 2.0, 3.0)}, "initial_variance"),
        ({"model": "jerk"}, "model"),
    ],
)
@pytest.mark.parametrize("fn", [kalman_filter, kalman_smoother])
def test_kalman_bad_parameters(fn, kw, arg):
    with pytest.raises(ValueError, match=arg):
        fn(torch.zeros(10, 2), **kw)


@pytest.mark.parametrize(
    "kw, arg",
    [
        ({"fps": 0.0}, "fps"),
        ({"fps": 30.0, "min_cutoff": 0.0}, "min_cutoff"),
        ({"fps": 30.0, "d_cutoff": -1.0}, "d_cutoff"),
        ({"fps": 30.0, "beta": -0.1}, "beta"),
    ],
)
def test_one_euro_bad_parameters(kw, arg):
    with pytest.raises(ValueError, match=arg):
        one_euro_filter(torch.zeros(10, 2), **kw)


def test_bad_observations_and_mask():
    with pytest.raises(TypeError, match="observations"):
        kalman_filter(np.zeros((10, 2)))
    with pytest.raises(TypeError, match="observations"):
        kalman_filter(torch.zeros(10, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="observations"):
        one_euro_filter(torch.zeros(10), 30.0)
    with pytest.raises(TypeError, match="process_noise"):
        kalman_filter(torch.zeros(10, 2), process_noise="1")
    with pytest.raises(TypeError, match="mask"):
        kalman_filter(torch.zeros(10, 2), mask=torch.ones(10, 2))
    with pytest.raises(ValueError, match="mask"):
        kalman_filter(torch.zeros(10, 2), mask=torch.ones(7, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask"):
        kalman_filter(torch.zeros(10, 2), mask=torch.ones(3, 10, 2, dtype=torch.bool))


def test_single_frame_and_inf():
    x = torch.tensor([[3.0, float("inf")]], dtype=torch.float64)  # T=1; inf counts as missing
    for fn in FILTERS.values():
        y = fn(x)
        assert y[0, 0] == 3.0 and torch.isnan(y[0, 1])


def test_compile_smoke():
    """torch.compile of the Kalman filter on a short sequence (the time loop unrolls)."""
    if not hasattr(torch, "compile"):
        pytest.skip("no torch.compile")
    obs = torch.tensor(tracks(shape=(2, 3, 6, 2)))
    start = time.perf_counter()
    try:
        compiled = torch.compile(kalman_filter, backend="eager", fullgraph=False)
        got = compiled(obs)
    except Exception as e:  # pragma: no cover - depends on the torch build
        pytest.skip(f"torch.compile unavailable here: {e}")
    torch.testing.assert_close(got, kalman_filter(obs), equal_nan=True)
    assert time.perf_counter() - start < 20
