"""Kinematic-augmentation experiment for the 3D lifter (a measurement script, not the package).

Trains a ``TemporalLifter`` (receptive field 27, 256 channels, kinematic head, the loss of
``LiftingTask``) on CMU 131_01 + 131_02 with :class:`tensorpose.data.synth.SyntheticLiftingBatches`
for a fixed number of steps on ONE CPU thread (1500 batches of 256: 5-10 minutes on a quiet
core; equal steps keep variants comparable on a shared machine), then evaluates it:

- mocap hold-outs like ``tensorpose eval``: 131_03 and the CMU 01_01 jump excerpt, each seen by
  4 virtual cameras (``LiftingSet.from_world``, data seed 0, the 1000 x 1000 / 1145 px camera
  spec), metrics of ``LiftingTask.evaluate``; 2D inputs normalised the way the model was
  trained (``K^-1 [u, v, 1]`` with the virtual camera's K, or screen normalisation);
- the real 4-camera OpenPose BODY_25B trial bundled under tensorpose/assets/tracks: per camera,
  the tracked person's 2D mapped to h36m17 (rule below), 60 fps split into two 30 fps phases,
  gaps interpolated in time, predicted densely; reference 3D by OpenCV triangulation
  (``cv2.triangulatePoints`` on every camera pair, per joint and frame the pair estimate with
  the smallest median reprojection error over the cameras that see it) from the Qualisys
  calibration; P-MPJPE over the 12 limb joints (hips, knees, ankles, shoulders, elbows, wrists)
  on frames where all 12 are triangulated. With ``normalize: intrinsics`` both the calibrated K
  and the default K from the image size (``default_intrinsics``) are reported.

BODY_25B -> h36m17 (this script's rule; the detector-rule joints come from
``H36M17_DETECTOR_RULES``, the same rule the sampler applies to its synthetic keypoints): limbs
one to one; neck = BODY_25B's upper neck; head = mid-ears; then the rules: pelvis = mid-hips,
thorax = mid-shoulders, spine = mean of both, head = the head top ``head + 1.2 (head - neck)``.

    PYTHONPATH=. python scripts/poseaug_experiment.py train --steps 1500 --name full [key=value ...]
    PYTHONPATH=. python scripts/poseaug_experiment.py eval runs/poseaug/full.pt
    PYTHONPATH=. python scripts/poseaug_experiment.py eval runs/demo_kinematic/checkpoint.pt

``key=value`` overrides set :class:`~tensorpose.data.synth.SynthConfig` fields (YAML values).
Results are printed and written as JSON next to the weights.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import cv2
import numpy as np
import torch
import yaml

from tensorpose import metrics
from tensorpose.config import config_for
from tensorpose.data.mocap import CameraSpec, LiftingSet, load_bvh_sequences
from tensorpose.data.synth import SynthConfig, SyntheticLiftingBatches
from tensorpose.io.openpose import LAYOUTS, bundled_tracks
from tensorpose.io.tracks import read_tracks
from tensorpose.lifting.model import TemporalLifter
from tensorpose.ops.camera import normalize_screen
from tensorpose.ops.poseaug_cameras import default_intrinsics, normalize_with_intrinsics
from tensorpose.ops.poseaug_detector import H36M17_DETECTOR_RULES, derive_joints
from tensorpose.tasks.lifting import LiftingTask

ROOT = Path(__file__).resolve().parent.parent
TRACKS = ROOT / "tensorpose" / "assets" / "tracks" / "openpose_body25b"
LIMBS = ["l_hip", "r_hip", "l_knee", "r_knee", "l_ankle", "r_ankle",
         "l_shoulder", "r_shoulder", "l_elbow", "r_elbow", "l_wrist", "r_wrist"]  # fmt: skip
HOLDOUTS = {"131_03": "131_03", "01_01_jump": "01_01_jump_30fps"}


# ---------------------------------------------------------------------- training
def train(cfg: SynthConfig, steps: int, seed: int, out: Path, batch: int = 256) -> Path:
    torch.manual_seed(seed)
    seqs, sk = load_bvh_sequences(["131_01", "131_02"], None, 30.0)
    g = torch.Generator().manual_seed(seed)
    model = TemporalLifter(sk, 27, 256, 0.25, "kinematic").train()
    task = LiftingTask(
        model, config_for("lift")
    )  # MPJPE + bone-length (1.0) + direction (0.1) terms
    sampler = SyntheticLiftingBatches([s.positions for s in seqs], sk, batch, 27, g, cfg)
    lr0 = 1e-3
    opt = torch.optim.Adam(model.parameters(), lr=lr0, amsgrad=True)
    t_start = time.perf_counter()
    t_data, t_step, log = 0.0, 0.0, []
    for step in range(1, steps + 1):
        for group in opt.param_groups:  # lr 1e-3 -> 1e-4 over the run (the demo: x0.12)
            group["lr"] = lr0 * 0.1 ** ((step - 1) / steps)
        t0 = time.perf_counter()
        b = sampler.sample()
        t1 = time.perf_counter()
        res = task({"keypoints": b["keypoints"], "target": b["target"]})
        opt.zero_grad(set_to_none=True)
        res["loss"].backward()
        opt.step()
        t2 = time.perf_counter()
        t_data += t1 - t0
        t_step += t2 - t1
        if step % 100 == 0:
            elapsed = time.perf_counter() - t_start
            row = {"step": step, "s": round(elapsed, 1), "loss": float(res["loss"].detach()),
                   "mpjpe_mm": float(res["mpjpe_mm"])}  # fmt: skip
            log.append(row)
            print(row, flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "model": model.state_dict(),
            "synth": dataclasses.asdict(cfg),
            "steps": steps,
            "samples": steps * batch,
            "minutes": (time.perf_counter() - t_start) / 60,
            "seed": seed,
            "sampler_s": t_data,
            "model_s": t_step,
            "log": log,
        },
        out,
    )
    ratio = t_data / max(t_step, 1e-9)
    minutes = (time.perf_counter() - t_start) / 60
    print(f"{steps} steps ({steps * batch} samples) in {minutes:.1f} min; sampler {t_data:.0f} s, "
          f"model fwd+bwd+step {t_step:.0f} s (sampler/model {ratio:.2f})")  # fmt: skip
    return out


def load(path: Path) -> tuple[TemporalLifter, str]:
    """A model from this script's ``.pt`` or from a tensorpose checkpoint, and its 2D
    normalisation (``"intrinsics"`` or ``"screen"``)."""
    payload = torch.load(path, map_location="cpu", weights_only=False)
    if "synth" in payload:
        from tensorpose.skeleton import get_skeleton

        model = TemporalLifter(get_skeleton("h36m17"), 27, 256, 0.25, "kinematic")
        model.load_state_dict(payload["model"])
        return model.eval(), payload["synth"]["normalize"]
    from tensorpose.inference import load_model

    _, model, cfg, _ = load_model(path, "cpu")
    return model.eval(), cfg.data.normalization


# ---------------------------------------------------------------------- mocap hold-outs
def eval_mocap(model: TemporalLifter, normalize: str) -> dict[str, dict]:
    task = LiftingTask(model, config_for("lift"))
    spec = CameraSpec()
    out = {}
    for key, name in HOLDOUTS.items():
        seqs, sk = load_bvh_sequences([name], None, 30.0)
        data = LiftingSet.from_world(seqs, sk, 4, 0, spec)
        if normalize == "intrinsics":
            data = data.with_intrinsics(spec.K())
        m = task.evaluate(data)
        out[key] = {k: round(v, 2) if isinstance(v, float) else v for k, v in m.items()}
    return out


# ---------------------------------------------------------------------- the real trial
def read_qca(path: Path) -> list[dict[str, np.ndarray]]:
    """Qualisys ``.qca.txt`` -> per camera ``K``, ``R``, ``t`` (OpenCV: ``x_cam = R x + t``,
    metres) and ``size`` (w, h). QTM stores the camera's orientation (``r11..r33``) and position
    (mm) in the world; its camera looks along -z with y up, hence the flip of y and z."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise ValueError(f"{path}: not a readable calibration XML: {e}") from None
    cams = []
    for cam in root.findall("cameras/camera"):
        try:
            tr, it = cam.find("transform").attrib, cam.find("intrinsic").attrib
            fov = cam.find("fov_video").attrib
            Rq = np.array([[float(tr[f"r{i}{j}"]) for j in (1, 2, 3)] for i in (1, 2, 3)])
            C = np.array([float(tr[k]) for k in "xyz"]) / 1000
            fx, fy = float(it["focalLengthU"]) / 64, float(it["focalLengthV"]) / 64
            cx = float(it["centerPointU"]) / 64 - float(fov["left"])
            cy = float(it["centerPointV"]) / 64 - float(fov["top"])
            size = (
                int(fov["right"]) - int(fov["left"]) + 1,
                int(fov["bottom"]) - int(fov["top"]) + 1,
            )
        except (AttributeError, KeyError, ValueError) as e:
            raise ValueError(f"{path}: camera {cam.attrib.get('serial')}: bad field {e}") from None
        flip = np.diag([1.0, -1.0, -1.0])
        R = flip @ Rq  # x_cam = flip Rq (x - C): 1-11 px median reprojection errors
        cams.append({"K": np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1]]), "R": R,
                     "t": -R @ C, "size": size})  # fmt: skip
    return cams


def _reproject(X: np.ndarray, cam: dict) -> np.ndarray:
    xc = X @ cam["R"].T + cam["t"]
    uv = xc @ cam["K"].T
    return uv[..., :2] / uv[..., 2:]


def triangulate(xy: np.ndarray, cams: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """``xy (C, T, K, 2)`` pixels (NaN = missing) -> ``(T, K, 3)`` world points and their
    median reprojection error in pixels: per camera pair ``cv2.triangulatePoints``, keep the
    pair estimate with the smallest median error over the cameras that see the point."""
    C, T, K, _ = xy.shape
    P = [c["K"] @ np.hstack([c["R"], c["t"][:, None]]) for c in cams]
    cands, errs = [], []
    for a, b in itertools.combinations(range(C), 2):  # 6 camera pairs
        Xh = cv2.triangulatePoints(P[a], P[b], np.nan_to_num(xy[a].reshape(-1, 2).T),
                                   np.nan_to_num(xy[b].reshape(-1, 2).T))  # fmt: skip
        X = (Xh[:3] / Xh[3]).T.reshape(T, K, 3)
        X[np.isnan(xy[a]).any(-1) | np.isnan(xy[b]).any(-1)] = np.nan
        e = np.stack(
            [np.linalg.norm(_reproject(X, c) - xy[i], axis=-1) for i, c in enumerate(cams)]
        )
        cands.append(X)
        errs.append(_nanmedian(e))
    cands, errs = np.stack(cands), np.stack(errs)
    errs = np.where(np.isfinite(errs), errs, np.inf)
    best = errs.argmin(0)
    X = np.take_along_axis(cands, best[None, ..., None], 0)[0]
    E = np.take_along_axis(errs, best[None], 0)[0]
    X[~np.isfinite(E)] = np.nan
    return X, E


def _nanmedian(e: np.ndarray) -> np.ndarray:
    out = np.full(e.shape[1:], np.nan)
    ok = np.isfinite(e).any(0)
    out[ok] = np.nanmedian(e[:, ok], axis=0)
    return out


def body25b_to_h36m17(kp: np.ndarray) -> np.ndarray:
    """``(..., 25, D)`` BODY_25B -> ``(..., 17, D)`` h36m17 (rule in the module docstring)."""
    from tensorpose.skeleton import get_skeleton

    sk = get_skeleton("h36m17")
    src = {n: i for i, n in enumerate(LAYOUTS["BODY_25B"])}
    out = np.full((*kp.shape[:-2], 17, kp.shape[-1]), np.nan)
    for j, name in enumerate(sk.names):  # the mapping table, 17 entries
        if name in src:
            out[..., j, :] = kp[..., src[name], :]
    out[..., sk.index("head"), :] = (kp[..., src["l_ear"], :] + kp[..., src["r_ear"], :]) / 2
    derived = derive_joints(torch.from_numpy(np.nan_to_num(out)), sk, H36M17_DETECTOR_RULES)
    out_t = torch.from_numpy(out)
    for name, rule in H36M17_DETECTOR_RULES.items():  # NaN wherever a source is missing
        j = sk.index(name)
        bad = torch.stack([out_t[..., sk.index(s), 0].isnan() for s in rule]).any(0)
        out[..., j, :] = np.where(bad[..., None].numpy(), np.nan, derived[..., j, :].numpy())
    return out


def _interpolate(kp: np.ndarray) -> np.ndarray:
    """Fill NaN gaps of ``(T, J, 2)`` by linear interpolation in time (ends: nearest); joints
    never seen stay NaN."""
    out = kp.copy()
    t = np.arange(len(kp))
    for j in range(kp.shape[1]):  # a script: 17 joints
        ok = ~np.isnan(kp[:, j, 0])
        if ok.any():
            for d in range(kp.shape[2]):
                out[:, j, d] = np.interp(t, t[ok], kp[ok, j, d])
    return out


def load_trial() -> dict:
    cams = read_qca(TRACKS / "Calib.qca.txt")
    xy = []
    for folder in bundled_tracks():  # four cameras
        k = read_tracks(folder).keypoints.numpy()  # (T, P, 25, 3)
        person = np.isfinite(k[..., 0]).sum((0, 2)).argmax()  # the most complete track
        xy.append(k[:, person, :, :2])
    xy = np.stack(xy)  # (C, T, 25, 2)
    X, E = triangulate(xy, cams)
    return {"cams": cams, "xy": xy, "ref25": X, "ref": body25b_to_h36m17(X), "reproj_px": E}


def eval_trial(model: TemporalLifter, normalize: str, trial: dict) -> dict[str, float]:
    from tensorpose.skeleton import get_skeleton

    sk = get_skeleton("h36m17")
    limbs = [sk.index(n) for n in LIMBS]
    ref = torch.from_numpy(trial["ref"])[:, limbs]
    ok = torch.isfinite(ref).flatten(1).all(1)
    variants = ["calibrated_K", "default_K"] if normalize == "intrinsics" else ["screen"]
    model.eval()  # (LiftingTask.evaluate leaves the model in the task's training mode)
    out: dict[str, float] = {}
    for v in variants:
        errs = []
        for c, cam in enumerate(trial["cams"]):  # four cameras
            kp = _interpolate(body25b_to_h36m17(trial["xy"][c]))
            px = torch.from_numpy(kp).float()
            w, h = cam["size"]
            if v == "screen":
                x = normalize_screen(px, w, h)
            else:
                K = (
                    torch.from_numpy(cam["K"]).float()
                    if v == "calibrated_K"
                    else default_intrinsics(w, h)
                )
                x = normalize_with_intrinsics(px, K)
            x = x.nan_to_num(0.0)  # joints never detected: the training fill value
            with torch.no_grad():  # 60 fps -> two 30 fps phases, interleaved back
                pred = torch.empty(len(x), 17, 3)
                for phase in (0, 1):
                    pred[phase::2] = model.predict(x[phase::2][None])[0]
            e = metrics.p_mpjpe(pred[ok][:, limbs].double(), ref[ok].double())
            out[f"{v}/cam{c + 1:02d}"] = round(1000 * float(e), 1)
            errs.append(1000 * float(e))
        out[f"{v}/mean"] = round(sum(errs) / len(errs), 1)
        out[f"{v}/max"] = round(max(errs), 1)
    out["frames"] = int(ok.sum())
    return out


def evaluate(path: Path, trial: dict | None = None) -> dict:
    model, normalize = load(path)
    trial = trial or load_trial()
    res = {"checkpoint": str(path), "normalize": normalize, "mocap": eval_mocap(model, normalize),
           "trial": eval_trial(model, normalize, trial)}  # fmt: skip
    return res


def _summary(res: dict) -> str:
    m = res["mocap"]
    t = res["trial"]
    key = "calibrated_K" if res["normalize"] == "intrinsics" else "screen"
    lines = [
        f"{res['checkpoint']} ({res['normalize']})",
        f"  131_03      MPJPE {m['131_03']['mpjpe_mm']:6.1f}  "
        f"P-MPJPE {m['131_03']['p_mpjpe_mm']:6.1f}",
        f"  01_01 jump  MPJPE {m['01_01_jump']['mpjpe_mm']:6.1f}  "
        f"P-MPJPE {m['01_01_jump']['p_mpjpe_mm']:6.1f}",
        "  trial P-MPJPE (12 limb joints) "
        + ", ".join(f"{k.split('/')[1]} {v}" for k, v in t.items() if k.startswith(key)),
    ]
    if "default_K/mean" in t:
        lines.append(
            f"  trial with default K: mean {t['default_K/mean']}, max {t['default_K/max']}"
        )
    return "\n".join(lines)


def main() -> None:
    torch.set_num_threads(1)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("train")
    p.add_argument("--steps", type=int, default=1500, help="batches of 256 (~5-10 min quiet)")
    p.add_argument("--name", default="full")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(ROOT / "runs" / "poseaug"))
    p.add_argument("overrides", nargs="*", help="SynthConfig key=value")
    p = sub.add_parser("eval")
    p.add_argument("checkpoints", nargs="+")
    p = sub.add_parser("reference", help="triangulation quality of the trial reference")
    args = ap.parse_args()
    if args.cmd == "train":
        d = dataclasses.asdict(SynthConfig())
        for kv in args.overrides:
            k, _, v = kv.partition("=")
            d[k] = yaml.safe_load(v)
        cfg = SynthConfig.from_dict(d)
        path = train(cfg, args.steps, args.seed, Path(args.out) / f"{args.name}.pt")
        res = evaluate(path)
        res["overrides"] = args.overrides
        payload = torch.load(path, weights_only=False)
        res.update({k: payload[k] for k in ("steps", "samples", "minutes", "sampler_s", "model_s")})
        path.with_suffix(".json").write_text(json.dumps(res, indent=1))
        print(_summary(res))
    elif args.cmd == "eval":
        trial = load_trial()
        for c in args.checkpoints:
            res = evaluate(Path(c), trial)
            print(_summary(res))
            print(json.dumps(res, indent=1))
    else:
        trial = load_trial()
        E = np.where(np.isfinite(trial["reproj_px"]), trial["reproj_px"], np.nan)
        med = np.round(np.nanmedian(E, 0), 1)
        print("median reprojection error (px) per keypoint:",
              dict(zip(LAYOUTS["BODY_25B"], med.tolist(), strict=True)))  # fmt: skip
        from tensorpose.skeleton import get_skeleton

        sk = get_skeleton("h36m17")
        limbs = trial["ref"][:, [sk.index(n) for n in LIMBS]]
        print("frames with all 12 limb joints:", int(np.isfinite(limbs).all((1, 2)).sum()))


if __name__ == "__main__":
    main()
