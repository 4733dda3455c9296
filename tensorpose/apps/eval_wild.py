"""``tensorpose eval-wild``: the monocular lift of each camera of a calibrated recording
against the multi-view triangulation of the same recording.

The recording is read and triangulated (:mod:`tensorpose.multiview.recording`); for each camera, the
person the triangulation associated in that camera's view (per frame) is lifted as
``tensorpose lift`` does (the image size and ``K`` from the calibration; missing joints
bridged) and compared with the triangulated joints moved into that camera's frame by its
``R``, ``t`` (:func:`tensorpose.metrics.pose3d.compare_with_reference`: the 12 limb joints, mid-hip
root, frames where both are valid and the camera saw the person: frames where it had none of
the person's joints, bridged in time by the lift, are left out). Nothing is written.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from ..errors import InputError
from ..io.tracks import Keypoints2D
from ..lifting.inference import lift_keypoints, load_lifter
from ..metrics.pose3d import compare_with_reference
from ..multiview.people import check_people, triangulate_cameras_people
from ..multiview.recording import read_cameras, summarize, triangulate_cameras
from ..ops.camera import project_points

__all__ = ["camera_lifts", "eval_wild", "summary"]


def _associated_person(frames: list[np.ndarray], chosen: np.ndarray) -> torch.Tensor:
    """``(T, K, 3)``: per frame the detection ``chosen[t]`` of ``frames[t]`` (NaN where -1)."""
    K = next((f.shape[1] for f in frames if len(f)), 0)
    out = torch.full((len(frames), K, 3), float("nan"), dtype=torch.float64)
    for t, (f, p) in enumerate(zip(frames, chosen.tolist(), strict=True)):  # file data per frame
        if 0 <= p < len(f):
            out[t] = torch.from_numpy(np.asarray(f[p], dtype=np.float64))
    return out


def _projected_reference(
    points: torch.Tensor, K: torch.Tensor, dist: torch.Tensor, R: torch.Tensor, t: torch.Tensor
) -> torch.Tensor:
    """``(T, K, 3)`` keypoints: the world ``points (T, K, 3)`` projected to pixels (confidence 1;
    NaN where the point is not valid)."""
    pts = points.double()
    px = project_points(pts, K.double(), dist.double(), R.double(), t.double())
    valid = torch.isfinite(px).all(-1, keepdim=True)
    kp = torch.cat([px, torch.ones_like(px[..., :1])], -1)
    return torch.where(valid, kp, torch.full_like(kp, float("nan")))


def eval_wild(
    tracks_dir: str | os.PathLike,
    calib: str | os.PathLike,
    checkpoint: str | os.PathLike | None = None,
    *,
    flip: bool = False,
    reproject: bool = False,
    reference_2d: bool = False,
    min_confidence: float = 0.3,
    max_reprojection_px: float = 15.0,
    layout: str | None = None,
    device: str | torch.device = "cpu",
    people: int | str | None = None,
) -> dict[str, Any]:
    """Monocular lifting of each camera against the triangulation (``tensorpose eval-wild``).

    ``flip`` and ``reproject`` as in :func:`tensorpose.lifting.inference.lift_keypoints`. With
    ``reference_2d`` each camera lifts the triangulated keypoints projected into it (with its
    lens distortion) instead of its detections: 2D that is noise-free and consistent with the
    reference, so the error left is the lifter's own (its 3D prior, depth), not the detector's.
    ``people`` (``"auto"`` or ``N``, as ``triangulate --people``): every person triangulated
    (:func:`tensorpose.multiview.people.triangulate_cameras_people`), each lifted in each camera
    where it was seen; ``None``: the one person of
    :func:`tensorpose.multiview.recording.triangulate_cameras`.

    Returns:
        ``cameras``: per camera (and person, numbered from 1, with ``people``) ``{camera,
        folder, mpjpe_mm, p_mpjpe_mm, frames, bridged_joints}`` (or ``error`` when that
        camera's person cannot be lifted), ``mean``: the mean over the lifted rows, the model,
        ``flip``, ``reproject``, ``reference_2d``, the triangulation's valid fraction and
        median reprojection error (of the first person with ``people``).

    Raises:
        ValueError: no camera could be lifted (each camera's reason named), and the readers'
            errors.
    """

    people = check_people(people)
    lifter = load_lifter(checkpoint, device)
    cams = read_cameras(tracks_dir, calib, layout)
    if people is None:
        tris = [triangulate_cameras(cams, min_confidence=min_confidence, device=device,
                                    max_reprojection_px=max_reprojection_px)]  # fmt: skip
    else:
        tris = triangulate_cameras_people(cams, None if people == "auto" else people,
                                          min_confidence=min_confidence, device=device,
                                          max_reprojection_px=max_reprojection_px)  # fmt: skip
    rows = []
    for p, tri in enumerate(tris):  # a handful of people
        who = {} if people is None else {"person": p + 1}
        rows += [{**who, **row} for row in _camera_rows(
            tri, cams, lifter, (flip, reproject, reference_2d), min_confidence)]  # fmt: skip
    done = [r for r in rows if "error" not in r and r["frames"] > 0]
    if not done:
        why = "; ".join(f"{r['camera']}: {r.get('error', 'no frame to compare')}" for r in rows)
        raise InputError(f"{tracks_dir}: no camera could be lifted and compared ({why})")
    s = summarize(tris[0])
    return {
        "cameras": rows,
        "mean": {k: float(np.mean([r[k] for r in done])) for k in ("mpjpe_mm", "p_mpjpe_mm")},
        "model": f"{lifter.kind} {lifter.path}", "flip": flip, "reproject": reproject,
        "reference_2d": reference_2d, "people": len(tris) if people is not None else None,
        "triangulated_valid_fraction": s["valid_fraction"],
        "median_reprojection_px": s["median_reprojection_px"], "frames": s["frames"],
    }  # fmt: skip


def camera_lifts(tri, cams, lifter, *, flip: bool = False, reproject: bool = False,
                 reference_2d: bool = False, min_confidence: float = 0.3,
                 fps: float | None = None) -> Iterator[dict[str, Any]]:  # fmt: skip
    """Each camera's monocular lift of one triangulated person, as ``eval-wild`` makes it.

    Per camera (of ``cams``, :func:`tensorpose.multiview.recording.read_cameras`): the detection the
    triangulation ``tri`` associated in its view per frame (with ``reference_2d``: the
    triangulated keypoints projected into it) lifted by
    :func:`tensorpose.lifting.inference.lift_keypoints`
    with ``flip``, ``reproject``, ``fps``. Yields ``{camera, folder}`` plus either ``error``
    (not seen by the camera, or not liftable) or ``lift`` (``lift_keypoints``' dict), ``seen``
    ``(T,)`` (frames where the camera had some of the person's joints: the others were bridged
    in time by the lift, not this camera's estimate) and ``reference`` ``(T, J, 3)`` (the
    triangulated joints, ``tri.names``, in the camera's frame; NaN where not valid).
    """
    points = torch.from_numpy(tri.points).double()  # (T, J, 3) world, NaN where not valid
    cal = cams.calibration
    for c, (cam, folder) in enumerate(zip(cams.names, cams.folders, strict=True)):
        # one camera at a time: each is a separate monocular lift (a handful of cameras)
        out: dict[str, Any] = {"camera": cam, "folder": folder.name}
        if reference_2d:
            kp = _projected_reference(points, cal.K[c], cal.dist[c], cal.R[c], cal.t[c])
        elif (tri.person[:, c] < 0).all():
            yield {**out, "error": "not seen by it"}
            continue
        else:
            kp = _associated_person(cams.detections[c], tri.person[:, c])
        k2d = Keypoints2D(kp, cams.layout, "as triangulated", "openpose")
        size = tuple(int(v) for v in cal.size[c].tolist())
        try:
            r = lift_keypoints(k2d, lifter, size, cal.K[c], flip, min_confidence, cal.dist[c],
                               reproject, fps)  # fmt: skip
        except ValueError as e:
            yield {**out, "error": str(e)}
            continue
        ref = points @ cal.R[c].double().T + cal.t[c].double()
        yield {**out, "lift": r, "seen": ~r["missing"].all(1), "reference": ref}


def _camera_rows(tri, cams, lifter, how: tuple[bool, bool, bool],
                 min_confidence: float) -> list[dict]:  # fmt: skip
    """One person's rows: each camera's lift of the detection the triangulation associated
    in its view, against that person's triangulated joints in the camera's frame, on the
    frames the camera saw."""
    flip, reproject, reference_2d = how
    rows = []
    for v in camera_lifts(tri, cams, lifter, flip=flip, reproject=reproject,
                          reference_2d=reference_2d, min_confidence=min_confidence):  # fmt: skip
        row = {"camera": v["camera"], "folder": v["folder"]}
        if "error" in v:
            rows.append({**row, "error": v["error"]})
            continue
        r = v["lift"]
        joints = torch.where(v["seen"][:, None, None], r["joints"], float("nan"))
        m = compare_with_reference(joints, lifter.skeleton_out.names, v["reference"], tri.names)
        rows.append({**row, **m, "bridged_joints": r["bridged_joints"]})
    return rows


def summary(r: dict[str, Any]) -> list[str]:
    """The lines ``tensorpose eval-wild`` prints."""
    flip = (", test-time flip" if r["flip"] else "") + (", reproject" if r["reproject"] else "")
    flip += ", 2D: the triangulation projected" if r["reference_2d"] else ""
    lines = [
        f"monocular lift vs triangulation, {r['frames']} frames, 12 limb joints, mid-hip "
        f"root ({r['model']}{flip}); triangulation valid "
        f"{r['triangulated_valid_fraction']:.1%}",
        f"  {'camera':<12s} {'MPJPE':>9s} {'P-MPJPE':>9s} {'frames':>7s}",
    ]
    for c in r["cameras"]:
        name = (f"p{c['person']} " if "person" in c else "") + c["camera"]
        if "error" in c:
            lines.append(f"  {name:<12s} not lifted: {c['error']}")
        elif c["frames"] == 0:
            lines.append(f"  {name:<12s} no frame where the lift and the triangulation are valid")
        else:
            lines.append(f"  {name:<12s} {c['mpjpe_mm']:6.1f} mm {c['p_mpjpe_mm']:6.1f} mm "
                         f"{c['frames']:7d}")  # fmt: skip
    m = r["mean"]
    lines.append(f"  {'mean':<12s} {m['mpjpe_mm']:6.1f} mm {m['p_mpjpe_mm']:6.1f} mm")
    return lines
