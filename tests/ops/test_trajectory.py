"""ops/trajectory: the root's trajectory against naive references (per-frame np.linalg.lstsq,
scipy's butter + filtfilt, a loop over steps)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import signal

from tensorpose.metrics.pose3d import trajectory_errors
from tensorpose.ops.trajectory import lowpass_trajectory, path_length, root_translation
from tests.ops.test_camera import _naive_fit_to_rays


def _scene(T=40, J=17, seed=0):
    g = torch.Generator().manual_seed(seed)
    P = torch.randn(T, J, 3, generator=g, dtype=torch.float64) * 0.4
    P = P - P[:, :1]  # root-relative
    walk = torch.stack([torch.linspace(-1, 1, T), 0.1 * torch.sin(torch.arange(T) / 5.0),
                        torch.linspace(4, 6, T)], -1).double()  # fmt: skip
    true = P + walk[:, None] + torch.randn(T, J, 3, generator=g, dtype=torch.float64) * 0.03
    rays = true[..., :2] / true[..., 2:]
    return P, rays, walk, g


def test_root_translation_equals_naive_least_squares():
    P, rays, walk, g = _scene()
    w = (torch.rand(P.shape[:2], generator=g) > 0.3).double()
    w[3] = 0.0  # no joint seen: every joint at weight one
    w[4] = 0.0
    w[4, 5] = 1.0  # one joint seen: the same
    got = root_translation(P, rays, w)
    w_ref = w.numpy().copy()
    for f in range(len(w_ref)):  # the rule, frame by frame
        if (w_ref[f] > 0).sum() < 2:
            w_ref[f] = 1.0
    _, ref = _naive_fit_to_rays(P.numpy(), rays.numpy(), w_ref)
    np.testing.assert_allclose(got.numpy(), ref, atol=1e-10)
    assert float((got - walk).norm(dim=-1).mean()) < 0.15  # near the true root
    with pytest.raises(ValueError, match="weights must have shape"):
        root_translation(P, rays, w[:, :3])


def test_lowpass_equals_scipy_filtfilt_xyz_and_ray_depth():
    _, _, walk, g = _scene(T=60)
    x = walk + torch.randn(walk.shape, generator=g, dtype=torch.float64) * 0.02
    fps = 30.0
    b, a = signal.butter(2, 6.0 / (fps / 2))
    ref = signal.filtfilt(b, a, x.numpy(), axis=0)
    np.testing.assert_allclose(lowpass_trajectory(x, fps, 6.0).numpy(), ref, atol=1e-9)
    # the split: the ray x/z, y/z at 6 Hz, the depth at 0.5 Hz, put back together
    bd, ad = signal.butter(2, 0.5 / (fps / 2))
    xn = x.numpy()
    ray = signal.filtfilt(b, a, xn[:, :2] / xn[:, 2:], axis=0)
    z = signal.filtfilt(bd, ad, xn[:, 2:], axis=0)
    got = lowpass_trajectory(x, fps, 6.0, 0.5).numpy()
    np.testing.assert_allclose(got, np.concatenate([ray * z, z], 1), atol=1e-9)
    # short or nothing to remove: unchanged
    assert torch.equal(lowpass_trajectory(x[:2], fps), x[:2])
    assert torch.equal(lowpass_trajectory(x, fps, 20.0), x)


def test_path_length_and_trajectory_errors_against_loops():
    _, _, walk, _ = _scene(T=50)
    steps = sum(math.dist(walk[t].tolist(), walk[t + 1].tolist()) for t in range(49))
    assert float(path_length(walk)) == pytest.approx(steps, rel=1e-12)
    pred = walk / 1.25  # a skeleton 20% small: the same path, closer
    e = trajectory_errors(pred, walk, fps=30.0)
    assert e["scale"] == pytest.approx(1.25, rel=1e-9)
    assert e["position_mm"] == pytest.approx(0.0, abs=1e-6)
    assert e["distance_error_pct"] == pytest.approx(0.0, abs=1e-6)
    mean = walk.numpy().mean(0)
    static = np.mean([np.linalg.norm(p - mean) for p in walk.numpy()]) * 1000
    assert e["static_mm"] == pytest.approx(static, rel=1e-9)
    # an offset of 10 cm in depth, and NaN frames left out
    off = walk.clone()
    off[:, 2] += 0.1
    off[7] = float("nan")
    e = trajectory_errors(off, walk, fps=30.0)
    s = e["scale"]
    ok = np.isfinite(off.numpy()).all(1)
    ref = np.mean(np.linalg.norm(s * off.numpy()[ok] - walk.numpy()[ok], axis=1)) * 1000
    assert e["frames"] == 49 and e["position_mm"] == pytest.approx(ref, rel=1e-9)
    with pytest.raises(ValueError, match=r"shape \(T, 3\)"):
        trajectory_errors(walk[:, :2], walk[:, :2], fps=30.0)
