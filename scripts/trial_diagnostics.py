"""What the monocular lift's error on a calibrated recording is made of: per camera the
P-MPJPE as ``tensorpose eval-wild`` measures it, split into depth (along the camera's optical
axis) and sideways, the per-joint error, the predicted bone lengths against the triangulated
ones, the error left when the prediction is given the triangulation's mean bone lengths (its
bone directions kept), and the triangulation's own bone-length spread (its noise).

    PYTHONPATH=. python scripts/trial_diagnostics.py [--checkpoint C] [--reference-2d] \
        [--reproject] [--tracks DIR --calib FILE] [--json out.json]

Default recording: the bundled balancing trial (tensorpose/assets/tracks/openpose_body25b).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from tensorpose.apps.eval_wild import camera_lifts
from tensorpose.lifting.inference import load_lifter
from tensorpose.metrics.pose3d import LIMB_JOINTS
from tensorpose.multiview.recording import read_cameras, triangulate_cameras
from tensorpose.ops.procrustes import procrustes_align

TRIAL = "tensorpose/assets/tracks/openpose_body25b"
BONES = (("l_hip", "l_knee"), ("l_knee", "l_ankle"), ("r_hip", "r_knee"), ("r_knee", "r_ankle"),
         ("l_shoulder", "l_elbow"), ("l_elbow", "l_wrist"), ("r_shoulder", "r_elbow"),
         ("r_elbow", "r_wrist"))  # fmt: skip
WIDTHS = (("l_hip", "r_hip"), ("l_shoulder", "r_shoulder"))
J = LIMB_JOINTS.index


def _length(x: torch.Tensor, a: str, b: str) -> torch.Tensor:
    """``(T,)`` distance between joints ``a`` and ``b`` of ``x (T, 12, 3)``."""
    return (x[:, J(b)] - x[:, J(a)]).norm(dim=-1)


def with_lengths(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """``p (T, 12, 3)`` rebuilt with the mean bone lengths of ``q`` (scaled to ``p``'s size):
    hip and shoulder widths about their midpoints, then each limb bone outwards along ``p``'s
    own direction."""
    s = p.norm(dim=-1).mean() / q.norm(dim=-1).mean()
    o = p.clone()
    for a, b in WIDTHS:  # two widths
        mid, v = (p[:, J(a)] + p[:, J(b)]) / 2, p[:, J(a)] - p[:, J(b)]
        half = _length(q, a, b).mean() * s / 2
        o[:, J(a)] = mid + half * v / v.norm(dim=-1, keepdim=True)
        o[:, J(b)] = mid - half * v / v.norm(dim=-1, keepdim=True)
    for a, b in BONES:  # parents before children
        v = p[:, J(b)] - p[:, J(a)]
        o[:, J(b)] = o[:, J(a)] + _length(q, a, b).mean() * s * v / v.norm(dim=-1, keepdim=True)
    return o


def _aligned_error(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """``(T, 12, 3)`` Procrustes-aligned ``p`` minus ``q`` (metres)."""
    return procrustes_align(p, q) - q


def camera_rows(tracks: str, calib: str, checkpoint: str | None, reference_2d: bool,
                reproject: bool) -> tuple[list[dict], dict]:  # fmt: skip
    """Per camera the error split (mm), and the triangulation's bone-length spread."""
    lifter = load_lifter(checkpoint, "cpu")
    cams = read_cameras(tracks, calib, None)
    tri = triangulate_cameras(cams, min_confidence=0.3, device="cpu", max_reprojection_px=15.0)
    pi = [list(lifter.skeleton_out.names).index(n) for n in LIMB_JOINTS]
    ri = [list(tri.names).index(n) for n in LIMB_JOINTS]
    hips = [J("l_hip"), J("r_hip")]
    rows = []
    for v in camera_lifts(tri, cams, lifter, reproject=reproject, reference_2d=reference_2d):
        if "error" in v:  # four cameras
            raise SystemExit(f"{v['camera']}: {v['error']}")
        p = v["lift"]["joints"][:, pi].double()
        q = v["reference"][:, ri]
        # as eval-wild: frames the camera did not see (bridged in time) are left out
        ok = v["seen"] & torch.isfinite(p).flatten(1).all(1) & torch.isfinite(q).flatten(1).all(1)
        p = p[ok] - p[ok][:, hips].mean(1, keepdim=True)
        q = q[ok] - q[ok][:, hips].mean(1, keepdim=True)
        e = _aligned_error(p, q) * 1000
        s = p.norm(dim=-1).mean() / q.norm(dim=-1).mean()
        ratio = {f"{a}-{b}": float(_length(p, a, b).mean() / s / _length(q, a, b).mean())
                 for a, b in (*WIDTHS, *BONES)}  # fmt: skip
        rows.append({
            "camera": v["camera"], "p_mpjpe_mm": float(e.norm(dim=-1).mean()),
            "depth_rms_mm": float(e[..., 2].pow(2).mean().sqrt()),
            "sideways_rms_mm": float(e[..., :2].pow(2).sum(-1).mean().sqrt()),
            "per_joint_mm": dict(zip(LIMB_JOINTS, e.norm(dim=-1).mean(0).tolist(), strict=True)),
            "length_ratio": ratio,
            "p_mpjpe_reference_lengths_mm": float(
                (_aligned_error(with_lengths(p, q), q) * 1000).norm(dim=-1).mean()),
        })  # fmt: skip
    ref = torch.from_numpy(tri.points)[:, ri]
    spread = {}
    for a, b in BONES:  # eight bones
        L = _length(ref, a, b) * 1000
        L = L[torch.isfinite(L)]
        spread[f"{a}-{b}"] = {"mean_mm": float(L.mean()), "std_mm": float(L.std())}
    return rows, spread


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", default=None, help="lifter (default: bundled)")
    ap.add_argument("--tracks", default=TRIAL)
    ap.add_argument("--calib", default=None, help="default: TRACKS/Calib.qca.txt")
    ap.add_argument("--reference-2d", action="store_true", help="as eval-wild --reference-2d")
    ap.add_argument("--reproject", action="store_true", help="as eval-wild --reproject")
    ap.add_argument("--json", default=None, help="also write the rows as JSON here")
    a = ap.parse_args()
    rows, spread = camera_rows(a.tracks, a.calib or f"{a.tracks}/Calib.qca.txt", a.checkpoint,
                               a.reference_2d, a.reproject)  # fmt: skip
    print("| camera | P-MPJPE | depth rms | sideways rms | with the reference's bone lengths |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['camera']} | {r['p_mpjpe_mm']:.1f} | {r['depth_rms_mm']:.1f} | "
            f"{r['sideways_rms_mm']:.1f} | {r['p_mpjpe_reference_lengths_mm']:.1f} |"
        )
    n = len(rows)
    print("per joint, mean over cameras (mm): " + ", ".join(
        f"{j} {sum(r['per_joint_mm'][j] for r in rows) / n:.0f}" for j in LIMB_JOINTS))  # fmt: skip
    print(
        "predicted / triangulated length, mean over cameras: "
        + ", ".join(
            f"{k} {sum(r['length_ratio'][k] for r in rows) / n:.2f}"
            for k in rows[0]["length_ratio"]
        )
    )
    print("triangulated bone length, mean / std over frames (mm): " + ", ".join(
        f"{k} {v['mean_mm']:.0f} / {v['std_mm']:.1f}" for k, v in spread.items()))  # fmt: skip
    if a.json:
        Path(a.json).write_text(json.dumps({"cameras": rows, "reference_bones": spread}, indent=1))


if __name__ == "__main__":
    main()
