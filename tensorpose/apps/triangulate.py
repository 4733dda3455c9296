"""``tensorpose triangulate``: one keypoint folder per calibrated camera -> 3D joints.

Check the inputs (:func:`tensorpose.multiview.read_cameras`), triangulate
(:func:`tensorpose.multiview.triangulate_cameras`), then commit ``<name>_3d.trc`` (valid joints,
metres, the calibration's world frame; the axes on the file's first line), ``<name>_3d.npz``
(``points``, ``errors``, ``mean_error``, ``used``, ``valid``, ``person``, ``names``,
``cameras``, ``folders``, ``fps``, ``units``) and ``<name>_3d_errors.png`` all at once.

With ``people`` (``"auto"`` or a number) every person seen by two cameras or more is
associated across views, triangulated and linked over time
(:func:`tensorpose.multiperson.triangulate_cameras_people`): one ``<name>_p<k>_3d.trc`` and
``<name>_p<k>_3d.npz`` (the same keys) per person, best seen first, and
``<name>_3d_tracks.png``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import torch

from ..charts import reprojection_errors_picture
from ..io.atomic import OutputFolder
from ..io.motion import write_npz, write_trc
from ..io.openpose import BUNDLED_FPS, bundled_tracks
from ..multiperson import MAX_PEOPLE, centres, triangulate_cameras_people
from ..multiview import (
    check_options,
    find_camera_folders,
    read_cameras,
    summarize,
    triangulate_cameras,
)
from ..viz import plot_people_tracks

__all__ = ["check_people", "output_names", "summary", "triangulate_folder"]


def output_names(name: str, people: int | None = None) -> list[str]:
    """The files ``triangulate`` writes for a recording named ``name``: with ``people`` (a
    count), a TRC and an NPZ per person and the picture of the tracks."""
    if people is None:
        return [f"{name}_3d.trc", f"{name}_3d.npz", f"{name}_3d_errors.png"]
    files = [f"{name}_p{k}_3d.{ext}" for k in range(1, people + 1) for ext in ("trc", "npz")]
    return [*files, f"{name}_3d_tracks.png"]


def check_people(people: int | str | None) -> int | str | None:
    """``None`` (one person), ``"auto"`` or a count 1..MAX_PEOPLE (ints or their text)."""
    if people is None or people == "auto":
        return people
    if isinstance(people, str) and people.strip().isdigit():
        people = int(people)
    if not isinstance(people, int) or isinstance(people, bool) or not 1 <= people <= MAX_PEOPLE:
        raise ValueError(f"--people must be auto or a number in 1..{MAX_PEOPLE}, got {people!r}")
    return people


def _fps(tracks_dir: Path, fps: float | None) -> float:
    """``fps``, or the bundled trial's 60 for the bundled folders."""
    if fps is None:
        bundled = [p.resolve() for p in bundled_tracks()]
        if [f.resolve() for f in find_camera_folders(tracks_dir)] != bundled:
            raise ValueError("--fps is needed for the TRC time column (frames per second)")
        return BUNDLED_FPS
    if not (isinstance(fps, int | float) and math.isfinite(fps) and 0.1 <= fps <= 10_000):
        raise ValueError(f"--fps must be a frame rate in 0.1..10000, got {fps!r}")
    return float(fps)


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
    people: int | str | None = None,
) -> dict:
    """Triangulate a multi-camera recording and write the 3D joints (``tensorpose
    triangulate``).

    Args:
        tracks_dir: folder with one sub-folder of OpenPose ``*.json`` per camera.
        calib_path: ``.qca.txt`` or ``.toml`` calibration; its cameras are matched to the
            folders by name (``cam01_json`` <-> ``cam_01``), it may hold more cameras.
        out_dir: output folder (created).
        min_confidence, max_reprojection_px, association_px, drop: see
            :func:`tensorpose.multiview.triangulate_cameras`.
        layout: keypoint layout; ``None`` detects it.
        fps: frame rate; ``None`` only for the bundled trial. name: output file stem (default:
            the name of ``tracks_dir``).
        plot: write the PNG. overwrite: replace existing outputs (else they are an error).
        people: ``None``: one person; ``"auto"`` or ``N``: see :func:`_people_folder`.

    Returns:
        A report: output paths, cameras and folders, calibration, layout, fps and the figures
        of :func:`tensorpose.multiview.summarize`.
    """
    tracks_dir, calib_path = Path(tracks_dir), Path(calib_path)
    name = name or tracks_dir.resolve().name
    if check_people(people) is not None:
        return _people_folder(tracks_dir, calib_path, out_dir, check_people(people), name, fps,
                              layout, plot, overwrite, device, min_confidence=min_confidence,
                              max_reprojection_px=max_reprojection_px,
                              association_px=association_px, drop=drop)  # fmt: skip
    names = output_names(name)
    outputs = OutputFolder(out_dir, names, inputs=[tracks_dir, calib_path],
                           overwrite=overwrite)  # fmt: skip
    check_options(min_confidence, max_reprojection_px, drop)
    fps = _fps(tracks_dir, fps)
    cams = read_cameras(tracks_dir, calib_path, layout)
    tri = triangulate_cameras(cams, min_confidence=min_confidence, association_px=association_px,
                              max_reprojection_px=max_reprojection_px, drop=drop,
                              device=device)  # fmt: skip
    with outputs:
        axes = (f"X/Y/Z: world frame of {calib_path.name} (metres), cameras {cams.names}, "
                f"tensorpose multi-view triangulation")  # fmt: skip
        write_trc(outputs.path(names[0]), tri.points, tri.names, fps, units="m", axes=axes)
        write_npz(outputs.path(names[1]), {
            "points": tri.points, "errors": tri.errors, "mean_error": tri.mean_error,
            "used": tri.used, "valid": tri.valid, "person": tri.person,
            "names": np.array(tri.names), "cameras": np.array(cams.names),
            "folders": np.array([f.name for f in cams.folders]), "fps": np.float64(fps),
            "units": "m",
        }, compressed=True)  # fmt: skip
        if plot:
            title = (f"{name}: reprojection error per joint ({len(cams.names)} cameras, "
                     f"{cams.frames} frames, valid {tri.valid.mean():.1%})")  # fmt: skip
            reprojection_errors_picture(outputs.path(names[2]), tri.mean_error, tri.valid,
                                        tri.names, max_reprojection_px, title)  # fmt: skip
        written = outputs.commit()
    return {
        "tracks_dir": str(tracks_dir),
        "outputs": {p.suffix[1:]: str(p) for p in written},
        "cameras": cams.names,
        "folders": [f.name for f in cams.folders],
        "calibration": str(calib_path),
        "layout": cams.layout,
        "fps": fps,
        **summarize(tri),
    }


def _write_one(outputs: OutputFolder, trc: str, npz: str, tri, cams, calib_path: Path,
               fps: float, extra: str = "") -> None:  # fmt: skip
    """One person's TRC and NPZ (the single-person files' format)."""
    axes = (f"X/Y/Z: world frame of {calib_path.name} (metres), cameras {cams.names}, "
            f"tensorpose multi-view triangulation{extra}")  # fmt: skip
    write_trc(outputs.path(trc), tri.points, tri.names, fps, units="m", axes=axes)
    write_npz(outputs.path(npz), {
        "points": tri.points, "errors": tri.errors, "mean_error": tri.mean_error,
        "used": tri.used, "valid": tri.valid, "person": tri.person,
        "names": np.array(tri.names), "cameras": np.array(cams.names),
        "folders": np.array([f.name for f in cams.folders]), "fps": np.float64(fps),
        "units": "m",
    }, compressed=True)  # fmt: skip


def _people_folder(tracks_dir: Path, calib_path: Path, out_dir, people: int | str, name: str,
                   fps, layout, plot: bool, overwrite: bool, device,
                   **options) -> dict:  # fmt: skip
    """``triangulate_folder`` with ``people``: ``"auto"`` (every person found in at least a
    tenth of the frames) or a number (that many people, the best seen; fewer found is an error
    naming ``--people``): a TRC and an NPZ per person, the tracks' PNG."""
    count = MAX_PEOPLE if people == "auto" else people
    names = output_names(name, count)
    outputs = OutputFolder(out_dir, names, inputs=[tracks_dir, calib_path],
                           overwrite=overwrite)  # fmt: skip
    check_options(options["min_confidence"], options["max_reprojection_px"], options["drop"])
    fps = _fps(tracks_dir, fps)
    cams = read_cameras(tracks_dir, calib_path, layout)
    tris = triangulate_cameras_people(cams, None if people == "auto" else people,
                                      device=device, **options)  # fmt: skip
    with outputs:
        for k, tri in enumerate(tris):  # one person's files at a time (a handful)
            _write_one(outputs, names[2 * k], names[2 * k + 1], tri, cams, calib_path, fps,
                       f", person {k + 1} of {len(tris)}")  # fmt: skip
        if plot:
            title = (f"{name}: {len(tris)} people ({len(cams.names)} cameras, "
                     f"{cams.frames} frames)")  # fmt: skip
            plot_people_tracks(outputs.path(names[-1]), [centres(t.points, t.valid) for t in tris],
                               [f"p{k + 1}" for k in range(len(tris))], title)  # fmt: skip
        written = outputs.commit()
    per = [{"frames_found": int(((t.person >= 0).sum(-1) >= 2).sum()), **summarize(t)}
           for t in tris]  # fmt: skip
    return {
        "tracks_dir": str(tracks_dir),
        "outputs": {p.name: str(p) for p in written},
        "cameras": cams.names,
        "folders": [f.name for f in cams.folders],
        "calibration": str(calib_path),
        "layout": cams.layout,
        "fps": fps,
        "people": per,
        **{k: per[0][k] for k in ("frames", "joints")},
    }


def summary(r: dict) -> list[str]:
    """The lines ``tensorpose triangulate`` prints."""
    if "people" in r:
        return _people_summary(r)
    med, p90 = r["median_reprojection_px"], r["p90_reprojection_px"]
    errors = f"{med:.2f} px median, {p90:.2f} px p90" if med is not None else "none valid"
    return [
        f"{r['tracks_dir']}: {r['frames']} frames, {r['joints']} joints ({r['layout']}), "
        f"{r['fps']:g} fps, calibration {r['calibration']}",
        *[f"  camera {c}: {f}" for c, f in zip(r["cameras"], r["folders"], strict=True)],
        f"  valid {r['valid_fraction']:.1%} of joint-frames; reprojection error {errors}; "
        f"{r['mean_cameras_used'] or 0:.2f} cameras per joint",
        *[f"  wrote {p}" for p in r["outputs"].values()],
    ]


def _people_summary(r: dict) -> list[str]:
    lines = [
        f"{r['tracks_dir']}: {r['frames']} frames, {r['joints']} joints ({r['layout']}), "
        f"{r['fps']:g} fps, calibration {r['calibration']}; {len(r['people'])} people",
        *[f"  camera {c}: {f}" for c, f in zip(r["cameras"], r["folders"], strict=True)],
    ]
    for k, p in enumerate(r["people"]):  # one line per person (a handful)
        med = p["median_reprojection_px"]
        errors = f"{med:.2f} px median" if med is not None else "none valid"
        lines.append(f"  p{k + 1}: found in {p['frames_found']} frames, valid "
                     f"{p['valid_fraction']:.1%} of joint-frames; reprojection error {errors}; "
                     f"{p['mean_cameras_used'] or 0:.2f} cameras per joint")  # fmt: skip
    return lines + [f"  wrote {p}" for p in r["outputs"].values()]
