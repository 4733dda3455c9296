"""ops.camera lens distortion against OpenCV (cv2.projectPoints / cv2.undistortPoints), float64,
on the bundled Qualisys calibration and on strong synthetic distortions."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch

from tensorpose.io.calibration import load_calibration
from tensorpose.io.openpose import bundled_tracks
from tensorpose.ops import camera

CALIB = bundled_tracks()[0].parent / "Calib.qca.txt"
STRONG = [
    [-0.28, 0.07, 0.001, -0.0015, 0.0],  # barrel, 4 + k3 = 0
    [0.12, -0.25, -0.002, 0.003, 0.09],  # pincushion with k3
    [-0.05, 0.14, 0.0006, 0.0007],  # 4 coefficients (the Qualisys raw values)
]


def points_in_front(cal, n: int, seed: int) -> torch.Tensor:
    """``(C, n, 3)`` world points 1.5-6 m in front of each camera, inside its image."""
    g = torch.Generator().manual_seed(seed)
    C = cal.num_cameras
    z = 1.5 + 4.5 * torch.rand(C, n, generator=g, dtype=torch.float64)
    u = torch.rand(C, n, generator=g, dtype=torch.float64) * cal.size[:, :1]
    v = torch.rand(C, n, generator=g, dtype=torch.float64) * cal.size[:, 1:]
    x = (u - cal.K[:, None, 0, 2]) / cal.K[:, None, 0, 0] * z
    y = (v - cal.K[:, None, 1, 2]) / cal.K[:, None, 1, 1] * z
    cam = torch.stack([x, y, z], -1)
    return camera.camera_to_world(cam, cal.R, cal.t)


def cv2_project(X: np.ndarray, K, dist, R, t) -> np.ndarray:
    rvec, _ = cv2.Rodrigues(np.asarray(R, dtype=np.float64))
    uv, _ = cv2.projectPoints(X.reshape(-1, 1, 3), rvec, np.asarray(t, np.float64), K, dist)
    return uv.reshape(-1, 2)


@pytest.fixture(scope="module")
def cal():
    return load_calibration(CALIB)


def test_project_points_equals_opencv_on_bundled_calibration(cal):
    X = points_in_front(cal, 500, seed=0)  # (C, N, 3)
    got = camera.project_points(X, cal.K, cal.dist, cal.R, cal.t)
    assert got.shape == (4, 500, 2) and got.dtype == torch.float64
    for c in range(cal.num_cameras):  # reference: one OpenCV call per camera
        want = cv2_project(X[c].numpy(), cal.K[c].numpy(), cal.dist[c].numpy(), cal.R[c], cal.t[c])
        np.testing.assert_allclose(got[c].numpy(), want, atol=1e-6, rtol=0)
        assert np.abs(got[c].numpy() - want).max() < 1e-8


def test_project_points_broadcasts_one_point_set_over_cameras(cal):
    X = points_in_front(cal, 50, seed=1)[0]  # (N, 3), all in front of camera 0
    got = camera.project_points(X, cal.K, cal.dist, cal.R, cal.t)  # (C, N, 2)
    assert got.shape == (4, 50, 2)
    per = camera.project_points(X[None], cal.K[1:2], cal.dist[1:2], cal.R[1:2], cal.t[1:2])
    np.testing.assert_allclose(got[1].numpy(), per[0].numpy(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("coeffs", STRONG)
def test_project_points_equals_opencv_strong_distortion(cal, coeffs):
    X = points_in_front(cal, 300, seed=2)[2]
    dist = torch.tensor(coeffs, dtype=torch.float64)
    got = camera.project_points(X, cal.K[2], dist, cal.R[2], cal.t[2])
    want = cv2_project(X.numpy(), cal.K[2].numpy(), np.array(coeffs), cal.R[2], cal.t[2])
    np.testing.assert_allclose(got.numpy(), want, atol=1e-6, rtol=0)


def test_undistort_points_equals_opencv_on_bundled_calibration(cal):
    g = torch.Generator().manual_seed(3)
    uv = torch.rand(cal.num_cameras, 400, 2, generator=g, dtype=torch.float64) * cal.size[:, None]
    norm = camera.undistort_points(uv, cal.K, cal.dist)
    pix = camera.undistort_points(uv, cal.K, cal.dist, pixel=True)
    for c in range(cal.num_cameras):  # reference: one OpenCV call per camera
        K, d = cal.K[c].numpy(), cal.dist[c].numpy()
        want = cv2.undistortPoints(uv[c].numpy().reshape(-1, 1, 2), K, d).reshape(-1, 2)
        # 1e-6 px in the image is 1e-6 / f in normalised units.
        assert np.abs(norm[c].numpy() - want).max() * K[0, 0] < 1e-6
        want_px = cv2.undistortPoints(uv[c].numpy().reshape(-1, 1, 2), K, d, P=K).reshape(-1, 2)
        np.testing.assert_allclose(pix[c].numpy(), want_px, atol=1e-6, rtol=0)


@pytest.mark.parametrize("coeffs", STRONG)
def test_undistort_points_equals_opencv_strong_distortion(cal, coeffs):
    """The same fixed 5 iterations as OpenCV: equal even where the iteration has not converged
    (image corners under strong distortion)."""
    K = cal.K[1]
    corners = torch.tensor([[0.0, 0.0], [1087.0, 1919.0], [0.0, 1919.0], [1087.0, 0.0]])
    g = torch.Generator().manual_seed(4)
    uv = torch.cat([corners, torch.rand(300, 2, generator=g) * torch.tensor([1088.0, 1920.0])])
    uv = uv.double()
    got = camera.undistort_points(uv, K, torch.tensor(coeffs, dtype=torch.float64))
    want = cv2.undistortPoints(uv.numpy().reshape(-1, 1, 2), K.numpy(), np.array(coeffs))
    assert np.abs(got.numpy() - want.reshape(-1, 2)).max() * float(K[0, 0]) < 1e-6


def test_undistort_keeps_start_where_opencv_gives_up():
    """Where ``1 / radial`` turns negative OpenCV returns the undistorted start ``(x0, y0)``."""
    K = torch.tensor([[500.0, 0, 320], [0, 500.0, 240], [0, 0, 1]], dtype=torch.float64)
    dist = torch.tensor([-1.5, 0.0, 0.0, 0.0, 0.0], dtype=torch.float64)
    uv = torch.tensor([[320.0 + 600, 240.0 + 400], [330.0, 250.0]], dtype=torch.float64)
    got = camera.undistort_points(uv, K, dist)
    want = cv2.undistortPoints(uv.numpy().reshape(-1, 1, 2), K.numpy(), dist.numpy())
    np.testing.assert_allclose(got.numpy(), want.reshape(-1, 2), atol=1e-12)
    np.testing.assert_allclose(got[0].numpy(), [600 / 500, 400 / 500])  # the start point


def test_round_trip_project_undistort(cal):
    X = points_in_front(cal, 200, seed=5)
    uv = camera.project_points(X, cal.K, cal.dist, cal.R, cal.t)
    xy = camera.undistort_points(uv, cal.K, cal.dist)
    cam = camera.world_to_camera(X, cal.R, cal.t)
    # The weak real distortion converges in 5 iterations far below a micro-pixel.
    assert (xy - cam[..., :2] / cam[..., 2:]).abs().max() * 1700 < 1e-6


def test_distort_formula_by_hand():
    xy = torch.tensor([[0.3, -0.2]], dtype=torch.float64)
    k1, k2, p1, p2, k3 = 0.1, -0.05, 0.01, -0.02, 0.003
    x, y = 0.3, -0.2
    r2 = x * x + y * y
    rad = 1 + k1 * r2 + k2 * r2**2 + k3 * r2**3
    want = [x * rad + 2 * p1 * x * y + p2 * (r2 + 2 * x * x),
            y * rad + p1 * (r2 + 2 * y * y) + 2 * p2 * x * y]  # fmt: skip
    got = camera.distort(xy, torch.tensor([k1, k2, p1, p2, k3], dtype=torch.float64))
    np.testing.assert_allclose(got[0].numpy(), want, rtol=1e-14)


def test_float32_close_to_float64(cal):
    X = points_in_front(cal, 100, seed=6)
    want = camera.project_points(X, cal.K, cal.dist, cal.R, cal.t)
    c32 = cal.to(torch.float32)
    got = camera.project_points(X.float(), c32.K, c32.dist, c32.R, c32.t)
    assert (got.double() - want).abs().max() < 2e-3  # pixels


def test_gradients_flow_through_projection(cal):
    X = points_in_front(cal, 5, seed=7)[0].requires_grad_(True)
    camera.project_points(X, cal.K[0], cal.dist[0], cal.R[0], cal.t[0]).sum().backward()
    assert torch.isfinite(X.grad).all() and X.grad.abs().sum() > 0


def test_device(device, cal):
    c = cal.to(device)
    X = points_in_front(cal, 20, seed=8).to(device)
    uv = camera.project_points(X, c.K, c.dist, c.R, c.t)
    xy = camera.undistort_points(uv, c.K, c.dist, pixel=True)
    assert uv.device.type == device.type
    ref = camera.project_points(X.cpu(), cal.K, cal.dist, cal.R, cal.t)
    np.testing.assert_allclose(uv.cpu().numpy(), ref.numpy(), atol=1e-9)
    assert torch.isfinite(xy).all()


def test_bad_inputs(cal):
    X = points_in_front(cal, 3, seed=9)
    with pytest.raises(ValueError, match="dist must have shape"):
        camera.project_points(X, cal.K, cal.dist[:, :3], cal.R, cal.t)
    with pytest.raises(ValueError, match=r"points must have shape \(\.\.\., 3\)"):
        camera.project_points(X[..., :2], cal.K, cal.dist, cal.R, cal.t)
    with pytest.raises(ValueError, match="K must have shape"):
        camera.undistort_points(X[..., :2], cal.K[:, :2], cal.dist)
    with pytest.raises(TypeError, match="pixels must be a torch.Tensor"):
        camera.undistort_points(X[..., :2].numpy(), cal.K, cal.dist)
    with pytest.raises(ValueError, match="iterations must be >= 0"):
        camera.undistort_points(X[..., :2], cal.K, cal.dist, iterations=-1)
