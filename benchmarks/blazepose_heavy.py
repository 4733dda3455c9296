"""BlazePose heavy against BlazePose full and OpenPose on the balancing trial: 2D per camera, 3D,
left/right swaps, speed.

    tensorpose convert-blazepose mediapipe-pose-0.5.1675469404.tgz   # once: the heavy network
    python benchmarks/blazepose_heavy.py [--rounds 2] [--threads 1]
    # -> benchmarks/results/blazepose_heavy_cpu.json

The reference is Pose2Sim's 3D of the bundled OpenPose (BODY_25B) detections, computed here as
``tensorpose triangulate tensorpose/assets/tracks/openpose_body25b --drop-rule pose2sim``, which
gives Pose2Sim 0.10.49's own TRC to 0.08 mm median (``benchmarks/peers/pose2sim_triangulation.py``,
``benchmarks/results/peers_cpu.json``); ``--reference-npz`` takes another triangulation NPZ.

1. ``tensorpose predict examples/balancing_trial/videos --model blazepose`` and ``--model
   blazepose-heavy`` (video mode, four cameras side by side, one process each, ``--threads``),
   ``--rounds`` times, the two taking turns; the first round's outputs are evaluated.
2. 2D, per camera: the 12 limb joints (shoulders, elbows, wrists, hips, knees, ankles) against
   the reference projected into that camera (its lens distortion included), in pixels, joints
   as named (a left/right swap counts as the error it is); OpenPose: its person nearest to the
   projection in each frame; BlazePose: its one person, and the same after ``triangulate``'s
   left/right repair (``--write-2d``). Median over the joint-frames both have.
3. 3D: ``tensorpose triangulate`` (defaults: ``--left-right fix``) of each model's folders; the
   limb joints' distance to the reference (median, 90th percentile, mm) and the frames swapped
   back per camera.
4. Speed: the landmark network alone (batch 1 and 4, a real crop, the two taking turns, median
   of ``--reps``) and the whole ``predict`` (wall time of the command, median over rounds).
"""

from __future__ import annotations

import argparse
import json
import os
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
OPENPOSE = ROOT / "tensorpose/assets/tracks/openpose_body25b"
RESULTS = ROOT / "benchmarks/results"
MODELS = {"full": "blazepose", "heavy": "blazepose-heavy"}
LIMBS = (
    "l_shoulder",
    "r_shoulder",
    "l_elbow",
    "r_elbow",
    "l_wrist",
    "r_wrist",
    "l_hip",
    "r_hip",
    "l_knee",
    "r_knee",
    "l_ankle",
    "r_ankle",
)


def run_predict(model: str, out: Path, threads: int) -> float:
    """``tensorpose predict VIDEOS --model MODEL`` in a process of its own: wall seconds."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable,
        "-m",
        "tensorpose",
        "predict",
        str(TRIAL / "videos"),
        "--model",
        model,
        "--out",
        str(out),
        "--quiet",
        "--threads",
        str(threads),
        "--overwrite",
    ]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"predict --model {model} failed ({r.returncode}): {r.stderr}")
    return seconds


def triangulate(tracks: Path, out: Path, **kw) -> tuple[dict, np.ndarray]:
    """``triangulate_folder`` of ``tracks`` with the trial's calibration: report, limb points
    ``(T, 12, 3)`` in metres (the calibration's frame; NaN where not valid)."""
    from tensorpose.apps.triangulate import triangulate_folder

    r = triangulate_folder(tracks, TRIAL / "Calib.qca.txt", out, fps=60.0, plot=False, **kw)
    with np.load(r["outputs"]["npz"]) as z:
        names = list(z["names"])
        pts = z["points"][:, [names.index(n) for n in LIMBS]].astype(np.float64)
    return r, pts


def projected(points: np.ndarray) -> dict[str, np.ndarray]:
    """The reference ``(T, 12, 3)`` projected into each camera of the trial: ``(T, 12, 2)``."""
    from tensorpose.io.calibration import load_calibration
    from tensorpose.ops.camera import project_points

    cal = load_calibration(TRIAL / "Calib.qca.txt")
    x = torch.from_numpy(points)
    out = {}
    for c, name in enumerate(cal.names):
        uv = project_points(x, cal.K[c], cal.dist[c], cal.R[c], cal.t[c])
        out[name] = uv.numpy()
    return out


def limb_2d(folder: Path) -> list[np.ndarray]:
    """Per frame the people of an OpenPose folder as ``(P, 12, 3)`` limb joints."""
    from tensorpose.io.tracks import read_detections
    from tensorpose.layouts import coco17, to_coco17

    det = read_detections(folder)
    idx = [list(coco17().names).index(n) for n in LIMBS]
    return [
        to_coco17(np.asarray(f, dtype=float), det.layout)[:, idx]
        if len(f)
        else np.zeros((0, 12, 3))
        for f in det.frames
    ]


def px_to_reference(folder: Path, ref: np.ndarray) -> dict:
    """Median / p90 px of the limb joints (as named) to the projected reference ``(T, 12, 2)``,
    the person nearest to it in each frame."""
    d, frames = [], 0
    for t, people in enumerate(limb_2d(folder)[: len(ref)]):
        r, ok_ref = ref[t], np.isfinite(ref[t]).all(-1)
        if not len(people) or not ok_ref.any():
            continue
        dist = np.linalg.norm(people[..., :2] - r[None], axis=-1)  # (P, 12)
        seen = (people[..., 2] > 0) & ok_ref[None]
        med = [np.median(x[s]) if s.any() else np.inf for x, s in zip(dist, seen, strict=True)]
        best = int(np.argmin(med))
        if np.isfinite(med[best]):
            frames += 1
            d.append(dist[best][seen[best]])
    d = np.concatenate(d) if d else np.zeros(0)
    return {
        "frames": frames,
        "joint_frames": int(d.size),
        "median_px": float(np.median(d)),
        "p90_px": float(np.percentile(d, 90)),
    }


def mm_to_reference(pts: np.ndarray, ref: np.ndarray) -> dict:
    d = np.linalg.norm(pts - ref, axis=-1) * 1000
    d = d[np.isfinite(d)]
    return {
        "joint_frames": int(d.size),
        "median_mm": float(np.median(d)),
        "p90_mm": float(np.percentile(d, 90)),
    }


def landmark_speed(reps: int) -> dict:
    """Median ms of one landmark-network call (batches 1 and 4 of a real crop), full and heavy
    taking turns, on the CPU program each builds for the shape (warmed up first)."""
    import cv2

    from tensorpose.blazepose.networks import load_blazepose_networks

    nets = {v: load_blazepose_networks("cpu", v)[1] for v in MODELS}
    cap = cv2.VideoCapture(str(TRIAL / "videos/cam01.mp4"))
    cap.set(cv2.CAP_PROP_POS_FRAMES, 50)
    ok, bgr = cap.read()
    if not ok:
        raise SystemExit("cannot read frame 50 of cam01.mp4")
    crop = cv2.resize(bgr[250:1330, :, ::-1], (256, 256), interpolation=cv2.INTER_AREA)
    x1 = torch.from_numpy(crop).permute(2, 0, 1)[None].float().div(255)
    out = {}
    for batch in (1, 4):
        x = x1.expand(batch, -1, -1, -1).contiguous(memory_format=torch.channels_last)
        times = {v: [] for v in MODELS}
        with torch.inference_mode():
            for net in nets.values():  # warm-up: the program for this shape
                net(x, outputs=(0, 1, 3))
            for _ in range(reps):
                for v, net in nets.items():  # turns
                    t0 = time.perf_counter()
                    net(x, outputs=(0, 1, 3))
                    times[v].append(time.perf_counter() - t0)
        ms = {v: float(np.median(t)) * 1000 for v, t in times.items()}
        out[f"batch{batch}"] = {
            **{f"{v}_ms": m for v, m in ms.items()},
            "heavy_over_full": ms["heavy"] / ms["full"],
        }
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=2, help="predict runs of each model (turns)")
    p.add_argument("--reps", type=int, default=20, help="landmark-network calls timed")
    p.add_argument(
        "--reference-npz",
        type=Path,
        default=None,
        help="a triangulation NPZ as the reference (default: Pose2Sim's rule)",
    )
    p.add_argument("--out", type=Path, default=RESULTS / "blazepose_heavy_cpu.json")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    from tensorpose.multiview.recording import drop_rule

    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if a.reference_npz is None:
            _, ref = triangulate(OPENPOSE, work / "ref", drop=drop_rule("pose2sim"))
            ref_what = (
                "tensorpose triangulate tensorpose/assets/tracks/openpose_body25b "
                "--drop-rule pose2sim (Pose2Sim 0.10.49's TRC to 0.08 mm median)"
            )
        else:
            with np.load(a.reference_npz) as z:
                names = list(z["names"])
                ref = z["points"][:, [names.index(n) for n in LIMBS]].astype(np.float64)
            ref_what = str(a.reference_npz)
        ref_px = projected(ref)
        seconds = {v: [] for v in MODELS}
        for k in range(a.rounds):
            for v, model in MODELS.items():  # turns
                seconds[v].append(run_predict(model, work / f"{v}{k}", a.threads))
        rows = {}
        op_r, op_pts = triangulate(OPENPOSE, work / "tri_op")
        rows["openpose"] = {
            "px": {
                cam: px_to_reference(OPENPOSE / f"{cam.replace('_', '')}_json", ref_px[cam])
                for cam in ref_px
            },
            "mm": mm_to_reference(op_pts, ref),
            "swaps": op_r["swaps"],
        }
        for v in MODELS:
            tracks = work / f"{v}0" / "openpose"
            r, pts = triangulate(tracks, work / f"tri_{v}", write_2d=True, name="tri")
            repaired = Path(r["outputs"]["npz"]).parent / "tri_2d"
            rows[v] = {
                "px": {
                    cam: px_to_reference(tracks / cam.replace("_", ""), ref_px[cam])
                    for cam in ref_px
                },
                "px_repaired": {
                    cam: px_to_reference(repaired / cam.replace("_", ""), ref_px[cam])
                    for cam in ref_px
                },
                "mm": mm_to_reference(pts, ref),
                "swaps": r["swaps"],
                "valid_fraction": r["valid_fraction"],
                "median_reprojection_px": r["median_reprojection_px"],
            }
    speed = {
        "landmark_network": landmark_speed(a.reps),
        "predict_s": seconds,
        "predict_median_s": {v: float(np.median(s)) for v, s in seconds.items()},
    }
    speed["predict_heavy_over_full"] = (
        speed["predict_median_s"]["heavy"] / speed["predict_median_s"]["full"]
    )
    report = {
        "what": "balancing trial (examples/balancing_trial, 4 cameras x 100 frames): BlazePose "
        "heavy vs full vs OpenPose against Pose2Sim's 3D of the OpenPose detections",
        "reference": ref_what,
        "limb_joints": list(LIMBS),
        "cpu": device_name(torch.device("cpu")),
        "device_name": device_name(torch.device("cpu")),
        "threads": a.threads,
        "torch": torch.__version__,
        "load_average_start": load0,
        "load_average_end": os.getloadavg(),
        "models": rows,
        "speed": speed,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(report, indent=1) + "\n")
    for name, row in rows.items():
        px = " / ".join(f"{row['px'][c]['median_px']:.1f}" for c in ref_px)
        print(
            f"{name:8s} 2D median px {px}; 3D {row['mm']['median_mm']:.0f} / "
            f"{row['mm']['p90_mm']:.0f} mm (median / p90); swaps {row['swaps']}"
        )
    lm = speed["landmark_network"]
    print(
        f"landmark network heavy/full: {lm['batch1']['heavy_over_full']:.2f}x (batch 1), "
        f"{lm['batch4']['heavy_over_full']:.2f}x (batch 4); predict "
        f"{speed['predict_heavy_over_full']:.2f}x; load {load0} -> {os.getloadavg()}"
    )
    print(f"-> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
