"""The bundled balancing trial through tensorpose's own commands with BlazePose, next to the
bundled OpenPose detections.

1. ``tensorpose predict VIDEOS --model blazepose`` on the folder of the four camera videos
   (video mode, the cameras side by side; one thread by default), timed: one OpenPose folder
   per camera, ``openpose/cam01/`` ...;
2. ``tensorpose triangulate`` (:func:`tensorpose.apps.triangulate.triangulate_folder`) of those
   four folders and, the same way, of the bundled OpenPose folders, with ``Calib.qca.txt``:
   valid joints share, median reprojection error, limb-length standard deviation;
3. per camera, the median and 90th percentile pixel distance of BlazePose's limb joints
   (shoulders, elbows, wrists, hips, knees, ankles, converted to COCO names) to the bundled
   OpenPose (BODY_25B) detections, in the frames and joints both found (OpenPose confidence
   above 0), against the OpenPose person nearest to BlazePose's; ``*_as_named`` compares joints
   by name, the plain figures mirror BlazePose's left and right in the frames where that is
   nearer (BlazePose swaps them when it sees the person from behind), and count those frames.

::

    python scripts/blazepose_trial.py      # -> benchmarks/results/blazepose_trial_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.common import device_name  # noqa: E402

TRIAL = ROOT / "examples/balancing_trial"
RESULTS = ROOT / "benchmarks/results"
LIMB_JOINTS = list(range(5, 17))  # COCO-17: shoulders .. ankles


def run_predict(videos: Path, out: Path, threads: int, device: str) -> dict:
    """``tensorpose predict VIDEOS --model blazepose`` in a process of its own, timed."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "tensorpose.cli", "predict", str(videos), "--model",
           "blazepose", "--out", str(out), "--quiet", "--device", device]  # fmt: skip
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"predict failed ({r.returncode}): {r.stderr or r.stdout}")
    return {"command": " ".join(cmd[2:]), "seconds": seconds, "printed": r.stdout.splitlines()}


def triangulated(tracks: Path, calib: Path, out: Path, fps: float | None) -> dict:
    from tensorpose.apps.triangulate import triangulate_folder

    r = triangulate_folder(tracks, calib, out, fps=fps, plot=False)
    stds = [b["std_m"] for b in r["bones"].values() if b["std_m"] is not None]
    return {
        "layout": r["layout"],
        "folders": r["folders"],
        "frames": r["frames"],
        "valid_fraction": r["valid_fraction"],
        "median_reprojection_px": r["median_reprojection_px"],
        "p90_reprojection_px": r["p90_reprojection_px"],
        "limb_length_std_m_mean": float(np.mean(stds)) if stds else None,
        "bones": r["bones"],
    }


def limb_distances(blaze_dir: Path, openpose_dir: Path) -> dict:
    """Pixel distances of BlazePose's limb joints to the nearest OpenPose person's, per frame."""
    from tensorpose.io.tracks import read_detections
    from tensorpose.layouts import to_coco17

    bp, op = read_detections(blaze_dir), read_detections(openpose_dir)
    d, named, swapped, frames = [], [], [], 0
    flip = [0, 2, 1, 4, 3, 6, 5, 8, 7, 10, 9, 12, 11, 14, 13, 16, 15]  # COCO-17 left <-> right
    for a, b in zip(bp.frames, op.frames, strict=False):  # per frame: the people found
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        if not len(a) or not len(b):
            continue
        ours = to_coco17(a[:1], bp.layout)[0, LIMB_JOINTS]  # (12, 3): BlazePose's person 0
        theirs = to_coco17(b, op.layout)[:, LIMB_JOINTS]  # (P, 12, 3)
        seen = theirs[..., 2] > 0
        dist = np.linalg.norm(theirs[..., :2] - ours[None, :, :2], axis=-1)
        med = [np.median(x[s]) if s.any() else np.inf for x, s in zip(dist, seen, strict=True)]
        best = int(np.argmin(med))
        if not np.isfinite(med[best]):
            continue
        frames += 1
        named.append(dist[best][seen[best]])
        mirrored = to_coco17(a[:1], bp.layout)[0, flip][LIMB_JOINTS]
        other = np.linalg.norm(theirs[best, :, :2] - mirrored[:, :2], axis=-1)[seen[best]]
        swapped.append(np.median(other) < np.median(named[-1]))  # left and right swapped
        d.append(other if swapped[-1] else named[-1])
    d = np.concatenate(d) if d else np.zeros(0)
    named = np.concatenate(named) if named else np.zeros(0)
    return {
        "layouts": [bp.layout, op.layout],
        "frames_compared": frames,
        "frames": [len(bp.frames), len(op.frames)],
        "joints_compared": int(d.size),
        "frames_left_right_swapped": int(np.sum(swapped)),
        "median_px": float(np.median(d)) if d.size else None,
        "p90_px": float(np.percentile(d, 90)) if d.size else None,
        "median_px_as_named": float(np.median(named)) if named.size else None,
        "p90_px_as_named": float(np.percentile(named, 90)) if named.size else None,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trial", type=Path, default=TRIAL)
    p.add_argument("--threads", type=int, default=1, help="threads of the predict process")
    p.add_argument("--device", default="cpu", help="cpu or cuda (the predict process's)")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="default: benchmarks/results/blazepose_trial_<device>.json",
    )
    a = p.parse_args(argv)
    a.out = a.out or RESULTS / f"blazepose_trial_{a.device}.json"
    from tensorpose.io.video import video_info

    videos, calib = a.trial / "videos", a.trial / "Calib.qca.txt"
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        pred = run_predict(videos, work / "predict", a.threads, a.device)
        fps = video_info(sorted(videos.glob("*.mp4"))[0])[1]
        tri_bp = triangulated(work / "predict/openpose", calib, work / "tri_bp", fps)
        tri_op = triangulated(a.trial, calib, work / "tri_op", fps)
        per_camera = {
            f.name: limb_distances(work / "predict/openpose" / f.name, a.trial / f"{f.name}_json")
            for f in sorted((work / "predict/openpose").iterdir())
        }
    report = {
        "what": "bundled balancing trial: predict --model blazepose (video mode, four cameras "
        "in one batch) -> triangulate, next to the bundled OpenPose BODY_25B folders",
        "machine": platform.processor() or platform.machine(),
        "device": a.device,
        "device_name": device_name(torch.device(a.device)),
        "threads": a.threads,
        "load_average_start": load0,
        "load_average": os.getloadavg(),
        "predict": pred,
        "triangulate_blazepose": tri_bp,
        "triangulate_openpose": tri_op,
        "limb_joints_vs_openpose_px": per_camera,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"predict: {pred['seconds']:.1f} s; " + "; ".join(pred["printed"][:2]))
    for name, t in (("BlazePose", tri_bp), ("OpenPose", tri_op)):
        print(f"{name}: valid {t['valid_fraction']:.1%}, median reprojection "
              f"{t['median_reprojection_px']:.2f} px, limb-length std "
              f"{t['limb_length_std_m_mean'] * 1000:.1f} mm (mean over limbs)")  # fmt: skip
    for cam, r in per_camera.items():
        print(f"{cam}: BlazePose vs OpenPose limb joints median {r['median_px']:.1f} px, p90 "
              f"{r['p90_px']:.1f} px ({r['frames_compared']} frames; as named: "
              f"{r['median_px_as_named']:.1f} / {r['p90_px_as_named']:.1f} px, left/right "
              f"swapped in {r['frames_left_right_swapped']} frames)")  # fmt: skip
    print(f"-> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
