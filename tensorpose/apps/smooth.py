"""``tensorpose smooth``: OpenPose keypoint folders -> the same folders, smoothed.

Check the inputs and the output folder, read every folder into linked tracks
(:func:`tensorpose.io.tracks.read_tracks`) and smooth them
(:func:`tensorpose.smoothing.smooth_tracks`), then commit the OpenPose JSON folders (each
written whole: no frame of an earlier run stays) and the pictures all at once.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from ..errors import InputError
from ..io.atomic import OutputFolder
from ..io.openpose import (
    MIN_TRACK_KEYPOINTS,
    frame_files,
    openpose_folders,
    recorded_fps,
    write_openpose,
)
from ..io.tracks import Tracks, read_tracks
from ..layouts import LAYOUTS
from ..smoothing import FilterSettings, smooth_tracks
from ..viz.draw import plot_joint_xy

__all__ = ["smooth_folder", "summary"]


def _pick(tracks: Tracks, raw: torch.Tensor, joint: str, track: int | None) -> tuple[str, int, int]:
    """The picture's joint (name, index) and track, checked.

    Raises:
        ValueError: ``joint`` not in the layout, ``track`` out of range.
    """
    names = LAYOUTS[tracks.layout]
    if joint not in names:
        raise InputError(f"--joint must be one of {names}, got {joint!r}")
    P = raw.shape[0]
    counts = (~torch.isnan(raw[..., 0])).sum((1, 2))  # most observed: main subject
    p = int(counts.argmax()) if track is None else track
    if not 0 <= p < P:
        raise InputError(f"--track must be in [0, {P}), got {p}")
    return joint, names.index(joint), p


def _picture(path: Path, tracks: Tracks, raw: torch.Tensor, sm: torch.Tensor, name: str,
             settings: FilterSettings, joint: str, j: int, p: int) -> None:  # fmt: skip
    """One joint of one track, raw vs smoothed (detections dropped for low confidence as
    crosses)."""
    low = tracks.low_confidence
    plot_joint_xy(
        raw[p, j], {settings.method: sm[p, j]}, path, fps=settings.fps,
        title=f"{name}: {joint} of track {p}, raw vs {settings.method}",
        dropped=tracks.raw[:, p, j, :2].masked_fill(~low[:, p, j, None], float("nan")),
    )  # fmt: skip


def smooth_folder(
    input_dir: str | Path,
    out: str | Path | None = None,
    settings: FilterSettings | None = None,
    layout: str | None = None,
    min_confidence: float = 0.3,
    joint: str | None = "r_wrist",
    track: int | None = None,
    overwrite: bool = False,
    fps_from_files: bool = False,
) -> list[dict]:
    """Smooth every OpenPose folder of ``input_dir`` (itself, or its sub-folders of frames).

    Joints detected with confidence below ``min_confidence`` are treated as missing; a joint
    the filter predicts through a gap keeps its x, y with confidence 0 in the output.

    Args:
        out: output folder (default ``./smoothed_<name>_<method>``); one subfolder per input
            folder when there are several (the frames directly in it for one). It may not be
            the input folder, inside it or contain it; existing outputs need ``overwrite``.
        layout: a layout of :data:`tensorpose.layouts.LAYOUTS`; default: detect.
        joint: draw this joint's ``x(t), y(t)`` raw vs smoothed to a PNG (``None``: no picture).
        track: the track to draw (default: the most observed one).
        overwrite: replace the outputs of an earlier run.
        fps_from_files: each folder's recorded ``fps`` (``predict``, ``smooth`` write it), else
            ``settings.fps`` (then not recorded in the output) instead of ``settings.fps``.

    Everything is read, smoothed and checked before the first file is written.

    Returns:
        one dict per folder: ``folder``, the figures of
        :func:`tensorpose.smoothing.smooth_tracks`, ``out_dir`` and ``picture`` (or ``None``).
    """
    settings = settings or FilterSettings()
    src = Path(input_dir)
    inputs = openpose_folders(src)
    out_root = Path(out) if out else Path.cwd() / f"smoothed_{src.resolve().name}_{settings.method}"
    single = len(inputs) == 1
    frames_dirs = ["."] if single else [f.name for f in inputs]
    pictures = {}
    done = []  # read, smooth and check everything first: nothing is written on an error
    for folder in inputs:  # a few camera folders
        tracks = read_tracks(folder, layout, min_confidence)
        if tracks.num_tracks == 0:
            raise InputError(f"{folder}: no person with a detected keypoint in any frame: "
                             "nothing to smooth")  # fmt: skip
        fps = recorded_fps(tracks.files) if fps_from_files else settings.fps  # None: unknown
        entry, raw, sm = smooth_tracks(tracks, replace(settings, fps=fps or settings.fps))
        pick = _pick(tracks, raw, joint, track) if joint is not None else None
        if pick is not None:
            pictures[folder.name] = f"{folder.name}_{pick[0]}_track{pick[2]}.png"
        entry = {"folder": folder.name, **entry, "dropped_detections": tracks.dropped_detections,
                 "fps": fps}  # fmt: skip
        done.append((folder, entry, tracks, raw, sm, pick))
    if single:  # the frames go straight into the output folder
        names = [f.name for f in done[0][2].files] + list(pictures.values())
        if overwrite and out_root.is_dir():  # frames of an earlier, longer run go too
            names += [f.name for f in frame_files(out_root) if f.name not in names]
    else:
        names = frames_dirs + list(pictures.values())
    outputs = OutputFolder(out_root, names, inputs=[src], overwrite=overwrite, whole_folder=True)
    report = []
    with outputs:
        for folder, entry, tracks, raw, sm, pick in done:
            xy = sm.permute(2, 0, 1, 3)
            dst = outputs.staging if single else outputs.path(folder.name)
            write_openpose(torch.cat([xy, tracks.keypoints[..., 2:]], -1), dst,
                           [f.name for f in tracks.files], tracks.layout,
                           identities=True, fps=entry["fps"])  # fmt: skip
            entry["out_dir"] = out_root if single else out_root / folder.name
            entry["picture"] = None
            if pick is not None:
                png = pictures[folder.name]
                _picture(outputs.path(png), tracks, raw, sm, folder.name,
                         replace(settings, fps=entry["fps"] or settings.fps), *pick)  # fmt: skip
                entry["picture"] = out_root / png
            report.append(entry)
        outputs.commit()
    return report


def summary(report: list[dict], settings: FilterSettings, min_confidence: float) -> list[str]:
    """The lines ``tensorpose smooth`` prints."""
    lines = []
    for r in report:
        lines += [
            f"{r['folder']}: layout {r['layout']} ({r['layout_reason']})",
            f"{r['folder']}: {r['frames']} frames, {r['tracks']} tracks ({r['layout']}); of the "
            f"joints of present people {r['missing_pct']:.1f}% are missing, "
            f"{r['low_confidence']} of them detected with confidence < {min_confidence} "
            f"and treated as missing; jitter {r['jitter_raw']:.3f} -> "
            f"{r['jitter_smoothed']:.3f} px/frame^2 (on the same frames), lag {r['lag']:+.2f} "
            f"frames ({settings.method}) -> {r['out_dir']}",
        ]
        if r.get("dropped_detections"):
            lines.append(
                f"  {r['dropped_detections']} detection(s) with fewer than {MIN_TRACK_KEYPOINTS} "
                "found keypoints matched no track and were left out"
            )
        if r["picture"] is not None:
            lines.append(f"  picture: {r['picture']}")
    return lines
