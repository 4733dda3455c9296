"""``tensorpose triangulate``: one keypoint folder per calibrated camera -> 3D joints.

Check the inputs (:func:`tensorpose.multiview.recording.open_recording`), triangulate a chunk of
frames
at a time (:func:`tensorpose.multiview.recording.triangulate_cameras`), then commit
``<name>_3d.trc``
(valid joints, metres, the TRC axes on the file's first line), ``<name>_3d.npz``
(``points``, ``errors``, ``mean_error``, ``used``, ``valid``, ``person``, ``names``,
``cameras``, ``folders``, ``fps``, ``units``) and ``<name>_3d_errors.png`` all at once.

With ``people`` (``"auto"`` or a number) every person seen by two cameras or more is
associated across views, triangulated and linked over time
(:func:`tensorpose.multiview.people.triangulate_cameras_people`): one ``<name>_p<k>_3d.trc`` and
``<name>_p<k>_3d.npz`` (the same keys) per person, best seen first, and
``<name>_3d_tracks.png``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from ..errors import InputError
from ..io.atomic import OutputFolder
from ..io.motion import write_npz, write_trc
from ..io.openpose import BUNDLED_FPS, bundled_tracks
from ..io.sync import read_sync
from ..layouts import marker_names
from ..multiview.motion3d import (
    POSE2SIM_MAX_GAP,
    Filter3D,
    axes_text,
    check_axes,
    filter_points,
    find_fps,
    to_axes,
)
from ..multiview.people import (
    MAX_PEOPLE,
    centres,
    check_people,
    triangulate_cameras_one,
    triangulate_cameras_people,
)
from ..multiview.recording import (
    CHUNK_FRAMES,
    CameraAgreement,
    check_agreement,
    open_recording,
    summarize,
    write_repaired_2d,
)
from ..ops.camera import project_points
from ..viz.charts import reprojection_errors_picture
from ..viz.draw import plot_people_tracks

__all__ = ["output_names", "summary", "triangulate_folder"]


def output_names(name: str, people: int | None = None, write_2d: bool = False) -> list[str]:
    """The files ``triangulate`` writes for a recording named ``name``: with ``people`` (a
    count), a TRC and an NPZ per person and the picture of the tracks; with ``write_2d``, the
    folder ``<name>_2d`` of the repaired 2D (one OpenPose folder per camera)."""
    extra = [f"{name}_2d"] if write_2d else []
    if people is None:
        return [f"{name}_3d.trc", f"{name}_3d.npz", f"{name}_3d_errors.png", *extra]
    files = [f"{name}_p{k}_3d.{ext}" for k in range(1, people + 1) for ext in ("trc", "npz")]
    return [*files, f"{name}_3d_tracks.png", *extra]


LEFT_RIGHT = ("fix", "keep")
"""``--left-right``: ``fix`` (default) makes each person's left and right consistent across
cameras before triangulating (:mod:`tensorpose.multiview.swaps`), ``keep`` takes the labels
as they are."""


def _check_left_right(left_right: str, write_2d: bool) -> bool:
    if left_right not in LEFT_RIGHT:
        raise InputError(f"--left-right must be one of {', '.join(LEFT_RIGHT)}, got "
                         f"{left_right!r}")  # fmt: skip
    if write_2d and left_right == "keep":
        raise InputError("--write-2d writes the 2D with left and right repaired: it needs "
                         "--left-right fix (the default)")  # fmt: skip
    return left_right == "fix"


def _fps(tracks_dir: Path, folders: list[Path], fps: float | None) -> tuple[float, str]:
    """``fps``, else what the input says (:func:`tensorpose.multiview.motion3d.find_fps`), else the
    bundled trial's 60 for the bundled camera ``folders``; and where it came from."""
    if fps is not None:  # given: nothing else is looked at
        return find_fps(tracks_dir, folders, fps, None)
    bundled = [p.resolve() for p in bundled_tracks()]
    is_bundled = [f.resolve() for f in folders] == bundled
    return find_fps(tracks_dir, folders, fps, BUNDLED_FPS if is_bundled else None)


def _filter3d(axes: str, filter: str, cutoff: float, max_gap: int | None,
              drop: str) -> Filter3D:  # fmt: skip
    """The 3D filter (:class:`~..motion3d.Filter3D`) after checking ``axes``; with
    ``drop="pose2sim"`` and no ``max_gap``, Pose2Sim's gap filling (linear, up to 20 frames)."""
    check_axes(axes)
    if max_gap is None and drop == "pose2sim":
        max_gap = POSE2SIM_MAX_GAP
    return Filter3D(filter, cutoff, max_gap=max_gap)


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
    axes: str = "pose2sim",
    filter: str = "none",
    cutoff: float = 6.0,
    max_gap: int | None = None,
    chunk_frames: int = CHUNK_FRAMES,
    sync: str | os.PathLike | None = None,
    left_right: str = "fix",
    write_2d: bool = False,
) -> dict:
    """Triangulate a multi-camera recording and write the 3D joints (``triangulate``).

    Args:
        tracks_dir: folder with one sub-folder of OpenPose ``*.json`` per camera.
        calib_path: ``.qca.txt`` or ``.toml``; cameras matched to the folders by name
            (``cam01_json`` <-> ``cam_01``), it may hold more. out_dir: output folder.
        min_confidence, max_reprojection_px, association_px, drop: see
            :func:`tensorpose.multiview.recording.triangulate_cameras`. layout: ``None`` detects it.
        fps: ``None``: what the input says (:func:`tensorpose.multiview.motion3d.find_fps`). name:
        file
            stem (default: ``tracks_dir``'s name). plot: write the PNG. overwrite: replace.
        people: ``None``: one person; ``"auto"`` or ``N``: see :func:`_people_folder`.
        axes: the TRC's frame, ``pose2sim`` (Y up) or ``calibration``; the NPZ's ``points``
            stay in the calibration's. filter, cutoff, max_gap: :func:`_filter3d`.
        chunk_frames: frames read and triangulated at a time (bounded memory, same result).
        sync: a ``sync.json`` (``tensorpose sync``): each camera's first frames dropped, the
            frames common to all kept.
        left_right: ``"fix"``: each person's left and right made consistent across cameras
            (:mod:`tensorpose.multiview.swaps`; the swaps per camera in the report and the
            NPZ's ``swapped``); ``"keep"``: as labelled. write_2d: also write ``<name>_2d``,
            the input's OpenPose folders with those swaps repaired (for ``smooth``, ``lift``).

    Returns a report: outputs, cameras, folders, calibration, layout, fps and its source, axes,
    filter, jitter and the figures of :func:`tensorpose.multiview.recording.summarize`.
    """
    tracks_dir, calib_path = Path(tracks_dir), Path(calib_path)
    name = name or tracks_dir.resolve().name
    filt = _filter3d(axes, filter, cutoff, max_gap, drop)
    people = check_people(people)
    offsets = None if sync is None else (read_sync(sync), str(sync))
    fix = _check_left_right(left_right, write_2d)
    if people is not None:
        return _people_folder(tracks_dir, calib_path, out_dir, people, name, fps,
                              layout, plot, overwrite, device, (axes, filt), write_2d,
                              chunk_frames=chunk_frames, min_confidence=min_confidence,
                              max_reprojection_px=max_reprojection_px,
                              association_px=association_px, drop=drop,
                              offsets=offsets, fix_swaps=fix)  # fmt: skip
    names = output_names(name, write_2d=write_2d)
    outputs = OutputFolder(out_dir, names, inputs=[tracks_dir, calib_path], overwrite=overwrite)
    with outputs:  # the folder's lock from here on: a second run is refused at once
        cams = open_recording(tracks_dir, calib_path, layout, *(offsets or ()))
        fps, source = _fps(tracks_dir, cams.folders, fps)
        filt.check_fps(fps)
        tally = CameraAgreement(cams, min_confidence)
        tri, found, taken = triangulate_cameras_one(
            cams, min_confidence=min_confidence, association_px=association_px,
            max_reprojection_px=max_reprojection_px, drop=drop, device=device,
            chunk_frames=chunk_frames, agreement=tally, fix_swaps=fix)  # fmt: skip
        agreement = check_agreement(tally.result([tri]), tracks_dir, max_reprojection_px,
                                    calib_path)  # fmt: skip
        figures = _write_one(outputs, names[0], names[1], tri, cams, calib_path, fps,
                             (axes, filt))  # fmt: skip
        if write_2d:
            write_repaired_2d(cams, [tri], outputs.path(f"{name}_2d"), fps, chunk_frames)
        if plot:
            title = (f"{name}: reprojection error per joint ({len(cams.names)} cameras, "
                     f"{cams.frames} frames, valid {tri.valid.mean():.1%})")  # fmt: skip
            reprojection_errors_picture(outputs.path(names[2]), tri.mean_error, tri.valid,
                                        tri.names, max_reprojection_px, title)  # fmt: skip
        written = outputs.commit()
    return {
        "tracks_dir": str(tracks_dir), "outputs": {p.suffix[1:]: str(p) for p in written},
        "cameras": cams.names, "folders": [f.name for f in cams.folders],
        "calibration": str(calib_path), "layout": cams.layout, "fps": fps,
        "fps_source": source, "camera_agreement": agreement, **figures, **summarize(tri),
        "people_found": _where(found, cams), "person_taken": taken,
        "left_right": left_right, "swaps": _swaps(tri, cams),
    }  # fmt: skip


def _swaps(tri, cams) -> dict[str, int]:
    """Per camera, the frames whose left and right were exchanged (empty: not tested)."""
    if tri.swapped is None:
        return {}
    return dict(zip(cams.names, (int(n) for n in tri.swapped.sum(0)), strict=True))


def _where(found: list[dict], cams) -> list[dict]:
    """The people found (:func:`~tensorpose.multiview.people.triangulate_cameras_one`), each
    with where it is in the image of the camera that sees it most (its centre projected)."""
    cal = cams.calibration
    for p in found:  # a handful of people
        c = int(np.argmax(p["per_camera"]))
        xyz = torch.tensor(p["centre_m"], dtype=torch.float64)[None]
        uv = project_points(xyz, cal.K[c], cal.dist[c], cal.R[c], cal.t[c])[0].tolist()
        p["image"] = {"camera": cams.names[c], "px": [round(v, 1) for v in uv]}
    return found


def _filtered(tris: list, filt: Filter3D, fps: float) -> list[tuple | None]:
    """Per person its filtered points, filled samples and jitter figures
    (:func:`~tensorpose.multiview.motion3d.filter_points`: every person in one call), or
    ``None`` per person without a filter or gap filling."""
    if filt.method == "none" and not filt.max_gap:
        return [None] * len(tris)
    points, filled, jit = filter_points(np.stack([t.points for t in tris]), filt, fps, True)
    return list(zip(points, filled, jit, strict=True))


def _write_one(outputs: OutputFolder, trc: str, npz: str, tri, cams, calib_path: Path,
               fps: float, how: tuple[str, Filter3D], extra: str = "",
               filtered: tuple | None = None) -> dict:  # fmt: skip
    """One person's TRC (``axes``, Pose2Sim's marker names) and NPZ (the calibration's frame),
    after the filter (``filtered``: :func:`_filtered`'s for this person); returns the axes,
    filter and jitter figures."""
    axes, filt = how
    points, filled = tri.points, np.zeros(tri.valid.shape, bool)
    figures = {"axes": axes, "filter": filt.method}
    if filt.method != "none" or filt.max_gap:
        points, filled, jit = filtered or _filtered([tri], filt, fps)[0]
        figures.update(jit, max_gap=filt.max_gap)
        if filt.method == "butterworth":
            figures.update(cutoff=filt.cutoff, order=filt.order)
    markers = marker_names(cams.layout)
    text = (f"{axes_text(axes, calib_path.name)}, cameras {cams.names}, tensorpose multi-view "
            f"triangulation{extra}, filter {filt.method}")  # fmt: skip
    write_trc(outputs.path(trc), to_axes(points, axes), markers, fps, units="m", axes=text)
    arrays = {
        "points": points, "errors": tri.errors, "mean_error": tri.mean_error,
        "used": tri.used, "valid": tri.valid, "person": tri.person,
        "names": np.array(tri.names), "cameras": np.array(cams.names),
        "folders": np.array([f.name for f in cams.folders]), "fps": np.float64(fps),
        "units": "m", "marker_names": np.array(markers), "axes": axes,
        "trc_axes": np.array(text), "filter": filt.method,
    }  # fmt: skip
    if tri.swapped is not None:  # (T, C): left and right exchanged before triangulating
        arrays["swapped"] = tri.swapped
    if filt.method != "none" or filt.max_gap:
        arrays.update(points_raw=tri.points, filled=filled)
    write_npz(outputs.path(npz), arrays, compressed=True)
    return figures


def _people_folder(tracks_dir: Path, calib_path: Path, out_dir, people: int | str, name: str,
                   fps, layout, plot: bool, overwrite: bool, device, how, write_2d: bool,
                   offsets: tuple | None = None, **options) -> dict:  # fmt: skip
    """``triangulate_folder`` with ``people``: ``"auto"`` (every person found in at least a
    tenth of the frames) or a number (that many people, the best seen; fewer found is an error
    naming ``--people``): a TRC and an NPZ per person, the tracks' PNG."""
    count = MAX_PEOPLE if people == "auto" else people
    names = output_names(name, count, write_2d)
    outputs = OutputFolder(out_dir, names, inputs=[tracks_dir, calib_path],
                           overwrite=overwrite)  # fmt: skip
    with outputs:  # the folder's lock from here on: a second run is refused at once
        cams = open_recording(tracks_dir, calib_path, layout, *(offsets or ()))
        fps, source = _fps(tracks_dir, cams.folders, fps)
        how[1].check_fps(fps)
        tally = CameraAgreement(cams, options["min_confidence"])
        tris = triangulate_cameras_people(cams, None if people == "auto" else people,
                                          device=device, agreement=tally, **options)  # fmt: skip
        agreement = check_agreement(tally.result(tris), tracks_dir, options["max_reprojection_px"],
                                    calib_path)  # fmt: skip
        filtered = _filtered(tris, how[1], fps)  # every person at once
        figures = [_write_one(outputs, names[2 * k], names[2 * k + 1], tri, cams, calib_path,
                              fps, how, f", person {k + 1} of {len(tris)}", filtered[k])
                   for k, tri in enumerate(tris)]  # fmt: skip
        if plot:
            title = (f"{name}: {len(tris)} people ({len(cams.names)} cameras, "
                     f"{cams.frames} frames)")  # fmt: skip
            plot_people_tracks(outputs.path(f"{name}_3d_tracks.png"),
                               [centres(t.points, t.valid) for t in tris],
                               [f"p{k + 1}" for k in range(len(tris))], title)  # fmt: skip
        if write_2d:
            write_repaired_2d(cams, tris, outputs.path(f"{name}_2d"), fps,
                              options["chunk_frames"])  # fmt: skip
        written = outputs.commit()
    per = [{"frames_found": int(((t.person >= 0).sum(-1) >= 2).sum()), **f, **summarize(t),
            "swaps": _swaps(t, cams)}
           for t, f in zip(tris, figures, strict=True)]  # fmt: skip
    return {
        "tracks_dir": str(tracks_dir),
        "outputs": {p.name: str(p) for p in written},
        "cameras": cams.names,
        "folders": [f.name for f in cams.folders],
        "calibration": str(calib_path),
        "layout": cams.layout,
        "fps": fps,
        "fps_source": source,
        "camera_agreement": agreement,
        "left_right": "fix" if options["fix_swaps"] else "keep",
        "people": per,
        **{k: per[0][k] for k in ("frames", "joints", "axes", "filter")},
    }


def _output_lines(r: dict) -> list[str]:
    """The fps source, the TRC axes, the filter and its jitter figures."""
    axes = ("Pose2Sim's (X, Y, Z) = the calibration's (Y, Z, X), Y up" if r["axes"] == "pose2sim"
            else "the calibration's world frame")  # fmt: skip
    lines = [f"  fps {r['fps']:g} from {r['fps_source']}; TRC axes: {axes}"]
    for k, p in enumerate(r.get("people", [r])):  # one line per person (a handful)
        if "jitter_raw" not in p:
            continue
        who = f"p{k + 1} " if "people" in r else ""
        how = f"{p['filter']}" + (f" {p['cutoff']:g} Hz order {p['order']}"
                                  if p["filter"] == "butterworth" else "")  # fmt: skip
        lines.append(f"  {who}filter {how}, gaps <= {p['max_gap']} frames filled "
                     f"({p['filled']} joint-frames); jitter {p['jitter_raw']:.1f} -> "
                     f"{p['jitter_filtered']:.1f} mm/frame^2")  # fmt: skip
    return lines


def _camera_lines(r: dict) -> list[str]:
    """Per camera: its folder, the median reprojection error of its detections against the
    3D joints and the share of the joints that used it."""
    return [f"  camera {a['camera']}: {a['folder']}, median reprojection error "
            + (f"{a['median_px']:.1f} px" if a["median_px"] is not None else "-")
            + f", in {a['used']:.0%} of the valid joints"
            + (f"; its detections fit the people not kept ({a['median_everyone_px']:.1f} px), "
               "so its calibration is not blamed: the people kept are out of its view or seen "
               "poorly in it" if a.get("sees_only_others") else "")
            for a in r["camera_agreement"]]  # fmt: skip


def _person(k: int, p: dict, cameras: list[str]) -> str:
    per = ", ".join(f"{c} {n}" for c, n in zip(cameras, p["per_camera"], strict=True))
    u, v = p["image"]["px"] if "image" in p else (np.nan, np.nan)
    where = ("" if not np.isfinite([u, v]).all()
             else f", at ({u:.0f}, {v:.0f}) px in {p['image']['camera']}")  # fmt: skip
    return f"p{k + 1} (seen in {p['frames']} frames; frames per camera: {per}{where})"


def people_line(r: dict) -> list[str]:
    """With more than one person found, the line that says so: the person taken (the one most
    cameras see longest), the others, and ``--people``."""
    found, k = r.get("people_found", []), r.get("person_taken", -1)
    if len(found) < 2:
        return []
    others = "; ".join(_person(i, p, r["cameras"]) for i, p in enumerate(found) if i != k)
    return [
        f"  {len(found)} people found: triangulated {_person(k, found[k], r['cameras'])}, "
        f"the one most cameras see longest; also {others}; pass --people auto (files "
        "p1.. in this order) for each person"
    ]


def swaps_line(r: dict) -> list[str]:
    """The left/right swaps repaired per camera (every person together)."""
    if r.get("left_right") != "fix":
        return []
    total: dict[str, int] = {}
    for p in r.get("people", [r]):  # a handful of people
        for cam, n in p.get("swaps", {}).items():
            total[cam] = total.get(cam, 0) + n
    each = ", ".join(f"{cam} {n}" for cam, n in total.items())
    return [
        f"  left/right made consistent across cameras: frames swapped back per camera: "
        f"{each} (the NPZ's swapped; --left-right keep: as labelled)"
    ]


def summary(r: dict) -> list[str]:
    """The lines ``tensorpose triangulate`` prints."""
    if "people" in r:
        return _people_summary(r)
    med, p90 = r["median_reprojection_px"], r["p90_reprojection_px"]
    errors = f"{med:.2f} px median, {p90:.2f} px p90" if med is not None else "none valid"
    return [
        f"{r['tracks_dir']}: {r['frames']} frames, {r['joints']} joints ({r['layout']}), "
        f"{r['fps']:g} fps, calibration {r['calibration']}",
        *people_line(r),
        *_camera_lines(r),
        *swaps_line(r),
        f"  valid {r['valid_fraction']:.1%} of joint-frames; reprojection error {errors}; "
        f"{r['mean_cameras_used'] or 0:.2f} cameras per joint",
        *_output_lines(r),
        *[f"  wrote {p}" for p in r["outputs"].values()],
    ]


def _people_summary(r: dict) -> list[str]:
    lines = [
        f"{r['tracks_dir']}: {r['frames']} frames, {r['joints']} joints ({r['layout']}), "
        f"{r['fps']:g} fps, calibration {r['calibration']}; {len(r['people'])} people",
        *_camera_lines(r),
        *swaps_line(r),
    ]
    for k, p in enumerate(r["people"]):  # one line per person (a handful)
        med = p["median_reprojection_px"]
        errors = f"{med:.2f} px median" if med is not None else "none valid"
        lines.append(f"  p{k + 1}: found in {p['frames_found']} frames, valid "
                     f"{p['valid_fraction']:.1%} of joint-frames; reprojection error {errors}; "
                     f"{p['mean_cameras_used'] or 0:.2f} cameras per joint")  # fmt: skip
    return lines + _output_lines(r) + [f"  wrote {p}" for p in r["outputs"].values()]
