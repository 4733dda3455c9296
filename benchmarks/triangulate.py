"""Multi-view triangulation of the bundled four-camera OpenPose trial: the batched op vs a
per-point NumPy loop doing the same steps, side by side in one process.

Both run the whole pipeline of :func:`tensorpose.multiview.association.triangulate_people` on the
same
detections (100 frames x 4 cameras x 1-3 people x 25 joints): undistortion (OpenCV's 5
fixed-point iterations), two-view DLT of every detection pair of every camera pair for the
cross-view association, the winner's weighted DLT with camera dropping (leave-one-out by
default), reprojection errors.

* ``naive numpy loop``: one frame, one detection pair, one joint, one camera at a time with
  ``np.linalg.svd`` per DLT and scalar maths for lens distortion and projection (the baseline).
* ``tensorpose float64`` / ``float32``: :func:`~tensorpose.multiview.association.triangulate_people`
  on per-camera ``(T, P_c, J, 3)`` tensors.
* ``tensorpose float64 + eigh``: the same with ``torch.linalg.eigh`` in place of the closed-form
  4 x 4 eigensolver, to show what that solver buys.

The shared CPU's load changes within seconds, so the timing runs in interleaved rounds: one
baseline run, then ``--repeats`` runs of each contender; medians over all rounds. Also checks
that every contender picks the same person as the baseline and the same valid points. Writes
``benchmarks/results/triangulate_<device>.json``.

    python benchmarks/triangulate.py [--rounds 3] [--repeats 5] [--threads 1] [--drop ...]
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import base_parser, device_name, print_table, sync, times, write_json
from tensorpose.io.calibration import load_calibration
from tensorpose.io.openpose import bundled_tracks, read_openpose_frames
from tensorpose.multiview import dlt
from tensorpose.multiview.association import triangulate_people
from tensorpose.multiview.triangulate import DROP_RULES

INF = math.inf


# ----------------------------------------------------------------------------- baseline
class NaiveNumpy:
    """Per-point NumPy implementation of ``triangulate_people`` (same steps and rules)."""

    def __init__(self, K, dist, R, t, min_confidence=0.3, max_error_px=15.0,
                 association_px=20.0, min_common_joints=3, min_cameras=2,
                 drop="leave_one_out"):  # fmt: skip
        self.K, self.dist, self.R, self.t = K, dist, R, t
        self.P = [np.hstack([r, tt[:, None]]) for r, tt in zip(R, t, strict=True)]
        self.min_confidence, self.max_error_px = min_confidence, max_error_px
        self.association_px, self.min_common_joints = association_px, min_common_joints
        self.min_cameras, self.drop = min_cameras, drop

    def undistort(self, c, u, v):
        K, (k1, k2, p1, p2, k3) = self.K[c], self.dist[c]
        x0 = x = (u - K[0, 2]) / K[0, 0]
        y0 = y = (v - K[1, 2]) / K[1, 1]
        for _ in range(5):  # OpenCV's fixed-point iterations
            r2 = x * x + y * y
            icdist = 1 / (1 + ((k3 * r2 + k2) * r2 + k1) * r2)
            if icdist < 0:
                return x0, y0
            dx = 2 * p1 * x * y + p2 * (r2 + 2 * x * x)
            dy = p1 * (r2 + 2 * y * y) + 2 * p2 * x * y
            x, y = (x0 - dx) * icdist, (y0 - dy) * icdist
        return x, y

    def error(self, X, c, u, v):
        xc = self.R[c] @ X + self.t[c]
        if xc[2] <= 0:
            return INF
        x, y = xc[0] / xc[2], xc[1] / xc[2]
        k1, k2, p1, p2, k3 = self.dist[c]
        r2 = x * x + y * y
        rad = 1 + ((k3 * r2 + k2) * r2 + k1) * r2
        xd = x * rad + 2 * p1 * x * y + p2 * (r2 + 2 * x * x)
        yd = y * rad + p1 * (r2 + 2 * y * y) + 2 * p2 * x * y
        K = self.K[c]
        return math.hypot(K[0, 0] * xd + K[0, 2] - u, K[1, 1] * yd + K[1, 2] - v)

    def dlt(self, obs):
        rows = []
        for c, (x, y), w in obs:
            P = self.P[c]
            rows += [w * (x * P[2] - P[0]), w * (y * P[2] - P[1])]
        v = np.linalg.svd(np.array(rows))[2][-1]
        return None if abs(v[3]) <= 1e-12 else v[:3] / v[3]

    def point(self, obs):
        """``obs``: camera -> (u, v, weight, normalised xy)."""
        used = sorted(obs)
        while True:
            X = self.dlt([(c, obs[c][3], obs[c][2]) for c in used]) if len(used) >= 2 else None
            if X is None:
                return None, used, {}
            err = {c: self.error(X, c, obs[c][0], obs[c][1]) for c in used}
            if max(err.values()) <= self.max_error_px or len(used) <= self.min_cameras:
                return X, used, err
            if self.drop == "largest_error":
                worst = max(used, key=lambda c: (err[c], -c))
            else:
                score = [INF] * len(self.P)
                for c in used:
                    rest = [d for d in used if d != c]
                    Xo = self.dlt([(d, obs[d][3], obs[d][2]) for d in rest])
                    if Xo is not None:
                        score[c] = float(np.mean([self.error(Xo, d, obs[d][0], obs[d][1])
                                                  for d in rest]))  # fmt: skip
                worst = int(np.argmin(score))
                if worst not in used:
                    return X, used, err
            used.remove(worst)

    def run(self, frames):
        """``frames[c][t]``: ``(P_t, J, 3)`` detections -> per frame (choice, joints)."""
        C, T = len(frames), len(frames[0])
        out = []
        for t in range(T):  # one frame at a time
            dets = [frames[c][t] for c in range(C)]
            norm = [[[self.undistort(c, u, v) if w > 0 else None for u, v, w in person]
                     for person in dets[c]] for c in range(C)]  # fmt: skip
            seen = [[[bool(w >= self.min_confidence and w > 0) for _, _, w in person]
                     for person in dets[c]] for c in range(C)]  # fmt: skip
            cost, support = {}, {}
            for a in range(C):
                for b in range(a + 1, C):
                    for p, pa in enumerate(dets[a]):
                        for q, qb in enumerate(dets[b]):
                            errs, n_ok = [], 0
                            for j in range(len(pa)):
                                if not (seen[a][p][j] and seen[b][q][j]):
                                    continue
                                X = self.dlt([(a, norm[a][p][j], pa[j, 2]),
                                              (b, norm[b][q][j], qb[j, 2])])  # fmt: skip
                                if X is None:
                                    continue
                                ea = self.error(X, a, pa[j, 0], pa[j, 1])
                                eb = self.error(X, b, qb[j, 0], qb[j, 1])
                                errs.append((ea + eb) / 2)
                                n_ok += max(ea, eb) <= self.max_error_px
                            support[a, p, b, q] = support[b, q, a, p] = n_ok
                            if len(errs) >= self.min_common_joints:
                                cost[a, p, b, q] = cost[b, q, a, p] = float(np.mean(errs))
            best, best_score = None, -INF
            for a in range(C):
                for p in range(len(dets[a])):
                    if sum(seen[a][p]) < self.min_common_joints:
                        continue
                    choice, score, costs = [], sum(seen[a][p]), []
                    for c in range(C):
                        if c == a:
                            choice.append(p)
                            continue
                        cs = [cost.get((a, p, c, q), INF) for q in range(len(dets[c]))]
                        q = int(np.argmin(cs)) if cs else -1
                        if cs and cs[q] < self.association_px:
                            choice.append(q)
                            score += support[a, p, c, q]
                            costs.append(cs[q])
                        else:
                            choice.append(-1)
                    e = float(np.mean(costs)) if costs else 0.0
                    score = score - e / (1 + e)
                    if score > best_score:
                        best, best_score = choice, score
            if best is None:
                out.append(None)
                continue
            joints = []  # per joint the valid point, or None
            for j in range(frames_joints(frames)):
                obs = {c: (*dets[c][q][j], norm[c][q][j])
                       for c, q in enumerate(best) if q >= 0 and seen[c][q][j]}  # fmt: skip
                X, used, err = self.point(obs)
                ok = X is not None and len(used) >= self.min_cameras
                joints.append(X if ok and max(err.values()) <= self.max_error_px else None)
            out.append((best, joints))
        return out


def frames_joints(frames) -> int:
    """The keypoint count of the first detection anywhere."""
    return next(f.shape[1] for frs in frames for f in frs if len(f))


# ----------------------------------------------------------------------------- inputs
def load_trial():
    folders = bundled_tracks()
    frames = [read_openpose_frames(d)[0] for d in folders]
    cal = load_calibration(folders[0].parent / "Calib.qca.txt")
    T, J = len(frames[0]), frames_joints(frames)
    kp = []
    for frs in frames:  # one padded (T, P_c, J, 3) tensor per camera
        x = torch.zeros(T, max(len(f) for f in frs), J, 3, dtype=torch.float64)
        for t, f in enumerate(frs):
            x[t, : len(f)] = torch.from_numpy(f)
        kp.append(x)
    return frames, kp, cal


def _eigh_solver(n: list[list[torch.Tensor]]) -> list[torch.Tensor]:
    """``torch.linalg.eigh`` in place of the closed-form 4 x 4 solver (same entry layout)."""
    N = torch.stack([torch.stack(row, -1) for row in n], -2)  # (B, 4, 4)
    return list(torch.linalg.eigh(N)[1][..., 0].unbind(-1))


def main() -> None:
    p = base_parser(__doc__.splitlines()[0])
    p.set_defaults(repeats=5)
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--rounds", type=int, default=3,
                   help="rounds of one baseline run and --repeats runs per contender")  # fmt: skip
    p.add_argument("--drop", default="leave_one_out", choices=DROP_RULES)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device or "cpu")
    frames, kp, cal = load_trial()
    C, (T, _, J, _) = len(kp), kp[0].shape
    P = [x.shape[1] for x in kp]
    print(f"trial: {C} cameras, {T} frames, {P} detection slots, {J} joints; drop={args.drop}")

    naive = NaiveNumpy(cal.K.numpy(), cal.dist.numpy(), cal.R.numpy(), cal.t.numpy(),
                       drop=args.drop)  # fmt: skip
    contenders = {}
    for name, dtype, solver in (
        ("tensorpose float64", torch.float64, None),
        ("tensorpose float32", torch.float32, None),
        ("tensorpose float64 + eigh", torch.float64, _eigh_solver),
    ):
        c = cal.to(device=device, dtype=dtype)
        x = [k.to(device, dtype) for k in kp]

        def run(x=x, c=c, solver=solver):
            patch = mock.patch.object(dlt, "_eigvec_soa", solver) if solver else None
            with patch or contextlib.nullcontext():
                return triangulate_people(x, c.K, c.dist, c.R, c.t, drop=args.drop)

        contenders[name] = run
        for _ in range(args.warmup):
            run()

    # Interleaved rounds: the shared CPU's load changes over seconds, so every contender is
    # timed in every round next to the baseline.
    samples = {"naive numpy loop": [], **{name: [] for name in contenders}}
    naive_out = None
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        naive_out = naive.run(frames)
        samples["naive numpy loop"].append(time.perf_counter() - t0)
        for name, run in contenders.items():
            samples[name] += times(run, device, 0, args.repeats)
    rows = [{"case": "trial", "contender": name, "ms": statistics.median(v) * 1e3,
             "runs": len(v)} for name, v in samples.items()]  # fmt: skip

    checks = {}
    for name, run in contenders.items():
        res = run()
        sync(device)
        # Agreement with the baseline: persons chosen and valid points.
        same_person, diff = 0, 0.0
        for t, win in enumerate(naive_out):  # comparison loop over frames
            if win is None:
                same_person += bool((res.person[t] == -1).all())
                continue
            same_person += res.person[t].tolist() == win[0]
            for j, X in enumerate(win[1]):
                if X is not None and bool(res.valid[t, j]):
                    dx = (res.points[t, j].double().cpu() - torch.from_numpy(X)).abs().max()
                    diff = max(diff, float(dx))
        checks[name] = {"frames_same_person": same_person, "max_point_diff_m": diff}
        print(f"{name}: same person in {same_person}/{T} frames, max |dX| = {diff:.2e} m")

    print_table(f"Triangulation of the bundled trial ({device_name(device)}, "
                f"{args.threads} thread(s))", rows, baseline="naive numpy loop")  # fmt: skip
    if not args.no_save:
        write_json("triangulate", device, {
            "threads": args.threads,
            "sizes": {"cameras": C, "frames": T, "slots": P, "joints": J},
            "drop": args.drop, "rounds": args.rounds, "repeats_per_round": args.repeats,
            "rows": rows, "agreement": checks,
            "load_average": os.getloadavg(), "note": "interleaved rounds, medians",
        })  # fmt: skip


if __name__ == "__main__":
    main()
