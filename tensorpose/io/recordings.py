"""The recordings of a batch: Pose2Sim's batch layout or a manifest CSV -> :class:`Recording` s.

Pose2Sim's batch layout is session / participant / trial folders; a trial holds its camera
videos in ``videos/``; the calibration lies at the trial, participant or session level (the
nearest wins), as one ``.qca.txt`` or ``.toml`` file in a ``calibration/`` folder there or
directly in that folder::

    ROOT/S01/calibration/Calib.qca.txt
    ROOT/S01/P01/T1/videos/cam01.mp4 ... cam04.mp4
    ROOT/S01/P01/T2/videos/...

Any depth works: every folder under ``ROOT`` (``ROOT`` included) holding a ``videos/`` folder
is a recording. A manifest CSV instead names each recording's folder (where its outputs go),
its videos folder (default ``<recording>/videos``) and its calibration, paths relative to the
CSV's folder::

    recording,videos,calibration
    S01/P01/T1,,S01/calibration/Calib.qca.txt
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError, MissingFileError
from .video import VIDEO_EXTENSIONS

__all__ = ["CALIBRATION_SUFFIXES", "Recording", "find_recordings"]

CALIBRATION_SUFFIXES = (".qca.txt", ".toml")
"""The calibration files a recording may have (Qualisys, Pose2Sim)."""

MAX_MANIFEST_BYTES = 16 << 20
"""A manifest CSV larger than this is refused before it is read."""


@dataclass(frozen=True)
class Recording:
    """One recording: ``name`` (its folder relative to the batch root, ``/``-separated),
    ``folder`` (the trial folder: outputs go inside it), ``videos`` (the folder of its camera
    videos) and ``calibration`` (a ``.qca.txt`` or ``.toml`` file)."""

    name: str
    folder: Path
    videos: Path
    calibration: Path


def _is_calibration(p: Path) -> bool:
    return p.is_file() and p.name.lower().endswith(CALIBRATION_SUFFIXES)


def _calibration_at(folder: Path) -> Path | None:
    """The one calibration file of ``folder`` (in its ``calibration/`` sub-folder, else directly
    in it); ``None`` when there is none. Two or more at one level: one line naming them."""
    for where in (folder / "calibration", folder):
        if not where.is_dir():
            continue
        found = sorted(p for p in where.iterdir() if _is_calibration(p))
        if len(found) > 1:
            raise InputError(f"{where}: {len(found)} calibration files "
                             f"({', '.join(p.name for p in found)}); keep one")  # fmt: skip
        if found:
            return found[0]
    return None


def _nearest_calibration(trial: Path, root: Path) -> Path:
    """The calibration nearest to ``trial``: the trial's, else its parents' up to ``root``."""
    for folder in (trial, *trial.parents):  # a handful of levels
        found = _calibration_at(folder)
        if found is not None:
            return found
        if folder == root:
            break
    raise InputError(f"{trial}: no calibration (.qca.txt or .toml) in a calibration/ folder "
                     f"or directly in the trial, participant or session folder up to "
                     f"{root}")  # fmt: skip


def _has_videos(folder: Path) -> bool:
    return any(p.is_file() and p.suffix.lower() in VIDEO_EXTENSIONS for p in folder.iterdir())


def _from_layout(root: Path) -> list[Recording]:
    trials = []
    for dirpath, dirnames, _ in os.walk(root):  # the folder tree, once
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if "videos" in dirnames:
            trials.append(Path(dirpath))
            dirnames.remove("videos")
    if not trials:
        raise InputError(f"{root}: no recording found: expected session/participant/trial "
                         "folders with the camera videos in videos/ (Pose2Sim's batch layout), "
                         "or a manifest CSV")  # fmt: skip
    recordings = []
    for trial in trials:  # one per recording
        videos = trial / "videos"
        if not _has_videos(videos):
            raise InputError(f"{videos}: no video file ({', '.join(VIDEO_EXTENSIONS)})")
        name = trial.relative_to(root).as_posix()
        recordings.append(Recording(name if name != "." else trial.name, trial, videos,
                                    _nearest_calibration(trial, root)))  # fmt: skip
    return recordings


def _from_manifest(csv_path: Path) -> list[Recording]:
    if csv_path.stat().st_size > MAX_MANIFEST_BYTES:
        raise InputError(f"{csv_path}: larger than {MAX_MANIFEST_BYTES >> 20} MiB")
    base = csv_path.parent
    try:
        with open(csv_path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except (UnicodeDecodeError, csv.Error) as e:
        raise InputError(f"{csv_path}: not a CSV file ({e})") from None
    if not rows or "recording" not in rows[0] or "calibration" not in rows[0]:
        raise InputError(f"{csv_path}: expected a header line recording,videos,calibration "
                         "and one row per recording")  # fmt: skip
    recordings, seen = [], set()
    for line, row in enumerate(rows, start=2):  # one row per recording
        name = (row.get("recording") or "").strip()
        calib = (row.get("calibration") or "").strip()
        if not name or not calib:
            raise InputError(f"{csv_path}, line {line}: recording and calibration are required")
        folder = (base / name).resolve()
        if folder in seen:
            raise InputError(f"{csv_path}, line {line}: recording {name} is listed twice")
        seen.add(folder)
        videos = base / ((row.get("videos") or "").strip() or f"{name}/videos")
        calibration = base / calib
        if not videos.is_dir() or not _has_videos(videos):
            raise MissingFileError(f"{csv_path}, line {line}: {videos}: no folder of videos")
        if not _is_calibration(calibration):
            raise MissingFileError(f"{csv_path}, line {line}: {calibration}: no calibration "
                                   "file (.qca.txt or .toml)")  # fmt: skip
        recordings.append(Recording(name, base / name, videos, calibration))
    return recordings


def find_recordings(root: str | os.PathLike) -> tuple[Path, list[Recording]]:
    """The recordings of a batch and its root folder (where ``batch.json`` goes).

    Args:
        root: a folder in Pose2Sim's batch layout, or a manifest ``.csv`` (its folder is the
            root; paths in it are relative to it).

    Returns:
        the root folder and the recordings, sorted by name.

    Raises:
        InputError: no such folder or file, no recording, a trial without videos or
            calibration, two calibrations at one level, a bad manifest row (each named).
    """
    root = Path(root)
    if not root.exists():
        raise MissingFileError(f"{root}: no such folder or manifest CSV")
    if root.is_file() and root.suffix.lower() == ".csv":
        recordings = _from_manifest(root)
        root = root.parent
    elif root.is_dir():
        recordings = _from_layout(root)
    else:
        raise InputError(f"{root}: not a folder or a manifest .csv file")
    return root, sorted(recordings, key=lambda r: r.name)
