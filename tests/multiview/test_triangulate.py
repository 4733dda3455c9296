"""ops.triangulate against its naive twin: a per-point loop with OpenCV undistortion and
projection, numpy SVD DLT, per-camera dropping and per-frame association (float64), on the
bundled four-camera OpenPose trial and on synthetic people with known 3D truth."""

from __future__ import annotations

import itertools
import math

import cv2
import numpy as np
import pytest
import torch

from tensorpose.io.calibration import Calibration, load_calibration
from tensorpose.io.openpose import bundled_tracks, read_openpose_frames
from tensorpose.multiview.association import triangulate_people
from tensorpose.multiview.dlt import (
    _adjugate4,
    dlt_normal_matrices,
    reprojection_errors,
    smallest_eigenvector,
    weighted_dlt,
)
from tensorpose.multiview.triangulate import triangulate_points
from tensorpose.ops import camera

CALIB = bundled_tracks()[0].parent / "Calib.qca.txt"
INF = math.inf


# ----------------------------------------------------------------------------- naive twin
class Naive:
    """The obvious per-point implementation of the same steps (one camera, one point, one
    detection pair at a time)."""

    def __init__(self, cal: Calibration, min_confidence=0.3, max_error_px=15.0,
                 association_px=20.0, min_common_joints=3, min_cameras=2,
                 drop="leave_one_out"):  # fmt: skip
        self.K = cal.K.numpy()
        self.dist = cal.dist.numpy()
        self.R = cal.R.numpy()
        self.t = cal.t.numpy()
        self.rvec = [cv2.Rodrigues(r)[0] for r in self.R]
        self.P = [np.hstack([r, t[:, None]]) for r, t in zip(self.R, self.t, strict=True)]
        self.min_confidence = min_confidence
        self.max_error_px = max_error_px
        self.association_px = association_px
        self.min_common_joints = min_common_joints
        self.min_cameras = min_cameras
        self.drop = drop

    def undistort(self, c: int, uv) -> np.ndarray:
        pt = np.asarray(uv, dtype=np.float64).reshape(1, 1, 2)
        return cv2.undistortPoints(pt, self.K[c], self.dist[c]).reshape(2)

    def dlt(self, obs: list) -> np.ndarray | None:
        """``obs``: list of ``(camera, normalised xy, weight)``."""
        rows = []
        for c, xy, w in obs:
            P = self.P[c]
            rows.append(w * (xy[0] * P[2] - P[0]))
            rows.append(w * (xy[1] * P[2] - P[1]))
        _, _, vt = np.linalg.svd(np.array(rows))
        v = vt[-1]
        if abs(v[3]) <= 1e-12:
            return None
        return v[:3] / v[3]

    def error(self, X: np.ndarray, c: int, uv) -> float:
        if (self.R[c] @ X + self.t[c])[2] <= 0:
            return INF
        proj, _ = cv2.projectPoints(X.reshape(1, 1, 3), self.rvec[c], self.t[c], self.K[c],
                                    self.dist[c])  # fmt: skip
        return float(np.hypot(*(proj.reshape(2) - np.asarray(uv))))

    def pose2sim(self, obs: dict) -> dict:
        """Pose2Sim's ``triangulation_from_best_cameras`` loop, literally: at level ``k``
        exclude ``k`` of all cameras in every ``itertools.combinations`` way, keep the lowest
        mean error (``nanargmin``); stop when it is within the threshold or when a combination
        would leave fewer than ``min_cameras`` cameras."""
        C = len(self.P)
        norm = {c: self.undistort(c, obs[c][0]) for c in obs}
        best, error_min, k = None, INF, 0
        while error_min > self.max_error_px and C - k >= self.min_cameras:
            combos = list(itertools.combinations(range(C), k))
            subsets = [[c for c in sorted(obs) if c not in off] for off in combos]
            if max(C - len(s) for s in subsets) > C - self.min_cameras:
                break
            errors, results = [], []
            for s in subsets:
                X = self.dlt([(c, norm[c], obs[c][1]) for c in s])
                err = {c: self.error(X, c, obs[c][0]) for c in s} if X is not None else None
                errors.append(np.mean(list(err.values())) if err else math.nan)
                results.append((X, err, s))
            error_min = np.nanmin(errors)
            best = results[int(np.nanargmin(errors))]
            k += 1
        if best is None:  # too few cameras: nothing triangulated (the seen ones as "used")
            return {"X": None, "err": {}, "used": sorted(obs), "mean": math.nan, "valid": False}
        X, err, used = best
        return {
            "X": X,
            "err": err,
            "used": used,
            "mean": float(error_min),
            "valid": bool(error_min <= self.max_error_px),
        }

    def point(self, obs: dict) -> dict:
        """``obs``: camera -> (pixel uv, weight), observed cameras only."""
        if self.drop == "pose2sim":
            return self.pose2sim(obs)
        used = sorted(obs)
        norm = {c: self.undistort(c, obs[c][0]) for c in used}
        while True:  # drop the worst camera while above the threshold
            X = self.dlt([(c, norm[c], obs[c][1]) for c in used]) if len(used) >= 2 else None
            if X is None:
                err = {c: math.nan for c in used}
                break
            err = {c: self.error(X, c, obs[c][0]) for c in used}
            if max(err.values()) <= self.max_error_px or len(used) <= self.min_cameras:
                break
            if self.drop == "largest_error":
                worst = max(used, key=lambda c: (err[c], -c))  # first camera among equals
            else:  # the camera without which the others agree best
                score = [INF] * len(self.P)
                for c in used:
                    rest = [d for d in used if d != c]
                    Xo = self.dlt([(d, norm[d], obs[d][1]) for d in rest])
                    if Xo is not None:
                        score[c] = float(np.mean([self.error(Xo, d, obs[d][0]) for d in rest]))
                worst = int(np.argmin(score))
                if worst not in used:  # nothing solvable without any one camera
                    break
            used.remove(worst)
        ok = X is not None and len(used) >= self.min_cameras
        mean = float(np.mean([err[c] for c in used])) if used else math.nan
        valid = ok and max(err[c] for c in used) <= self.max_error_px
        return {"X": X if ok else None, "err": err, "used": used, "mean": mean, "valid": valid}

    def people(self, kp: np.ndarray) -> list[dict]:
        """``kp (C, T, P, J, 3)`` -> per frame the winning candidate and its joints."""
        C, T, P, J, _ = kp.shape
        out = []
        for t in range(T):  # one frame at a time
            conf = kp[:, t, :, :, 2]
            seen = np.isfinite(kp[:, t, :, :, :2]).all(-1) & (conf >= self.min_confidence)
            seen &= conf > 0
            cost = np.full((C, P, C, P), INF)
            support = np.zeros((C, P, C, P), dtype=int)
            for a in range(C):
                for b in range(a + 1, C):
                    for p in range(P):
                        for q in range(P):
                            errs = []
                            for j in range(J):
                                if not (seen[a, p, j] and seen[b, q, j]):
                                    continue
                                ua, ub = kp[a, t, p, j, :2], kp[b, t, q, j, :2]
                                obs = [(a, self.undistort(a, ua), kp[a, t, p, j, 2]),
                                       (b, self.undistort(b, ub), kp[b, t, q, j, 2])]  # fmt: skip
                                X = self.dlt(obs)
                                if X is None:
                                    continue
                                ea, eb = self.error(X, a, ua), self.error(X, b, ub)
                                errs.append((ea + eb) / 2)
                                if max(ea, eb) <= self.max_error_px:
                                    support[a, p, b, q] += 1
                                    support[b, q, a, p] += 1
                            if len(errs) >= self.min_common_joints:
                                cost[a, p, b, q] = cost[b, q, a, p] = np.mean(errs)
            best, best_score = None, -INF
            for a in range(C):
                for p in range(P):
                    if seen[a, p].sum() < self.min_common_joints:
                        continue
                    choice, score, costs = [], seen[a, p].sum(), []
                    for c in range(C):
                        if c == a:
                            choice.append(p)
                            continue
                        q = int(np.argmin(cost[a, p, c]))
                        if cost[a, p, c, q] < self.association_px:
                            choice.append(q)
                            score += support[a, p, c, q]
                            costs.append(cost[a, p, c, q])
                        else:
                            choice.append(-1)
                    e = float(np.mean(costs)) if costs else 0.0
                    score = score - e / (1 + e)
                    if score > best_score:
                        best, best_score = choice, score
            if best is None:
                out.append(None)
                continue
            joints = []
            for j in range(J):
                obs = {c: (kp[c, t, q, j, :2], kp[c, t, q, j, 2])
                       for c, q in enumerate(best) if q >= 0 and seen[c, q, j]}  # fmt: skip
                joints.append(self.point(obs))
            out.append({"choice": best, "joints": joints})
        return out


def compare(res, naive: list[dict], C: int, atol_m=1e-9, atol_px=1e-7):
    """Assert the batched result equals the naive one, frame by frame and joint by joint."""
    for t, win in enumerate(naive):  # reporting loop over frames
        if win is None:
            assert (res.person[t] == -1).all() and not res.valid[t].any()
            continue
        assert res.person[t].tolist() == win["choice"], f"frame {t}"
        for j, r in enumerate(win["joints"]):
            used = [bool(u) for u in res.used[t, j]]
            assert used == [c in r["used"] for c in range(C)], (t, j)
            assert bool(res.valid[t, j]) == r["valid"], (t, j)
            if r["X"] is None:
                assert torch.isnan(res.points[t, j]).all()
                continue
            np.testing.assert_allclose(res.points[t, j].numpy(), r["X"], atol=atol_m, rtol=0)
            for c in r["used"]:
                np.testing.assert_allclose(float(res.errors[t, j, c]), r["err"][c], atol=atol_px)
            np.testing.assert_allclose(float(res.mean_error[t, j]), r["mean"], atol=atol_px)


# ----------------------------------------------------------------------------- data
@pytest.fixture(scope="module")
def cal() -> Calibration:
    return load_calibration(CALIB)


def bundled_keypoints(frames: slice = slice(None)) -> torch.Tensor:
    """The bundled trial as ``(C, T, P, J, 3)`` detections (zero-padded people slots)."""
    per_cam = [read_openpose_frames(d)[0][frames] for d in bundled_tracks()]
    P = max(len(f) for frs in per_cam for f in frs)
    T, J = len(per_cam[0]), per_cam[0][0].shape[1]
    kp = torch.zeros(len(per_cam), T, P, J, 3, dtype=torch.float64)
    for c, frs in enumerate(per_cam):  # filling a test fixture
        for t, f in enumerate(frs):
            kp[c, t, : len(f)] = torch.from_numpy(f)
    return kp


def synthetic(cal: Calibration, T=6, J=12, seed=0, noise_px=0.3):
    """A person (truth ``X (T, J, 3)``) seen by all cameras and a bystander seen by cameras 0
    and 1, in shuffled detection slots, with pixel noise, an outlier camera for some joints and
    low-confidence / missing joints. Returns keypoints, truth, slot of the person, outliers."""
    g = torch.Generator().manual_seed(seed)
    f64 = torch.float64
    base = torch.tensor([-1.0, -0.2, 0.2], dtype=f64)
    body = torch.rand(J, 3, generator=g, dtype=f64) * torch.tensor([0.5, 0.4, 1.5], dtype=f64)
    drift = torch.linspace(0, 0.2, T, dtype=f64)[:, None, None] * torch.tensor([1.0, 0.5, 0.0])
    X = base + body + drift  # (T, J, 3)
    Y = X + torch.tensor([0.9, 1.3, 0.0], dtype=f64)  # bystander
    C = cal.num_cameras
    uvX = camera.project_points(X.reshape(1, -1, 3), cal.K, cal.dist, cal.R, cal.t)
    uvY = camera.project_points(Y.reshape(1, -1, 3), cal.K, cal.dist, cal.R, cal.t)
    uvX = uvX.reshape(C, T, J, 2) + noise_px * torch.randn(C, T, J, 2, generator=g, dtype=f64)
    uvY = uvY.reshape(C, T, J, 2) + noise_px * torch.randn(C, T, J, 2, generator=g, dtype=f64)
    conf = 0.5 + 0.5 * torch.rand(C, T, J, generator=g, dtype=f64)
    outlier = torch.zeros(C, T, J, dtype=torch.bool)
    outlier[2, :, ::3] = True  # camera 2 is 150 px off on every third joint
    uvX = uvX + outlier.unsqueeze(-1) * torch.tensor([120.0, -90.0], dtype=f64)
    low = torch.zeros(C, T, J, dtype=torch.bool)
    low[1, :, 1] = True  # below the confidence threshold in camera 1
    conf = torch.where(low, torch.full_like(conf, 0.1), conf)
    conf[3, :, 2] = 0.0  # not detected in camera 3
    slot = torch.randint(0, 2, (C, T), generator=g)
    slot[2:] = 0  # cameras 2 and 3 see only the person
    kp = torch.zeros(C, T, 2, J, 3, dtype=f64)
    c_idx, t_idx = torch.meshgrid(torch.arange(C), torch.arange(T), indexing="ij")
    kp[c_idx, t_idx, slot] = torch.cat([uvX, conf.unsqueeze(-1)], -1)
    by = (1 - slot)[:2]
    kp[c_idx[:2], t_idx[:2], by] = torch.cat([uvY[:2], conf[:2].unsqueeze(-1)], -1)
    return kp, X, slot, outlier, low


# ----------------------------------------------------------------------------- eigen solver
def test_adjugate_is_det_times_inverse():
    M = torch.randn(500, 4, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    want = torch.linalg.det(M)[:, None, None] * torch.linalg.inv(M)
    torch.testing.assert_close(_adjugate4(M), want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("spread", [1.0, 1e-3, 1e-8, 0.0])
def test_smallest_eigenvector_equals_eigh(spread):
    """Random PSD matrices whose smallest eigenvalue is drawn from [0, spread]: the error is at
    the level of eigh's own, eps / gap."""
    g = torch.Generator().manual_seed(1)
    Q, _ = torch.linalg.qr(torch.randn(5000, 4, 4, generator=g, dtype=torch.float64))
    ev = torch.rand(5000, 4, generator=g, dtype=torch.float64)
    ev[:, 0] *= spread
    N = Q @ torch.diag_embed(ev) @ Q.mT * 7.5  # any scale
    v, lam = smallest_eigenvector(N)
    w, V = torch.linalg.eigh(N)
    ref = V[..., 0]
    err = torch.minimum((v - ref).abs().amax(-1), (v + ref).abs().amax(-1))
    gap = (w[:, 1] - w[:, 0]) / w.sum(-1)
    assert (err * gap).max() < 1e-13
    assert (err[gap > 1e-3]).max() < 1e-10
    torch.testing.assert_close(lam, w[:, 0], rtol=0, atol=1e-12)


def test_smallest_eigenvector_rank_deficient_is_zero():
    a = torch.randn(10, 2, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    v, _ = smallest_eigenvector(a.mT @ a)  # rank 2: no unique smallest eigenvector
    assert (v.abs() < 1e-6).all()
    v, _ = smallest_eigenvector(torch.zeros(3, 4, 4, dtype=torch.float64))
    assert (v == 0).all()


# ----------------------------------------------------------------------------- DLT / points
def test_dlt_normal_matrices_are_the_row_outer_products(cal):
    g = torch.Generator().manual_seed(5)
    xy = torch.randn(7, 4, 2, generator=g, dtype=torch.float64) * 0.3
    w = torch.rand(7, 4, generator=g, dtype=torch.float64)
    w[0, 1] = 0
    xy[0, 1] = float("nan")  # unused camera: any value
    got = dlt_normal_matrices(xy, w, cal.R, cal.t)
    P = torch.cat([cal.R, cal.t.unsqueeze(-1)], -1).numpy()
    for i in range(7):  # the per-point reference
        for c in range(4):
            a = w[i, c].item() * (xy[i, c, 0].item() * P[c, 2] - P[c, 0])
            b = w[i, c].item() * (xy[i, c, 1].item() * P[c, 2] - P[c, 1])
            want = np.outer(a, a) + np.outer(b, b) if w[i, c] > 0 else np.zeros((4, 4))
            np.testing.assert_allclose(got[i, c].numpy(), want, atol=1e-12)


def test_weighted_dlt_equals_naive_svd(cal):
    g = torch.Generator().manual_seed(3)
    X = torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64) + 0.3 * torch.randn(
        200, 3, generator=g, dtype=torch.float64
    )
    cam = camera.world_to_camera(X.unsqueeze(0), cal.R, cal.t)  # (C, N, 3)
    xy = (cam[..., :2] / cam[..., 2:]).transpose(0, 1)  # (N, C, 2)
    xy = xy + 0.002 * torch.randn(xy.shape, generator=g, dtype=torch.float64)
    w = torch.rand(200, 4, generator=g, dtype=torch.float64)
    w[w < 0.2] = 0
    got, ok = weighted_dlt(xy, w, cal.R, cal.t)
    naive = Naive(cal)
    for i in range(200):  # the per-point reference
        obs = [(c, xy[i, c].numpy(), float(w[i, c])) for c in range(4) if w[i, c] > 0]
        if len(obs) < 2:
            assert not ok[i] and torch.isnan(got[i]).all()
            continue
        np.testing.assert_allclose(got[i].numpy(), naive.dlt(obs), atol=1e-10, rtol=0)
    exact, _ = weighted_dlt((cam[..., :2] / cam[..., 2:]).transpose(0, 1), torch.ones(200, 4,
                            dtype=torch.float64), cal.R, cal.t)  # fmt: skip
    torch.testing.assert_close(exact, X, rtol=0, atol=1e-9)  # noise-free: exact


@pytest.mark.parametrize("drop", ["leave_one_out", "largest_error", "pose2sim"])
def test_triangulate_points_equals_naive_with_outliers(cal, drop):
    g = torch.Generator().manual_seed(4)
    N, C = 300, 4
    X = torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64) + 0.4 * torch.randn(
        N, 3, generator=g, dtype=torch.float64
    )
    uv = camera.project_points(X, cal.K, cal.dist, cal.R, cal.t).transpose(0, 1)  # (N, C, 2)
    uv = uv + 2 * torch.randn(uv.shape, generator=g, dtype=torch.float64)
    bad = torch.rand(N, C, generator=g) < 0.25
    uv = uv + bad.unsqueeze(-1) * 80 * torch.randn(N, C, 2, generator=g, dtype=torch.float64)
    w = 0.3 + 0.7 * torch.rand(N, C, generator=g, dtype=torch.float64)
    w[torch.rand(N, C, generator=g) < 0.15] = 0
    uv[torch.rand(N, C, generator=g) < 0.05] = float("nan")
    res = triangulate_points(uv, w, cal.K, cal.dist, cal.R, cal.t, max_error_px=10.0, drop=drop)
    naive = Naive(cal, max_error_px=10.0, drop=drop)
    for i in range(N):  # the per-point reference
        obs = {c: (uv[i, c].numpy(), float(w[i, c])) for c in range(C)
               if w[i, c] > 0 and torch.isfinite(uv[i, c]).all()}  # fmt: skip
        r = naive.point(obs)
        assert res.used[i].tolist() == [c in r["used"] for c in range(C)], i
        assert bool(res.valid[i]) == r["valid"], i
        if r["X"] is not None:
            np.testing.assert_allclose(res.points[i].numpy(), r["X"], atol=1e-9, rtol=0)
            np.testing.assert_allclose(float(res.mean_error[i]), r["mean"], atol=1e-7)
    assert res.valid.float().mean() > 0.6  # most points survive 25% outliers


def test_reprojection_error_behind_camera_is_inf(cal):
    X = torch.tensor([[-1.0, 0.0, 1.0]], dtype=torch.float64)
    behind = 2 * cal.centers[0] - X  # mirrored through camera 0's centre
    uv = torch.zeros(1, 4, 2, dtype=torch.float64)
    err = reprojection_errors(behind, uv, cal.K, cal.dist, cal.R, cal.t)
    assert math.isinf(float(err[0, 0]))


# ----------------------------------------------------------------------------- people
def test_people_synthetic_truth_and_naive(cal):
    kp, X, slot, outlier, low = synthetic(cal)
    res = triangulate_people(kp, cal.K, cal.dist, cal.R, cal.t)
    assert res.person.tolist() == slot.T.tolist()  # the person, not the bystander
    assert res.valid.all()
    assert (res.points - X).norm(dim=-1).max() < 0.005  # 0.3 px noise -> millimetres
    assert not res.used.permute(2, 0, 1)[outlier].any()  # the outlier camera is dropped
    assert res.used.permute(2, 0, 1)[~outlier & ~low].float().mean() > 0.95
    assert not res.used[:, 1, 1].any() and not res.used[:, 2, 3].any()  # low conf / missing
    assert res.mean_error.max() < 1.5
    compare(res, Naive(cal).people(kp.numpy()), cal.num_cameras)


def test_people_largest_error_rule_keeps_a_high_leverage_outlier(cal):
    """Dropping the camera of largest reprojection error (instead of leave-one-out) fails on
    some joints here: the outlying camera pulls the DLT point towards itself, another camera
    shows the larger error and is dropped, and the outlier survives in a consistent-looking
    pair. Still equal to its naive twin."""
    kp, X, _, outlier, _ = synthetic(cal)
    res = triangulate_people(kp, cal.K, cal.dist, cal.R, cal.t, drop="largest_error")
    assert res.used.permute(2, 0, 1)[outlier].any()
    assert (res.points - X).norm(dim=-1).max() > 0.1
    compare(res, Naive(cal, drop="largest_error").people(kp.numpy()), cal.num_cameras)


@pytest.mark.parametrize("drop", ["leave_one_out", "largest_error", "pose2sim"])
def test_people_equals_naive_on_bundled_trial(cal, drop):
    kp = bundled_keypoints(slice(3, 100, 19))  # 6 frames, 1-3 people per camera
    res = triangulate_people(kp, cal.K, cal.dist, cal.R, cal.t, drop=drop)
    naive = Naive(cal, drop=drop).people(kp.numpy())
    compare(res, naive, cal.num_cameras)
    assert res.valid.float().mean() > 0.9
    assert (res.person >= 0).all()


def test_people_ragged_input_equals_padded(cal):
    kp = bundled_keypoints(slice(0, 100, 25))
    padded = triangulate_people(kp, cal.K, cal.dist, cal.R, cal.t)
    slots = [3, 2, 1, 1]  # detections per camera in this trial, at most
    assert not kp[1, :, 2:].any() and not kp[2:, :, 1:].any()
    ragged = triangulate_people([kp[c, :, :n] for c, n in enumerate(slots)], cal.K, cal.dist,
                                cal.R, cal.t)  # fmt: skip
    for key in ("points", "errors", "mean_error"):
        torch.testing.assert_close(getattr(ragged, key), getattr(padded, key), equal_nan=True)
    for key in ("used", "valid", "person", "score"):
        assert torch.equal(getattr(ragged, key), getattr(padded, key)), key
    empty = [kp[0], kp[1], kp[2, :, :0], kp[3]]  # a camera with no detection slot at all
    res = triangulate_people(empty, cal.K, cal.dist, cal.R, cal.t)
    assert (res.person[:, 2] == -1).all() and not res.used[..., 2].any()


@pytest.mark.parametrize("drop", ["leave_one_out", "largest_error", "pose2sim"])
def test_fixed_shape_path_equals_compacted_path(cal, monkeypatch, drop):
    """The path other devices take (every row at fixed shapes, no nonzero), run on CPU, gives
    the same results as CPU's compacted rows; leading dims of any rank."""
    import tensorpose.multiview.dlt as tri

    kp = bundled_keypoints(slice(0, 100, 9))
    args = (cal.K, cal.dist, cal.R, cal.t)
    fast = triangulate_people(kp, *args, drop=drop)
    g = torch.Generator().manual_seed(6)
    X = torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64) + 0.4 * torch.randn(
        3, 50, 3, generator=g, dtype=torch.float64
    )
    uv = camera.project_points(X.reshape(1, -1, 3), *args).movedim(0, -2).reshape(3, 50, 4, 2)
    uv = uv + 40 * (torch.rand(uv.shape, generator=g) < 0.2) * torch.randn(uv.shape, generator=g)
    w = torch.rand(3, 50, 4, generator=g, dtype=torch.float64)
    pts_fast = triangulate_points(uv, w, *args, drop=drop)
    monkeypatch.setattr(tri, "COMPACT_ON_CPU", False)
    slow = triangulate_people(kp, *args, drop=drop)
    pts_slow = triangulate_points(uv, w, *args, drop=drop)
    for a, b in ((fast, slow), (pts_fast, pts_slow)):
        for key in ("points", "errors", "mean_error"):
            torch.testing.assert_close(getattr(a, key), getattr(b, key), equal_nan=True,
                                       rtol=0, atol=1e-9)  # fmt: skip
        assert torch.equal(a.used, b.used) and torch.equal(a.valid, b.valid)
    assert torch.equal(fast.person, slow.person)
    assert pts_fast.points.shape == (3, 50, 3) and pts_fast.used.any(-1).all()


def test_people_frames_without_anyone(cal):
    kp, *_ = synthetic(cal, T=3)
    kp[:, 1] = 0  # nobody in frame 1
    kp[1:, 2] = 0  # frame 2: only camera 0 sees anyone
    res = triangulate_people(kp, cal.K, cal.dist, cal.R, cal.t)
    assert (res.person[1] == -1).all() and not res.valid[1].any()
    assert torch.isnan(res.points[1]).all() and math.isinf(float(res.score[1]))
    assert not res.valid[2].any()
    assert res.valid[0].all()


def test_people_thresholds_change_outcome(cal):
    kp, X, *_ = synthetic(cal, T=2, noise_px=3.0)
    loose = triangulate_people(kp, cal.K, cal.dist, cal.R, cal.t, max_error_px=300.0)
    assert loose.used[:, ::3, 2].all()  # the 150 px outlier camera is kept
    strict = triangulate_people(kp, cal.K, cal.dist, cal.R, cal.t, max_error_px=15.0)
    assert not strict.used[:, ::3, 2].any()
    err_loose = (loose.points - X).norm(dim=-1)[:, ::3].mean()
    err_strict = (strict.points - X).norm(dim=-1)[:, ::3].mean()
    assert err_strict < err_loose / 3
    none = triangulate_people(kp, cal.K, cal.dist, cal.R, cal.t, min_confidence=1.0)
    assert (none.person == -1).all()


def test_people_float32_and_device(device, cal):
    kp, X, *_ = synthetic(cal, T=3)
    c = cal.to(device=device, dtype=torch.float32)
    res = triangulate_people(kp.to(device, torch.float32), c.K, c.dist, c.R, c.t)
    assert res.points.device.type == device.type
    assert (res.points.double().cpu() - X).norm(dim=-1).max() < 0.01


def test_bad_inputs(cal):
    kp, *_ = synthetic(cal, T=2)
    with pytest.raises(ValueError, match=r"keypoints must have shape \(C, T, P, J, 3\)"):
        triangulate_people(kp[..., :2], cal.K, cal.dist, cal.R, cal.t)
    with pytest.raises(ValueError, match="K must hold C=4 cameras"):
        triangulate_people(kp, cal.K[:3], cal.dist, cal.R, cal.t)
    with pytest.raises(ValueError, match="min_confidence"):
        triangulate_people(kp, cal.K, cal.dist, cal.R, cal.t, min_confidence=2.0)
    with pytest.raises(ValueError, match="association_px"):
        triangulate_people(kp, cal.K, cal.dist, cal.R, cal.t, association_px=0.0)
    with pytest.raises(ValueError, match="drop must be one of"):
        triangulate_people(kp, cal.K, cal.dist, cal.R, cal.t, drop="median")
    uv = torch.zeros(5, 4, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"weights must have shape \(5, 4\)"):
        triangulate_points(uv, torch.ones(5, 3), cal.K, cal.dist, cal.R, cal.t)
    with pytest.raises(ValueError, match="min_cameras must be >= 2"):
        triangulate_points(uv, torch.ones(5, 4), cal.K, cal.dist, cal.R, cal.t, min_cameras=1)
    with pytest.raises(ValueError, match="max_error_px must be positive"):
        triangulate_points(uv, torch.ones(5, 4), cal.K, cal.dist, cal.R, cal.t, max_error_px=0)
    with pytest.raises(ValueError, match=r"N must have shape \(\.\.\., 4, 4\)"):
        smallest_eigenvector(torch.zeros(3, 3, dtype=torch.float64))


def test_blocked_solve_and_features_equal_the_whole_batch(monkeypatch):
    """The CPU solver's blocks of matrices give the values of one batch, bit for bit; the DLT
    features equal their formula ``w^2 (x^2 + y^2), w^2 x, w^2 y, w^2`` (0 where unused)."""
    from tensorpose.multiview import dlt
    from tensorpose.multiview.dlt import _UPPER

    g = torch.Generator().manual_seed(4)
    A = torch.randn(300, 4, 4, dtype=torch.float64, generator=g)
    u = (A.mT @ A).reshape(-1, 16)[:, _UPPER].T.contiguous()
    whole = dlt._solve_upper(u)
    monkeypatch.setattr(dlt, "SOLVE_BLOCK", 7)
    X, ok = dlt._solve_upper(u)
    assert torch.equal(ok, whole[1]) and torch.equal(X.nan_to_num(9.0), whole[0].nan_to_num(9.0))
    xy = torch.randn(50, 3, 2, dtype=torch.float64, generator=g)
    w = torch.rand(50, 3, dtype=torch.float64, generator=g).masked_fill_(torch.rand(50, 3) < 0.3, 0)
    xy[w == 0] = float("nan")  # unused observations may be NaN
    x, y = xy.nan_to_num(0.0).unbind(-1)
    w2 = w * w
    naive = torch.stack([(x * x + y * y) * w2, x * w2, y * w2, w2], -1)
    assert torch.equal(dlt._dlt_features(xy, w), naive)
