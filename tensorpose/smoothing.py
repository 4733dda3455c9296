"""Smooth folders of OpenPose tracks: read, link, filter every joint of every track at once
(:mod:`tensorpose.ops.filters`), write the same JSON format, and report what changed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from .io.openpose import LAYOUTS, load_openpose, write_openpose
from .io.openpose import openpose_folders as _openpose_folders
from .ops.filters import jitter, kalman_filter, kalman_smoother, lag, one_euro_filter

__all__ = ["METHODS", "FilterSettings", "openpose_folders", "smooth", "smooth_folder"]

METHODS = ("kalman", "rts", "one-euro")


@dataclass
class FilterSettings:
    """The filter and its parameters.

    Attributes:
        method: ``kalman`` (forward filter), ``rts`` (Rauch-Tung-Striebel smoother) or
            ``one-euro``.
        fps: frame rate of the tracks.
        model: Kalman motion model, ``velocity`` or ``acceleration``.
        process_noise: Kalman q, (px/frame^2)^2.
        measurement_noise: Kalman r, px^2.
        min_cutoff, beta, d_cutoff: One-Euro parameters (Hz, 1/px, Hz).
    """

    method: str = "rts"
    fps: float = 30.0
    model: str = "velocity"
    process_noise: float = 0.5
    measurement_noise: float = 9.0
    min_cutoff: float = 1.0
    beta: float = 0.01
    d_cutoff: float = 1.0


def smooth(x: torch.Tensor, settings: FilterSettings) -> torch.Tensor:
    """Filter ``x (..., T, 2)`` along ``T`` (NaN = missing) with ``settings``."""
    s = settings
    if s.method == "one-euro":
        return one_euro_filter(x, s.fps, s.min_cutoff, s.beta, s.d_cutoff)
    if s.method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {s.method!r}")
    fn = kalman_filter if s.method == "kalman" else kalman_smoother
    return fn(x, model=s.model, process_noise=s.process_noise,
              measurement_noise=s.measurement_noise)  # fmt: skip


def openpose_folders(src: str | Path) -> list[Path]:
    """``src`` itself when it holds OpenPose frame files, else its subfolders that do (see
    :func:`tensorpose.io.openpose.openpose_folders`; subfolders named like frames are not
    frames)."""
    return _openpose_folders(src)


def check_output_folder(src: Path, out: Path, overwrite: bool) -> None:
    """Refuse an output folder that is the input, inside it or contains it, and (without
    ``overwrite``) one that already holds files.

    Raises:
        ValueError: naming both folders and the way out.
    """
    a, b = src.resolve(), out.resolve()
    if a == b or a in b.parents or b in a.parents:
        raise ValueError(
            f"--out {out} is, is inside or contains the input {src}: the raw tracks would be "
            "overwritten; choose another output folder"
        )
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not overwrite:
        raise ValueError(
            f"output folder {out} already exists and is not empty: pass --overwrite to replace "
            "its files, or choose another --out"
        )


def smooth_folder(
    input_dir: str | Path,
    out: str | Path | None = None,
    settings: FilterSettings | None = None,
    layout: str | None = None,
    min_confidence: float = 0.3,
    joint: str | None = "r_wrist",
    track: int | None = None,
    overwrite: bool = False,
) -> list[dict]:
    """Smooth every OpenPose folder of ``input_dir`` (see :func:`openpose_folders`).

    Joints detected with confidence below ``min_confidence`` are treated as missing; a joint
    the filter predicts through a gap keeps its x, y with confidence 0 in the output.

    Args:
        out: output folder (default ``./smoothed_<name>_<method>``); one subfolder per input
            folder when there are several. It may not be the input folder, inside it or
            contain it; an existing non-empty one needs ``overwrite``.
        layout: a layout of :data:`tensorpose.layouts.LAYOUTS` (``BODY_25``, ``BODY_25B``,
            ``COCO_18``, ``COCO_17``, ``H36M_17``); default: detect.
        joint: draw this joint's ``x(t), y(t)`` raw vs smoothed to a PNG (``None``: no picture).
        track: the track to draw (default: the most observed one).

        overwrite: replace the files of an existing output folder.

    Everything is read, smoothed and checked before the first file is written.

    Returns:
        one dict per folder: ``folder``, ``frames``, ``tracks``, ``layout``, ``layout_reason``
        (which layout and why), ``missing_pct``
        (joints of present people without a usable detection), ``low_confidence`` (detections
        dropped for low confidence), ``jitter_raw``/``jitter_smoothed`` (px/frame^2 on the same
        frames), ``lag`` (frames), ``out_dir`` and ``picture`` (or ``None``).

    Raises:
        ValueError: unknown ``joint`` for the layout, ``track`` out of range, an output folder
            that overlaps the input or exists (without ``overwrite``); the readers' errors.
    """
    settings = settings or FilterSettings()
    inputs = openpose_folders(input_dir)
    src = Path(input_dir)
    out_root = Path(out) if out else Path.cwd() / f"smoothed_{src.name}_{settings.method}"
    check_output_folder(src, out_root, overwrite)
    done = []  # read, smooth and check everything first: nothing is written on an error
    for folder in inputs:  # a few camera folders
        out_dir = out_root if len(inputs) == 1 else out_root / folder.name
        entry, data = _smooth_one(folder, out_dir, settings, layout, min_confidence)
        pick = _pick(data[0], data[1], joint, track) if joint is not None else None
        done.append((folder, entry, data, pick))
    report = []
    for folder, entry, (tracks, raw, sm, xy), pick in done:
        write_openpose(torch.cat([xy, tracks.keypoints[..., 2:]], -1), entry["out_dir"],
                       [f.name for f in tracks.files])  # fmt: skip
        entry["picture"] = None
        if pick is not None:
            entry["picture"] = _picture(tracks, raw, sm, folder.name, out_root, settings, *pick)
        report.append(entry)
    return report


def _smooth_one(folder: Path, out_dir: Path, settings: FilterSettings, layout: str | None,
                min_confidence: float) -> tuple[dict, tuple]:  # fmt: skip
    """Read, smooth and write one OpenPose folder: its entry of :func:`smooth_folder`'s report
    and ``(tracks, raw, smoothed)`` for the picture."""
    tracks = load_openpose(folder, layout, min_confidence)
    kp = tracks.keypoints  # (T, P, K, 3), NaN = missing
    raw = kp[..., :2].permute(1, 2, 0, 3)  # (P, K, T, 2): filters run along T
    sm = smooth(raw, settings)
    xy = sm.permute(2, 0, 1, 3)
    T, P, K = kp.shape[:3]
    present = (tracks.raw[..., 2] > 0).any(-1, keepdim=True).expand(T, P, K)
    return {
        "folder": folder.name,
        "frames": T,
        "tracks": P,
        "layout": tracks.layout,
        "layout_reason": tracks.layout_reason,
        "missing_pct": float(torch.isnan(kp[..., 0])[present].float().mean() * 100),
        "low_confidence": int(tracks.low_confidence.sum()),
        "jitter_raw": float(jitter(raw)),
        "jitter_smoothed": float(jitter(sm.masked_fill(raw.isnan(), float("nan")))),
        "lag": float(lag(raw, sm)),
        "out_dir": out_dir,
    }, (tracks, raw, sm, xy)


def _pick(tracks, raw: torch.Tensor, joint: str, track: int | None) -> tuple[str, int, int]:
    """The picture's joint (name, index) and track, checked.

    Raises:
        ValueError: ``joint`` not in the layout, ``track`` out of range.
    """
    names = LAYOUTS[tracks.layout]
    if joint not in names:
        raise ValueError(f"joint must be one of {names}, got {joint!r}")
    P = raw.shape[0]
    counts = (~torch.isnan(raw[..., 0])).sum((1, 2))  # most observed: main subject
    p = int(counts.argmax()) if track is None else track
    if not 0 <= p < P:
        raise ValueError(f"track must be in [0, {P}), got {p}")
    return joint, names.index(joint), p


def _picture(tracks, raw: torch.Tensor, sm: torch.Tensor, name: str, out_root: Path,
             settings: FilterSettings, joint: str, j: int, p: int) -> Path:  # fmt: skip
    """``<out_root>/<name>_<joint>_track<p>.png``: one joint of one track, raw vs smoothed
    (detections dropped for low confidence as crosses)."""
    from .viz import plot_joint_xy

    png = out_root / f"{name}_{joint}_track{p}.png"
    low = tracks.low_confidence
    plot_joint_xy(
        raw[p, j], {settings.method: sm[p, j]}, png, fps=settings.fps,
        title=f"{name}: {joint} of track {p}, raw vs {settings.method}",
        dropped=tracks.raw[:, p, j, :2].masked_fill(~low[:, p, j, None], float("nan")),
    )  # fmt: skip
    return png
