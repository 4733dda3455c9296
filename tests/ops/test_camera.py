from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tensorpose.ops import camera
from tensorpose.ops.kinematics import flip
from tensorpose.skeleton import get_skeleton

SK = get_skeleton("h36m17")


def test_project_matches_hand_computed_pinhole():
    K = camera.intrinsic_matrix((1000.0, 900.0), (320.0, 240.0), dtype=torch.float64)
    pts = torch.tensor([[0.5, -0.25, 2.0], [0.0, 0.0, 4.0], [-1.0, 1.0, 5.0]], dtype=torch.float64)
    want = [
        [1000 * 0.5 / 2 + 320, 900 * -0.25 / 2 + 240],
        [320.0, 240.0],
        [1000 * -1 / 5 + 320, 900 * 1 / 5 + 240],
    ]
    np.testing.assert_allclose(camera.project(pts, K).numpy(), want, rtol=1e-12)


def test_project_batched_intrinsics_broadcast():
    K = torch.stack([camera.intrinsic_matrix(f, (50.0, 50.0)) for f in (100.0, 200.0)])
    pts = torch.tensor([0.1, 0.2, 1.0]).expand(2, 4, 3)  # (C, N, 3)
    uv = camera.project(pts, K)
    assert uv.shape == (2, 4, 2)
    np.testing.assert_allclose(uv[:, 0].numpy(), [[60.0, 70.0], [70.0, 90.0]], rtol=1e-6)


def test_normalize_screen_formula_and_inverse():
    px = torch.tensor([[0.0, 0.0], [1000.0, 1002.0], [500.0, 501.0]], dtype=torch.float64)
    w, h = 1000, 1002
    want = px.numpy() / w * 2 - np.array([1.0, h / w])
    got = camera.normalize_screen(px, w, h)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(got[2].numpy(), [0.0, 0.0], atol=1e-12)  # image centre -> 0
    np.testing.assert_allclose(camera.image_coordinates(got, w, h).numpy(), px.numpy())


def test_look_at_geometry():
    eye = torch.tensor([3.0, 2.0, -4.0], dtype=torch.float64)
    target = torch.tensor([0.5, 1.0, 0.5], dtype=torch.float64)
    R, t = camera.look_at(eye, target)
    np.testing.assert_allclose((R @ R.T).numpy(), np.eye(3), atol=1e-12)
    assert float(torch.linalg.det(R)) == pytest.approx(1.0)
    tc = camera.world_to_camera(target[None], R, t)[0]
    np.testing.assert_allclose(tc[:2].numpy(), [0.0, 0.0], atol=1e-12)  # on the optical axis
    assert float(tc[2]) == pytest.approx(float(torch.linalg.vector_norm(target - eye)))
    # World up (+Y) appears as image up (-y); camera centre maps to the origin.
    up = camera.world_to_camera((target + torch.tensor([0.0, 1.0, 0.0]).double())[None], R, t)
    assert float(up[0, 1]) < 0
    np.testing.assert_allclose(camera.world_to_camera(eye[None], R, t).numpy(), 0, atol=1e-12)
    pts = torch.randn(5, 3, dtype=torch.float64)
    back = camera.camera_to_world(camera.world_to_camera(pts, R, t), R, t)
    np.testing.assert_allclose(back.numpy(), pts.numpy(), atol=1e-12)


def test_virtual_cameras_seeded_and_in_range():
    target = torch.tensor([0.3, 0.9, -0.5], dtype=torch.float64)
    a = camera.virtual_cameras(200, torch.Generator().manual_seed(7), target)
    b = camera.virtual_cameras(200, torch.Generator().manual_seed(7), target)
    c = camera.virtual_cameras(200, torch.Generator().manual_seed(8), target)
    for k in a:
        assert torch.equal(a[k], b[k])
    assert not torch.equal(a["R"], c["R"])
    off = a["eye"] - target
    dist = torch.linalg.vector_norm(off, dim=-1)
    elev = torch.rad2deg(torch.asin(off[:, 1] / dist))
    assert float(dist.min()) >= 3.0 and float(dist.max()) <= 6.0
    assert float(elev.min()) >= -10.0 - 1e-9 and float(elev.max()) <= 30.0 + 1e-9
    np.testing.assert_allclose(dist.numpy(), a["distance"].numpy(), rtol=1e-12)
    az = torch.atan2(off[:, 0], off[:, 2])
    assert float(az.max() - az.min()) > 1.8 * math.pi  # all round
    # Every camera looks at the target.
    tc = camera.world_to_camera(target.expand(200, 1, 3), a["R"], a["t"])[:, 0]
    np.testing.assert_allclose(tc[:, :2].numpy(), 0, atol=1e-9)


def test_virtual_cameras_bad_ranges():
    g = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="distance"):
        camera.virtual_cameras(1, g, torch.zeros(3), distance=(-1.0, 2.0))
    with pytest.raises(ValueError, match="elevation"):
        camera.virtual_cameras(1, g, torch.zeros(3), elevation=(0.0, 2.0))


def test_flip_of_normalised_projection_is_projection_of_mirrored_pose():
    """With the principal point at the image centre, negating normalised x and swapping joints
    equals projecting the mirrored (X -> -X, joints swapped) camera-space pose."""
    w, h = 1000, 800
    K = camera.intrinsic_matrix(1145.0, (w / 2, h / 2), dtype=torch.float64)
    pose = torch.randn(4, 17, 3, dtype=torch.float64) * 0.3 + torch.tensor([0.2, 0.1, 4.0])
    kp = camera.normalize_screen(camera.project(pose, K), w, h)
    kp_flipped = flip(kp, SK, axis=0)
    mirrored = flip(pose, SK, axis=0)
    kp_of_mirror = camera.normalize_screen(camera.project(mirrored, K), w, h)
    np.testing.assert_allclose(kp_flipped.numpy(), kp_of_mirror.numpy(), atol=1e-12)


def test_gradcheck():
    K = camera.intrinsic_matrix(500.0, (100.0, 80.0), dtype=torch.float64)
    R, t = camera.look_at(torch.tensor([1.0, 1.0, -3.0]).double(), torch.zeros(3).double())
    pts = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)

    def f(p):
        return camera.normalize_screen(camera.project(camera.world_to_camera(p, R, t), K), 200, 160)

    assert torch.autograd.gradcheck(f, (pts,))


def test_bad_shapes():
    with pytest.raises(ValueError, match="points"):
        camera.project(torch.zeros(4, 2), torch.eye(3))
    with pytest.raises(ValueError, match="K"):
        camera.project(torch.zeros(4, 3), torch.eye(2))
    with pytest.raises(ValueError, match="pixels"):
        camera.normalize_screen(torch.zeros(4, 3), 10, 10)


def _naive_fit_to_rays(P: np.ndarray, rays: np.ndarray, w: np.ndarray):
    """Per frame: weighted least squares with np.linalg.lstsq, then per joint onto its ray."""
    placed, ts = np.empty_like(P), np.empty((len(P), 3))
    for f in range(len(P)):  # the obvious loops: frames, joints
        rows, rhs = [], []
        for j in range(P.shape[1]):
            X, Y, Z = P[f, j]
            x, y = rays[f, j]
            s = math.sqrt(w[f, j])
            rows += [[s, 0.0, -s * x], [0.0, s, -s * y]]
            rhs += [s * (x * Z - X), s * (y * Z - Y)]
        t = np.linalg.lstsq(np.array(rows), np.array(rhs), rcond=None)[0]
        ts[f] = t
        for j in range(P.shape[1]):
            d = P[f, j, 2] + t[2]
            on_ray = [rays[f, j, 0] * d, rays[f, j, 1] * d, d]
            placed[f, j] = on_ray if w[f, j] > 0 else P[f, j] + t
    return placed, ts


def test_fit_to_rays_equals_naive_least_squares():
    g = torch.Generator().manual_seed(0)
    T, J = 7, 17
    P = torch.randn(T, J, 3, generator=g, dtype=torch.float64) * 0.4
    t0 = torch.tensor([0.3, -0.1, 4.0], dtype=torch.float64)
    true = P + t0 + torch.randn(T, J, 3, generator=g, dtype=torch.float64) * 0.05
    rays = true[..., :2] / true[..., 2:]
    w = torch.rand(T, J, generator=g, dtype=torch.float64)
    w[w < 0.2] = 0.0  # some joints ignored: they keep the model's offset from the root
    placed, t = camera.fit_to_rays(P, rays, w)
    ref_placed, ref_t = _naive_fit_to_rays(P.numpy(), rays.numpy(), w.numpy())
    np.testing.assert_allclose(t.numpy(), ref_t, atol=1e-10)
    np.testing.assert_allclose(placed.numpy(), ref_placed, atol=1e-10)
    # weighted joints re-project exactly onto their rays, at their predicted depth + t_z
    on = w > 0
    back = placed[..., :2] / placed[..., 2:]
    assert torch.allclose(back[on], rays[on], atol=1e-12)
    assert torch.allclose(placed[..., 2], P[..., 2] + t[:, None, 2], atol=1e-12)
    # joints already on their rays come back unchanged, with their translation
    exact = P + t0
    placed, t = camera.fit_to_rays(P, exact[..., :2] / exact[..., 2:])
    assert torch.allclose(t, t0.expand(T, 3), atol=1e-10)
    assert torch.allclose(placed, exact, atol=1e-10)


def test_fit_to_rays_bad_input():
    P = torch.zeros(2, 3, 3)
    with pytest.raises(ValueError, match="rays"):
        camera.fit_to_rays(P, torch.zeros(2, 4, 2))
    with pytest.raises(ValueError, match="non-negative"):
        camera.fit_to_rays(P, torch.zeros(2, 3, 2), -torch.ones(2, 3))
    with pytest.raises(ValueError, match="two joints"):
        camera.fit_to_rays(P, torch.zeros(2, 3, 2), torch.tensor([[1.0, 0, 0], [1, 1, 1]]))
