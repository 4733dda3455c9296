"""Folder-level multi-view triangulation: OpenPose JSON folders of several calibrated cameras
-> 3D joints (TRC, NPZ) and a picture of the reprojection errors.

:func:`triangulate_folder` reads one folder of per-frame OpenPose JSON files per camera
(``<tracks_dir>/<camera>*/``), the calibration (Qualisys ``.qca.txt`` or Pose2Sim ``.toml``),
matches folders to calibrated cameras by name, and triangulates every frame and joint at once
with :func:`tensorpose.ops.triangulate.triangulate_people` (cross-view association of the
person seen by the most cameras, weighted DLT, camera dropping). Everything is validated
before anything is written.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import numpy as np
import torch

from .io.calibration import load_calibration
from .io.export import write_trc
from .io.openpose import BUNDLED_FPS, LAYOUTS, bundled_tracks, read_openpose_frames
from .ops.association import triangulate_people
from .ops.triangulate import DROP_RULES

__all__ = ["LIMBS", "camera_key", "find_camera_folders", "match_cameras", "triangulate_folder"]

LIMBS = [
    ("l_hip", "l_knee"), ("r_hip", "r_knee"), ("l_knee", "l_ankle"), ("r_knee", "r_ankle"),
    ("l_shoulder", "l_elbow"), ("r_shoulder", "r_elbow"), ("l_elbow", "l_wrist"),
    ("r_elbow", "r_wrist"),
]  # fmt: skip
"""Bones whose length over time the report summarises (when both joints are in the layout)."""


def camera_key(name: str) -> str:
    """Name normalised for matching folders to calibrated cameras: lower case, a ``json``
    suffix dropped, only letters and digits, numbers without leading zeros
    (``cam01_json``, ``cam_01`` and ``Cam1`` all give ``cam1``)."""
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    key = re.sub(r"json$", "", key) or key
    return re.sub(r"\d+", lambda m: str(int(m.group())), key)


def _natural(path: Path) -> tuple:
    return tuple(int(s) if s.isdigit() else s.lower() for s in re.split(r"(\d+)", path.name))


def find_camera_folders(tracks_dir: str | os.PathLike) -> list[Path]:
    """The sub-folders of ``tracks_dir`` holding ``*.json`` files, in natural name order."""
    root = Path(tracks_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"tracks folder not found: {root}")
    folders = [p for p in root.iterdir() if p.is_dir() and any(p.glob("*.json"))]
    if not folders:
        raise ValueError(f"{root}: no camera sub-folder with OpenPose .json files")
    return sorted(folders, key=_natural)


def match_cameras(folders: list[Path], names: list[str], calib_path: Path) -> list[str]:
    """The calibrated camera of each folder, matched by :func:`camera_key`; one error naming
    both sides when they do not match."""
    both = f"cameras {names} in {calib_path}; track folders {[f.name for f in folders]}"
    if len(names) < len(folders):
        raise ValueError(
            f"the calibration has {len(names)} cameras for {len(folders)} track folders: {both}"
        )
    keys: dict[str, list[str]] = {}
    for n in names:  # camera names by key (argument checks, not data)
        keys.setdefault(camera_key(n), []).append(n)
    out, missing = [], []
    for f in folders:
        hits = keys.get(camera_key(f.name), [])
        if len(hits) > 1:
            raise ValueError(f"track folder {f.name!r} matches several cameras {hits}: {both}")
        if not hits:
            missing.append(f.name)
        else:
            out.append(hits[0])
    if missing:
        raise ValueError(f"camera names do not match track folders {missing}: {both}")
    return out


def _outputs(out_dir: Path, name: str, plot: bool) -> dict[str, Path]:
    out = {"trc": out_dir / f"{name}_3d.trc", "npz": out_dir / f"{name}_3d.npz"}
    if plot:
        out["png"] = out_dir / f"{name}_3d_errors.png"
    return out


def _plot_errors(path: Path, mean_error: np.ndarray, valid: np.ndarray, names: list[str],
                 max_px: float, title: str) -> None:  # fmt: skip
    """Per-joint reprojection errors: median and 90th percentile over the valid frames, the
    valid fraction, and the error of every frame and joint."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    J = mean_error.shape[1]
    err = np.where(valid, mean_error, np.nan)
    with np.errstate(all="ignore"):
        med = np.array([np.nanmedian(err[:, j]) if valid[:, j].any() else np.nan
                        for j in range(J)])  # fmt: skip
        p90 = np.array([np.nanpercentile(err[:, j], 90) if valid[:, j].any() else np.nan
                        for j in range(J)])  # fmt: skip
    fig = Figure(figsize=(12, 8), layout="constrained")
    FigureCanvasAgg(fig)
    ax, ax2 = fig.subplots(2, 1, height_ratios=[1, 1.2])
    x = np.arange(J)
    ax.bar(x, p90, color="#f5c28b", label="90th percentile")
    ax.bar(x, med, color="#d9822b", label="median")
    ax.axhline(max_px, color="k", lw=0.8, ls="--", label=f"threshold {max_px:g} px")
    ax.set_xticks(x, names, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("mean reprojection error (px)")
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize=8)
    twin = ax.twinx()
    twin.plot(x, valid.mean(0) * 100, "o", color="#3c78d8", ms=4)
    twin.set_ylabel("valid frames (%)", color="#3c78d8")
    twin.set_ylim(0, 115)
    im = ax2.imshow(err.T, aspect="auto", interpolation="nearest", cmap="viridis",
                    vmin=0, vmax=max_px)  # fmt: skip
    ax2.set_yticks(x, names, fontsize=7)
    ax2.set_xlabel("frame")
    fig.colorbar(im, ax=ax2, label="mean reprojection error (px); blank: not valid")
    fig.savefig(path, dpi=110)


def triangulate_folder(
    tracks_dir: str | os.PathLike,
    calib_path: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    min_confidence: float = 0.3,
    max_reprojection_px: float = 15.0,
    layout: str | None = None,
    fps: float | None = None,
    association_px: float = 20.0,
    drop: str = "leave_one_out",
    name: str | None = None,
    plot: bool = True,
    overwrite: bool = False,
    device: str | torch.device = "cpu",
) -> dict:
    """Triangulate a multi-camera OpenPose recording and write the 3D joints.

    Writes ``<name>_3d.trc`` (valid joints, metres, the calibration's world frame; the axes
    are stated on the file's first line), ``<name>_3d.npz`` (``points (T, J, 3)``,
    ``errors (T, J, C)`` reprojection error per camera used, ``mean_error (T, J)``,
    ``used (T, J, C)``, ``valid (T, J)``, ``person (T, C)`` detection chosen per camera,
    ``names``, ``cameras``, ``folders``, ``fps``, ``units``) and ``<name>_3d_errors.png``
    (per-joint reprojection errors; needs matplotlib).

    Args:
        tracks_dir: folder with one sub-folder of OpenPose ``*.json`` per camera.
        calib_path: ``.qca.txt`` or ``.toml`` calibration; its cameras are matched to the
            folders by name (``cam01_json`` <-> ``cam_01``), it may hold more cameras.
        out_dir: output folder (created).
        min_confidence: joints below it are not used.
        max_reprojection_px: camera dropping / validity threshold (pixels).
        layout: OpenPose keypoint layout (``BODY_25``, ``BODY_25B``, ``COCO_18``); ``None``
            detects it from the keypoint count (see :func:`read_openpose_frames`).
        fps: frame rate of the recording; ``None`` is only allowed for the bundled trial
            (60 fps).
        association_px: two-view threshold for joining a person across views (pixels).
        drop: ``"leave_one_out"`` or ``"largest_error"`` (see
            :func:`~tensorpose.ops.triangulate.triangulate_points`).
        name: output file stem (default: the name of ``tracks_dir``).
        plot: write the PNG.
        overwrite: replace existing outputs (otherwise they are an error).
        device: where to compute.

    Returns:
        A report: output paths, cameras and folders, frames, joints, fps, valid fraction,
        median and 90th percentile of the mean reprojection error (px), mean cameras used,
        per-joint valid fraction and median error, bone-length mean and std (m) over frames.

    Raises:
        FileNotFoundError, ValueError: missing inputs, folders that do not match the
        calibration, differing frame counts or layouts, bad arguments, existing outputs
        (before anything is written).
    """
    tracks_dir, calib_path, out_dir = Path(tracks_dir), Path(calib_path), Path(out_dir)
    if not 0 <= min_confidence <= 1:
        raise ValueError(f"min_confidence must be in [0, 1], got {min_confidence}")
    if not max_reprojection_px > 0:
        raise ValueError(f"max_reprojection_px must be positive, got {max_reprojection_px}")
    if drop not in DROP_RULES:
        raise ValueError(f"drop must be one of {DROP_RULES}, got {drop!r}")
    if layout is not None and layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {sorted(LAYOUTS)}, got {layout!r}")
    folders = find_camera_folders(tracks_dir)
    if fps is None:
        bundled = [p.resolve() for p in bundled_tracks()]
        if [f.resolve() for f in folders] != bundled:
            raise ValueError("fps is needed for the TRC time column: pass fps=<frames/s>")
        fps = BUNDLED_FPS
    if not (isinstance(fps, int | float) and math.isfinite(fps) and fps > 0):
        raise ValueError(f"fps must be a positive number, got {fps!r}")
    calib = load_calibration(calib_path)
    cams = match_cameras(folders, calib.names, calib_path)
    calib = calib.select(cams)
    name = name or tracks_dir.resolve().name
    outputs = _outputs(out_dir, name, plot)
    existing = [str(p) for p in outputs.values() if p.exists()]
    if existing and not overwrite:
        raise FileExistsError(f"outputs exist (pass overwrite=True to replace): {existing}")
    if plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ImportError(
                "the reprojection picture needs matplotlib: pip install 'tensorpose[viz]', "
                "or pass plot=False"
            ) from None

    per_cam, layouts = [], []
    for folder in folders:  # read every camera before computing anything
        frames, _, lay = read_openpose_frames(folder, layout)
        per_cam.append(frames)
        layouts.append(lay)
    counts = {f.name: len(fr) for f, fr in zip(folders, per_cam, strict=True)}
    if len(set(counts.values())) != 1:
        raise ValueError(f"the camera folders have different frame counts {counts}; "
                         "trim them to the same frames")  # fmt: skip
    if len(set(layouts)) != 1:
        found = dict(zip([f.name for f in folders], layouts, strict=True))
        raise ValueError(f"the camera folders have different layouts {found}; pass layout=")
    names = LAYOUTS[layouts[0]]
    T, J = len(per_cam[0]), len(names)
    keypoints = []
    for frames in per_cam:  # pack each camera's frames into (T, P_c, J, 3)
        k = torch.zeros(T, max(len(f) for f in frames), J, 3, dtype=torch.float64)
        for t, f in enumerate(frames):  # one frame's people at a time (file data)
            k[t, : len(f)] = torch.from_numpy(f)
        keypoints.append(k.to(device))
    cal = calib.to(device=device, dtype=torch.float64)
    res = triangulate_people(
        keypoints, cal.K, cal.dist, cal.R, cal.t,
        min_confidence=min_confidence, max_error_px=max_reprojection_px,
        association_px=association_px, drop=drop,
    )  # fmt: skip
    res = {k: v.cpu() for k, v in vars(res).items()}
    points = torch.where(res["valid"].unsqueeze(-1), res["points"], float("nan")).numpy()
    valid = res["valid"].numpy()
    mean_error = res["mean_error"].numpy()

    out_dir.mkdir(parents=True, exist_ok=True)
    axes = (f"X/Y/Z: world frame of {calib_path.name} (metres), cameras {cams}, "
            f"tensorpose multi-view triangulation")  # fmt: skip
    write_trc(outputs["trc"], points, names, fps, units="m", axes=axes)
    np.savez_compressed(
        outputs["npz"], points=points, errors=res["errors"].numpy(), mean_error=mean_error,
        used=res["used"].numpy(), valid=valid, person=res["person"].numpy(),
        names=np.array(names), cameras=np.array(cams),
        folders=np.array([f.name for f in folders]), fps=np.float64(fps), units="m",
    )  # fmt: skip
    if plot:
        title = (f"{name}: reprojection error per joint ({len(cams)} cameras, {T} frames, "
                 f"valid {valid.mean():.1%})")  # fmt: skip
        _plot_errors(outputs["png"], mean_error, valid, names, max_reprojection_px, title)

    e = mean_error[valid]
    bones = {}
    for a, b in LIMBS:  # a handful of named bones
        if a in names and b in names:
            ia, ib = names.index(a), names.index(b)
            both = valid[:, ia] & valid[:, ib]
            length = np.linalg.norm(points[both, ia] - points[both, ib], axis=-1)
            bones[f"{a}-{b}"] = {"mean_m": float(length.mean()) if both.any() else None,
                                 "std_m": float(length.std()) if both.any() else None,
                                 "frames": int(both.sum())}  # fmt: skip
    with np.errstate(all="ignore"):
        per_joint = {n: {"valid": float(valid[:, j].mean()),
                         "median_px": float(np.median(mean_error[valid[:, j], j]))
                         if valid[:, j].any() else None}
                     for j, n in enumerate(names)}  # fmt: skip
    return {
        "outputs": {k: str(v) for k, v in outputs.items()},
        "cameras": cams,
        "folders": [f.name for f in folders],
        "calibration": str(calib_path),
        "layout": layouts[0],
        "frames": T,
        "joints": J,
        "fps": float(fps),
        "frames_with_person": int((res["person"] >= 0).any(-1).sum()),
        "valid_fraction": float(valid.mean()),
        "median_reprojection_px": float(np.median(e)) if e.size else None,
        "p90_reprojection_px": float(np.percentile(e, 90)) if e.size else None,
        "mean_cameras_used": float(res["used"].numpy()[valid].sum(-1).mean()) if e.size else None,
        "per_joint": per_joint,
        "bones": bones,
    }
