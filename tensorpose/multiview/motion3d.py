"""What ``triangulate`` does to its 3D joints before writing them: the TRC axes, the frame rate
found next to the tracks, gap filling and filters over time with the jitter before and after.

Axes: ``pose2sim`` (the default) writes Pose2Sim's TRC frame, Y up: its ``(X, Y, Z)`` is the
calibration world's ``(Y, Z, X)`` (a rotation, no scaling); ``calibration`` keeps the
calibration's (Z-up) world frame.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..errors import InputError
from ..ops.butterworth import butterworth, filtfilt
from ..ops.filters import jitter, kalman_filter, kalman_smoother
from ..ops.gaps import bridge_missing, fill_gaps

__all__ = [
    "AXES",
    "FILTERS",
    "POSE2SIM_MAX_GAP",
    "Filter3D",
    "axes_text",
    "filter_points",
    "find_fps",
    "to_axes",
]

AXES = ("pose2sim", "calibration")
FILTERS = ("none", "butterworth", "kalman", "rts")
POSE2SIM_MAX_GAP = 20
"""Pose2Sim's default gap filling (``interp_if_gap_smaller_than = 20``, ``interpolation =
'linear'``): gaps of up to 20 frames, linearly, in ``--drop-rule pose2sim`` mode."""
POSE2SIM_ORDER = [1, 2, 0]
"""Pose2Sim's TRC ``(X, Y, Z)`` = the calibration world's ``(Y, Z, X)``."""


def check_axes(axes: str) -> str:
    if axes not in AXES:
        raise InputError(f"--axes must be one of {', '.join(AXES)}, got {axes!r}")
    return axes


def to_axes(points: np.ndarray, axes: str) -> np.ndarray:
    """``(..., 3)`` calibration-world points in the TRC frame ``axes``."""
    return points[..., POSE2SIM_ORDER] if check_axes(axes) == "pose2sim" else points


def axes_text(axes: str, calib_name: str) -> str:
    """The TRC's first-line statement of its frame."""
    if check_axes(axes) == "pose2sim":
        return (f"X/Y/Z = Y/Z/X of the world frame of {calib_name} (Pose2Sim axes, Y up, "
                "metres)")  # fmt: skip
    return f"X/Y/Z: world frame of {calib_name} (metres)"


# ------------------------------------------------------------------------------------- fps
def _check_fps(fps: object, flag: str = "--fps") -> float:
    if not (isinstance(fps, int | float) and math.isfinite(fps) and 0.1 <= fps <= 10_000):
        raise InputError(f"{flag} must be a frame rate in 0.1..10000, got {fps!r}")
    return float(fps)


def _npz_rates(places: list[Path]) -> dict[str, float]:
    from ..io.safe_pickle import load_npz

    rates = {}
    for place in places:  # a handful of folders
        for f in sorted(place.glob("*.npz")) if place.is_dir() else []:
            try:
                z = load_npz(f)
            except (OSError, ValueError):
                continue
            if "fps" in z and np.asarray(z["fps"]).size == 1 and float(z["fps"]) > 0:
                rates[str(f)] = float(z["fps"])
    return rates


def _video_rates(places: list[Path]) -> dict[str, float]:
    from ..io.video import video_info

    rates = {}
    for place in places:  # a handful of folders
        videos = [p for p in sorted(place.iterdir()) if p.suffix.lower() in (".mp4", ".avi",
                  ".mov", ".mkv")] if place.is_dir() else []  # fmt: skip
        for v in videos:
            try:
                fps = video_info(v)[1]
            except ValueError:
                continue
            if fps and math.isfinite(fps) and fps > 0:
                rates[str(v)] = float(fps)
    return rates


def find_fps(tracks_dir: Path, folders: list[Path], fps: float | None,
             bundled: float | None) -> tuple[float, str]:  # fmt: skip
    """The frame rate and where it came from: ``--fps``; else an ``.npz`` with an ``fps`` key in
    ``tracks_dir`` or a camera folder; else the ``fps`` the camera folders' JSON records (written
    by ``predict`` and ``smooth``); else the videos in ``tracks_dir``, ``tracks_dir/videos``
    or ``tracks_dir/../videos``; else ``bundled`` (the bundled trial's 60). The sources found
    must agree; none found is one error naming ``--fps``."""
    if fps is not None:
        return _check_fps(fps), "--fps"
    root = Path(tracks_dir)
    for kind, rates in (("npz", lambda: _npz_rates([root, *folders])),
                        ("JSON", lambda: _json_rates(folders)),
                        ("video", lambda: _video_rates([root, root / "videos",
                                                        root.parent / "videos"]))):  # fmt: skip
        found = rates()
        if found:
            values = sorted(set(round(v, 3) for v in found.values()))
            if len(values) > 1:
                raise InputError(f"the {kind} files next to the tracks disagree on the frame "
                                 f"rate {found}; pass --fps")  # fmt: skip
            first = next(iter(found))
            return _check_fps(found[first], f"the frame rate of {first}"), f"{kind} {first}"
    if bundled is not None:
        return bundled, "the bundled trial (60 fps)"
    raise InputError(f"--fps is needed for the TRC time column: no video in {root}, "
                     f"{root / 'videos'} or {root.parent / 'videos'}, no .npz with an fps key "
                     "next to the tracks and no fps in their JSON")  # fmt: skip


def _json_rates(folders: list[Path]) -> dict[str, float]:
    """The ``fps`` each camera folder's JSON records (folders recording none left out)."""
    from ..io.openpose import frame_files, recorded_fps

    found = {}
    for folder in folders:  # a handful of cameras
        fps = recorded_fps(frame_files(folder))
        if fps is not None:
            found[folder.name] = fps
    return found


# --------------------------------------------------------------------------------- filters
@dataclass
class Filter3D:
    """A filter over time of 3D joints: ``method`` (``none``, ``butterworth``: zero-phase, order
    ``order`` as Pose2Sim counts it (``order / 2`` forward and backward), ``cutoff`` Hz;
    ``kalman`` / ``rts``: constant velocity, ``process_noise`` mm^2/frame^4 and
    ``measurement_noise`` mm^2), and ``max_gap``: gaps of at most that many frames are filled
    (linearly, then filtered); ``None``: 10 with a filter, 0 without."""

    method: str = "none"
    cutoff: float = 6.0
    order: int = 4
    max_gap: int | None = None
    process_noise: float = 4.0
    measurement_noise: float = 25.0

    def __post_init__(self) -> None:
        if self.method not in FILTERS:
            raise InputError(f"--filter must be one of {', '.join(FILTERS)}, got {self.method!r}")
        if self.max_gap is None:
            self.max_gap = 0 if self.method == "none" else 10
        if not (isinstance(self.max_gap, int) and 0 <= self.max_gap <= 1_000_000):
            raise InputError(f"--max-gap must be a frame count >= 0, got {self.max_gap!r}")
        if not (isinstance(self.cutoff, int | float) and math.isfinite(self.cutoff)
                and self.cutoff > 0):  # fmt: skip
            raise InputError(f"--cutoff must be a frequency in Hz > 0, got {self.cutoff!r}")

    def check_fps(self, fps: float) -> None:
        if self.method == "butterworth" and self.cutoff >= fps / 2:
            raise InputError(f"--cutoff must be below half the frame rate ({fps / 2:g} Hz), "
                             f"got {self.cutoff:g}")  # fmt: skip
        if self.method == "butterworth" and self.cutoff < fps * MIN_CUTOFF_FRACTION:
            low = fps * MIN_CUTOFF_FRACTION
            raise InputError(f"--cutoff must be at least {low:g} Hz (the frame rate / "
                             f"{1 / MIN_CUTOFF_FRACTION:g}: a lower one flattens the whole "
                             f"recording and its filter is numerically singular), got "
                             f"{self.cutoff:g}")  # fmt: skip


MIN_CUTOFF_FRACTION = 1e-4
"""The lowest Butterworth cutoff, as a fraction of the frame rate (0.006 Hz at 60 fps; below
about 1e-6 the filter's initial-state solve is singular)."""


def _butterworth(x: torch.Tensor, missing: torch.Tensor, f: Filter3D, fps: float):
    """Every missing sample bridged (linear, ends held) so that the signals are whole, filtered,
    then the caller puts the long gaps back."""
    b, a = butterworth(f.order // 2 or 1, f.cutoff, fps)
    T = x.shape[0]
    padlen = min(3 * max(len(a), len(b)), T - 1)
    never = missing.all(0)
    whole = bridge_missing(x.nan_to_num(0.0), missing & ~never)
    return filtfilt(whole.permute(1, 2, 0).unsqueeze(-1), b, a, padlen).squeeze(-1).permute(2, 0, 1)


def filter_points(points: np.ndarray, f: Filter3D, fps: float, per_person: bool = False
                  ) -> tuple[np.ndarray, np.ndarray, dict | list[dict]]:  # fmt: skip
    """Fill the short gaps of ``points (..., T, J, 3)`` (metres, NaN = missing) and filter over
    ``T``, every person, joint and coordinate at once (each joint's coordinate is a series of
    its own: the same numbers as one call per person; the Butterworth filter runs per person,
    its blocked products summing in an order that depends on how many series there are).

    Returns:
        the points (NaN where missing and not filled), the ``(..., T, J)`` bool of filled
        samples, and the jitter in mm/frame^2 before and after (``jitter_raw``,
        ``jitter_filtered``, on the frames present in both) and the ``filled`` count: of all
        points, or with ``per_person`` a list of them, one per ``points[p]`` (``(P, T, J, 3)``).
    """
    shape = points.shape
    x = torch.from_numpy(np.ascontiguousarray(points, dtype=np.float64)).reshape(-1, *shape[-3:])
    x = x.permute(1, 0, 2, 3).reshape(shape[-3], -1, 3) * 1000.0  # (T, P*J, 3) mm
    missing = x.isnan().any(-1)
    out, filled = fill_gaps(x, missing, f.max_gap)
    keep = ~missing | filled
    J = shape[-2]
    parts = [slice(p * J, (p + 1) * J) for p in range(x.shape[1] // J)] if per_person else [
        slice(None)]  # fmt: skip
    if f.method == "butterworth" and shape[-3] > 1:
        # one filter call per person: its block products' sums depend on the row count
        out = torch.cat([_butterworth(out[:, s], ~keep[:, s], f, fps) for s in parts], 1)
    elif f.method in ("kalman", "rts"):
        fn = kalman_filter if f.method == "kalman" else kalman_smoother
        out = fn(out.masked_fill(~keep[..., None], math.nan).transpose(0, 1),
                 process_noise=f.process_noise,
                 measurement_noise=f.measurement_noise).transpose(0, 1)  # fmt: skip
    out = out.masked_fill(~keep[..., None], math.nan)
    after = out.masked_fill(missing[..., None], math.nan)
    figures = [{
        "jitter_raw": float(jitter(x[:, s].contiguous().transpose(0, 1))),
        "jitter_filtered": float(jitter(after[:, s].contiguous().transpose(0, 1))),
        "filled": int(filled[:, s].sum()),
    } for s in parts]  # fmt: skip
    T = shape[-3]
    back = (out / 1000.0).reshape(T, -1, shape[-2], 3).permute(1, 0, 2, 3).reshape(shape)
    return back.numpy(), filled.reshape(T, -1, shape[-2]).permute(1, 0, 2).reshape(
        shape[:-1]).numpy(), figures if per_person else figures[0]  # fmt: skip
