"""Root trajectory of ``tensorpose lift`` against a reference (a measurement script).

For each monocular lift (the bundled lifter, or ``--checkpoint``), the root's trajectory in the
camera frame (:func:`tensorpose.lifting.inference.lift_keypoints`: the per-frame least-squares fit
of
the predicted joints onto the rays of their 2D keypoints, ``root_raw``) is smoothed by each
candidate low-pass and compared with the reference root in the same camera's frame by
:func:`tensorpose.metrics.pose3d.trajectory_errors`: the mean position error after one global scale,
and the error in distance travelled (both trajectories low-passed at 6 Hz before their path
lengths are summed, so that neither's frame-to-frame noise counts as travel).

Two sets:

- ``mocap`` (where the smoothing is chosen): the mocap hold-outs of ``tensorpose eval``,
  CMU 131_03 (hopping) and the 01_01 jump excerpt, at 30 fps, each seen by 4 virtual cameras
  drawn as :meth:`tensorpose.data.mocap.LiftingSet.from_world` draws them (data seed 0, the
  1000 x 1000 / 1145 px camera); the 2D is the exact projection plus Gaussian noise of
  ``--noise-px`` (seeded); the reference is the true pelvis in the camera frame.
- ``trial`` and ``two people`` (reported, never tuned on): the bundled balancing trial
  (``tensorpose/assets/tracks/openpose_body25b``, 4 cameras, 100 frames at 60 fps); each camera
  lifts the person the triangulation associated in its view (as ``tensorpose eval-wild``); the
  reference is the triangulated mid-hip (``tensorpose triangulate``'s points) moved into that
  camera's frame with the calibration's ``R``, ``t`` (frames where the camera had none of
  the person's keypoints are left out, as in ``eval-wild``); with ``--two-people DIR`` also the
  two-person recording (``examples/two_people``, 100 frames at 60 fps) from
  BlazePose's 2D (``tensorpose predict VIDEOS --model blazepose --max-people 2 --out tp``,
  then ``--two-people tp/openpose``), every person against its own triangulation.

    PYTHONPATH=. python scripts/trajectory_eval.py [--checkpoint CK] [--two-people DIR] \
        [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import zlib

import numpy as np
import torch

from tensorpose.apps.eval_wild import camera_lifts
from tensorpose.data.mocap import CameraSpec, load_bvh_sequences
from tensorpose.io.tracks import Keypoints2D
from tensorpose.lifting.inference import lift_keypoints, load_lifter
from tensorpose.metrics.pose3d import trajectory_errors
from tensorpose.multiview.people import triangulate_cameras_people
from tensorpose.multiview.recording import read_cameras, triangulate_cameras
from tensorpose.ops.camera import project, virtual_cameras, world_to_camera
from tensorpose.ops.trajectory import lowpass_trajectory

TRIAL = "tensorpose/assets/tracks/openpose_body25b"
HOLDOUTS = ["131_03", "01_01_jump_30fps"]
TWO_PEOPLE_CALIB = "examples/two_people/Calib.qca.txt"
CUTOFFS = [(None, None), (2.0, None), (6.0, None), (6.0, 2.0), (6.0, 1.0), (6.0, 0.5),
           (6.0, 0.25)]  # fmt: skip
"""(cutoff, depth cutoff) Hz of each candidate; (None, None): the raw per-frame fit."""


def candidates(root_raw: torch.Tensor, fps: float) -> dict[str, torch.Tensor]:
    """Every candidate trajectory from the raw per-frame fit ``(T, 3)``."""
    out = {}
    for c, d in CUTOFFS:
        if c is None:
            out["raw fit"] = root_raw
        elif d is None:
            out[f"xyz {c:g} Hz"] = lowpass_trajectory(root_raw, fps, c)
        else:
            out[f"ray {c:g}, z {d:g} Hz"] = lowpass_trajectory(root_raw, fps, c, d)
    return out


def mocap_rows(lifter, noise_px: float, cameras: int = 4) -> list[dict]:
    """The hold-outs seen by virtual cameras (as ``LiftingSet.from_world`` draws them)."""
    seqs, skel = load_bvh_sequences(HOLDOUTS)
    spec = CameraSpec()
    K = spec.K(torch.float64)
    rows = []
    for seq in seqs:  # two files, a few cameras each
        pos = seq.positions.double()
        root = pos[:, skel.root]
        centre = (root.min(0).values + root.max(0).values) / 2
        centre[1] = root[:, 1].mean()
        radius = float(torch.linalg.vector_norm((root - centre)[:, [0, 2]], dim=-1).max())
        for c in range(cameras):
            g = torch.Generator().manual_seed(zlib.crc32(f"0:{seq.name}:{c}".encode()))
            cam = virtual_cameras(1, g, centre,
                                  elevation=tuple(math.radians(e) for e in spec.elevation_deg),
                                  distance=(3.0 + radius, 6.0 + radius))  # fmt: skip
            pc = world_to_camera(pos, cam["R"][0], cam["t"][0])
            px = project(pc, K)
            gen = torch.Generator().manual_seed(1000 + c)
            px = px + noise_px * torch.randn(px.shape, generator=gen, dtype=torch.float64)
            kp = torch.cat([px, torch.ones_like(px[..., :1])], -1)
            r = lift_keypoints(Keypoints2D(kp, "H36M_17", "mocap", "npz"), lifter,
                               (spec.width, spec.height), K, fps=seq.fps)  # fmt: skip
            ref = pc[:, skel.root]
            for name, traj in candidates(r["root_raw"], seq.fps).items():
                rows.append({"set": "mocap", "clip": f"{seq.name} cam{c}", "method": name,
                             **trajectory_errors(traj, ref, seq.fps)})  # fmt: skip
    return rows


def recording_rows(lifter, set_name: str, tracks: str, calib: str, people: bool = False,
                   fps: float = 60.0) -> list[dict]:  # fmt: skip
    """A calibrated recording, each camera's lift against the triangulation: one person
    (:func:`~tensorpose.multiview.recording.triangulate_cameras`), or with ``people`` every person
    of
    :func:`~tensorpose.multiview.people.triangulate_cameras_people` (as ``eval-wild --people
    auto``), each lifted in every camera whose view it was associated in."""
    cams = read_cameras(tracks, calib)
    tris = triangulate_cameras_people(cams) if people else [triangulate_cameras(cams)]
    rows = []
    for p, tri in enumerate(tris):  # a person or two
        hips = [tri.names.index("l_hip"), tri.names.index("r_hip")]
        for v in camera_lifts(tri, cams, lifter, fps=fps):  # one lift per camera (four)
            clip = f"p{p + 1} {v['camera']}" if people else v["camera"]
            if v.get("error") == "not seen by it":
                continue
            try:
                if "error" in v:
                    raise ValueError(v["error"])
                ref = v["reference"][:, hips].mean(1)
                seen = v["seen"][:, None]  # frames bridged in time: not compared
                for name, traj in candidates(v["lift"]["root_raw"], fps).items():
                    traj = torch.where(seen, traj, float("nan"))
                    rows.append({"set": set_name, "clip": clip, "method": name,
                                 **trajectory_errors(traj, ref, fps)})  # fmt: skip
            except ValueError as e:  # not liftable, or too few frames to compare
                print(f"{set_name} {clip}: not measured ({e})")
    return rows


def table(rows: list[dict], set_name: str) -> None:
    """Per clip and method: position error, scale, distance travelled; then the means."""
    sel = [r for r in rows if r["set"] == set_name]
    methods = list(dict.fromkeys(r["method"] for r in sel))
    print(f"\n== {set_name}: position error mm after one scale | distance error % "
          "(travelled, both at 6 Hz)")  # fmt: skip
    print(f"{'clip':<28s}" + "".join(f"{m:>20s}" for m in methods))
    for clip in dict.fromkeys(r["clip"] for r in sel):
        cells = {r["method"]: r for r in sel if r["clip"] == clip}
        print(f"{clip:<28s}" + "".join(
            f"{cells[m]['position_mm']:7.0f} | {cells[m]['distance_error_pct']:+6.1f}%   "
            for m in methods))  # fmt: skip
    print(f"{'mean (|distance error|)':<28s}" + "".join(
        f"{np.mean([r['position_mm'] for r in sel if r['method'] == m]):7.1f} | "
        f"{np.mean([abs(r['distance_error_pct']) for r in sel if r['method'] == m]):6.1f}%   "
        for m in methods))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", default=None)
    ap.add_argument("--noise-px", type=float, default=2.0)
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--two-people",
        default=None,
        metavar="DIR",
        help="also the two-person recording: the OpenPose folders that tensorpose "
        "predict wrote for its videos (e.g. tp/openpose)",
    )
    ap.add_argument("--two-people-calib", default=TWO_PEOPLE_CALIB)
    a = ap.parse_args()
    torch.set_num_threads(1)
    lifter = load_lifter(a.checkpoint)
    rows = mocap_rows(lifter, a.noise_px)
    rows += recording_rows(lifter, "trial", TRIAL, f"{TRIAL}/Calib.qca.txt")
    sets = ["mocap", "trial"]
    if a.two_people:
        rows += recording_rows(lifter, "two people", a.two_people, a.two_people_calib, True)
        sets.append("two people")
    for name in sets:
        table(rows, name)
    for name in sets[1:]:
        print(f"\n{name}: scale, static-root error mm, distance travelled by the reference m")
        for r in (r for r in rows if r["set"] == name and r["method"] == "raw fit"):
            print(f"  {r['clip']:<10s} scale {r['scale']:.3f}  static {r['static_mm']:.0f} mm  "
                  f"reference {r['distance_ref_m']:.3f} m over {r['frames']} frames")  # fmt: skip
    if a.json:
        with open(a.json, "w") as f:
            who = a.checkpoint or "bundled lifter_wild.pt"
            json.dump({"checkpoint": who, "noise_px": a.noise_px, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
