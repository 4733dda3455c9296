"""OpenPose per-frame JSON folders -> keypoint tracks ``(T, P, K, 3)``, and back.

OpenPose writes one JSON file per frame with a list of ``people``, each with a flat
``pose_keypoints_2d = [x0, y0, c0, x1, y1, c1, ...]`` (``0, 0, 0`` for a joint it did not
find). People are not identified across frames: :func:`link_tracks` links them into tracks
(:func:`tensorpose.io.tracks.read_tracks` reads a folder into linked tracks); people with fewer
than :data:`MIN_TRACK_KEYPOINTS` found keypoints start no track, and a track unseen for more than
:data:`MAX_GAP` frames is not linked again (:func:`link_detections` counts what was left out).

A keypoint is *found* when its confidence is positive and it is not at ``(0, 0)`` (OpenPose
writes ``0, 0`` for joints it did not find, sometimes with a nonzero confidence). People with no
found keypoint (e.g. all confidences 0) are ignored: they cannot be linked to anyone.

Layouts (keypoint orders) are those of :mod:`tensorpose.layouts`: ``BODY_25`` (OpenPose's
default model), ``BODY_25B`` (the experimental model, the layout of the bundled tracks) and
``COCO_18`` (OpenPose's COCO model); ``COCO_17`` and ``H36M_17`` files are read too. Without
``layout=`` it is detected from the keypoint count and geometry
(:func:`tensorpose.layouts.detect_layout`: BODY_25 and BODY_25B both have 25 keypoints) and
:func:`read_openpose_detections` returns why.

Malformed input raises :class:`OpenPoseError` (a ``ValueError``) naming the file: broken JSON,
a missing ``people`` list, keypoints that are not finite numbers (or beyond ``1e7`` pixels),
counts that are not a multiple of 3 or differ between people. Entries of the folder that are
not regular files (e.g. a subfolder named ``x.json``) are skipped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from ..errors import InputError, MissingFileError
from ..layouts import COCO17_INDEX, LAYOUTS, check_layout, layout_from_evidence, split_evidence
from ..ops.assignment import linear_assignment
from .files import _size, list_files, read_bytes, read_regular

__all__ = [
    "COCO17_INDEX",
    "LAYOUTS",
    "MAX_GAP",
    "MAX_TRACKS_BYTES",
    "MIN_TRACK_KEYPOINTS",
    "Frame",
    "FrameFiles",
    "LinkedTracks",
    "OpenPoseError",
    "bundled_tracks",
    "cameras_evidence",
    "first_person",
    "found",
    "frame_files",
    "frame_paths",
    "identified_tracks",
    "link_detections",
    "link_tracks",
    "openpose_evidence",
    "openpose_folders",
    "read_openpose_detections",
    "read_openpose_files",
    "read_openpose_frames",
    "write_openpose",
]

BUNDLED_FPS = 60.0
"""Frame rate of the bundled tracks (the pose2sim demo session is configured at 60 fps)."""

MAX_FRAME_BYTES = 64 << 20
"""Largest OpenPose frame file read (64 MiB)."""

MAX_COORDINATE = 1e7
"""Largest accepted ``|x|``, ``|y|`` or confidence in a file (no image is that large)."""

MIN_TRACK_KEYPOINTS = 3
"""Found keypoints a person needs to start a track (fewer: a detector's false positive; the
bundled tracks' people have 12 or more)."""

MAX_GAP = 60
"""Frames a track may go unseen and still be linked (1 s at 60 fps, 2 s at 30 fps); then it
retires from the matching (the bundled tracks' longest gap is 0 frames)."""

MAX_TRACKS_BYTES = 2 << 30
"""Largest linked-tracks array ``(T, P, K, 3)`` float64 (2 GiB)."""


class OpenPoseError(InputError):
    """An OpenPose folder or file could not be read; the message names the file."""


def bundled_tracks() -> list[Path]:
    """The four camera folders of real OpenPose BODY_25B tracks shipped with the package
    (pose2sim demo balancing trial, 100 frames each at 60 fps; see assets/ATTRIBUTION.md)."""
    root = Path(__file__).resolve().parent.parent / "assets" / "tracks" / "openpose_body25b"
    return sorted(p for p in root.glob("cam*_json") if p.is_dir())


def frame_paths(folder: str | os.PathLike) -> list[str]:
    """:func:`frame_files` as text, from one listing of the folder (:func:`list_files`)."""
    return list_files(folder, ".json")


def frame_files(folder: str | os.PathLike) -> list[Path]:
    """The regular ``*.json`` files of ``folder`` in natural name order (= time order);
    subfolders and other non-files with such names are skipped."""
    return [Path(p) for p in frame_paths(folder)]


def openpose_folders(path: str | os.PathLike) -> list[Path]:
    """The OpenPose folders under ``path``: ``[path]`` when it holds frame files, else its
    subfolders that do (e.g. one per camera, as the bundled tracks), in name order.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        OpenPoseError: ``path`` is a file, or neither it nor a subfolder holds ``*.json`` files.
    """
    path = Path(path)
    if not path.exists():
        raise MissingFileError(f"OpenPose folder not found: {path}")
    if not path.is_dir():
        raise OpenPoseError(f"{path}: is a file, expected a folder of per-frame OpenPose JSON")
    if frame_files(path):
        return [path]
    subs = sorted(d for d in path.iterdir() if d.is_dir() and frame_files(d))
    if not subs:
        raise OpenPoseError(f"{path}: no OpenPose .json files in it or in its subfolders")
    return subs


_NUMBERS = frozenset({int, float})


def _person(path: Path, i: int, kp: object) -> np.ndarray | None:
    """``(K, 3)`` from one person's ``pose_keypoints_2d``; ``None`` for an empty list."""
    if not isinstance(kp, list):
        raise OpenPoseError(f"{path}: people[{i}] has no 'pose_keypoints_2d' list")
    if len(kp) == 0:  # e.g. only face/hand keypoints were written
        return None
    if len(kp) % 3:
        raise OpenPoseError(
            f"{path}: people[{i}].pose_keypoints_2d has {len(kp)} numbers, "
            "not a multiple of 3 (x, y, confidence)"
        )
    if not set(map(type, kp)) <= _NUMBERS:  # the scan in C; the error finds the culprit
        bad = next(v for v in kp if type(v) not in _NUMBERS)
        raise OpenPoseError(
            f"{path}: people[{i}].pose_keypoints_2d has {repr(bad)[:40]}, not a number"
        )
    try:
        arr = np.asarray(kp, dtype=np.float64).reshape(-1, 3)
    except OverflowError:  # an integer beyond float range
        arr = np.full((1, 3), np.inf)
    if not np.isfinite(arr).all():
        raise OpenPoseError(f"{path}: people[{i}].pose_keypoints_2d has a non-finite value")
    if np.abs(arr).max() > MAX_COORDINATE:
        raise OpenPoseError(
            f"{path}: people[{i}].pose_keypoints_2d has a value beyond {MAX_COORDINATE:g} "
            f"({np.abs(arr).max():g}), not a pixel coordinate or confidence"
        )
    return arr


class Frame(NamedTuple):
    """One OpenPose frame file: its people ``(K, 3)`` each, their ``person_id`` (-1 where the
    file gives none, or OpenPose's ``[-1]``) and the layout the file records
    (``keypoint_layout``, written by tensorpose; ``None``: none) and frame rate (``fps``,
    written by tensorpose when it knows it; ``None``: none or not a frame rate)."""

    people: list[np.ndarray]
    ids: list[int]
    layout: str | None
    fps: float | None = None


def _identity(pid: object) -> int:
    """A person's ``person_id`` (a list of one integer >= 0, as tensorpose writes it); -1 for
    anything else (OpenPose writes ``[-1]``: people are not identified)."""
    if isinstance(pid, list) and len(pid) == 1:
        pid = pid[0]
    ok = isinstance(pid, int) and not isinstance(pid, bool) and 0 <= pid < 2**31
    return pid if ok else -1


def _parse_frame(path: str | Path) -> Frame:
    text = read_bytes(path, MAX_FRAME_BYTES, "OpenPose frame file")
    try:
        data = json.loads(text.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise OpenPoseError(f"{path}: not UTF-8 text: {e}") from None
    except ValueError as e:  # JSONDecodeError, or an integer with too many digits
        raise OpenPoseError(f"{path}: malformed JSON: {e}") from None
    except RecursionError:
        raise OpenPoseError(f"{path}: malformed JSON: nested too deeply") from None
    if not isinstance(data, dict) or not isinstance(data.get("people"), list):
        raise OpenPoseError(f"{path}: expected an object with a 'people' list")
    people, ids = [], []
    for i, person in enumerate(data["people"]):
        kp = person.get("pose_keypoints_2d") if isinstance(person, dict) else None
        arr = _person(path, i, kp)
        if arr is not None:
            people.append(arr)
            ids.append(_identity(person.get("person_id")))
    layout = data.get("keypoint_layout")
    fps = data.get("fps")
    fps = float(fps) if type(fps) in _NUMBERS and 0.1 <= fps <= 10_000 else None
    return Frame(people, ids, layout if layout in LAYOUTS else None, fps)


def recorded_fps(files: Sequence[str | Path]) -> float | None:
    """The ``"fps"`` the first of ``files`` records (:func:`write_openpose`; OpenPose: none)."""
    return _parse_frame(files[0]).fps if files else None


def found(keypoints: torch.Tensor | np.ndarray):
    """``(..., K)`` bool: a keypoint is found when its confidence is positive, its ``x, y`` are
    finite and not ``(0, 0)`` (OpenPose's "not found", whatever the confidence)."""
    lib = torch if isinstance(keypoints, torch.Tensor) else np
    x, y, c = keypoints[..., 0], keypoints[..., 1], keypoints[..., 2]
    return (c > 0) & lib.isfinite(x) & lib.isfinite(y) & ~((x == 0) & (y == 0))


def first_person(files: Sequence[str | Path]) -> tuple[int, Path] | None:
    """The keypoint count of the first person listed in ``files`` (time order) and its file;
    ``None`` when no file lists anyone. Reads up to that file."""
    for path in files:  # stops at the first file that lists a person
        people = _parse_frame(path).people
        if people:
            return people[0].shape[0], Path(path)
    return None


class FrameFiles(NamedTuple):
    """What :func:`read_openpose_files` returns.

    Attributes:
        frames: per file ``(P_t, K, 3)`` the people with a found keypoint (values as in the
            file).
        ignored: people without any found keypoint (left out).
        ids: per file the ``person_id`` of those people, when every file records its layout
            (written by :func:`write_openpose`, whose ``person_id`` is -1 unless the people
            are tracks) and every person has one (>= 0, unique within a file: e.g. the tracks
            ``smooth`` writes); else ``None``. OpenPose's own ``[-1]``, or ids from files
            without a recorded layout, are not taken as identities.
        layout: the layout every file records (``keypoint_layout``), else ``None``.
    """

    frames: list[np.ndarray]
    ignored: int
    ids: list[np.ndarray] | None
    layout: str | None


def read_openpose_files(
    files: Sequence[str | Path], keypoints: int, where: str, progress: str | None = None
) -> FrameFiles:
    """Parse OpenPose frame files whose people have ``keypoints`` keypoints each.

    Args:
        keypoints: ``K`` every person must have; where: what set it (named in the error).
        progress: a progress bar's description (``None``: no bar).

    Raises:
        OpenPoseError: a malformed file, a person without ``K`` keypoints (the file named).
    """
    from tqdm import tqdm

    bar = files if progress is None else tqdm(files, desc=progress, unit="file", leave=False)
    fast = _read_whole(bar, keypoints)
    return fast if fast is not None else _read_one_by_one(files, keypoints, where)


def _read_one_by_one(files: Sequence[str | Path], K: int, where: str) -> FrameFiles:
    """:func:`read_openpose_files`, each file parsed and checked on its own: the first file
    that is wrong is named (the reference :func:`_read_whole` must equal)."""
    frames, ids, layouts, ignored = [], [], set(), 0
    identified = True
    for path in files:  # one parse per file
        frame = _parse_frame(path)
        for p in frame.people:
            if p.shape[0] != K:
                raise OpenPoseError(
                    f"{path}: a person has {p.shape[0]} keypoints, expected {K} (as in {where})"
                )
        keep = found(np.stack(frame.people)).any(-1).tolist() if frame.people else []
        kept = [p for p, k in zip(frame.people, keep, strict=True) if k]
        ignored += len(frame.people) - len(kept)
        frames.append(np.stack(kept) if kept else np.zeros((0, K, 3)))
        layouts.add(frame.layout)
        if identified:
            pid = np.array([i for i, k in zip(frame.ids, keep, strict=True) if k], np.int64)
            identified = (frame.layout is not None and bool((pid >= 0).all())
                          and len(np.unique(pid)) == len(pid))  # fmt: skip
            ids.append(pid)
    layout = layouts.pop() if len(layouts) == 1 else None
    if layout is not None and len(LAYOUTS[layout]) != K:
        layout = None
    return FrameFiles(frames, ignored, ids if identified else None, layout)


def _read_whole(files: Sequence[str | Path], K: int) -> FrameFiles | None:
    """:func:`read_openpose_files` of well-formed files, the same result with less work per
    file: every person's numbers gathered into one list, then type-checked, converted and
    bounded at once. ``None`` at anything unusual (a bad file, a person of another size):
    the file-by-file reader then finds and names it."""
    numbers, counts, pids, layouts, width = [], [], [], set(), 3 * K
    try:
        for path in files:  # one file at a time (read, parsed)
            raw = read_regular(path, MAX_FRAME_BYTES)
            if raw is None:
                return None
            data = json.loads(raw.decode("utf-8"))
            listed = data["people"]
            if type(listed) is not list:
                return None
            n = 0
            for person in listed:  # the people of a frame (a handful)
                kp = person["pose_keypoints_2d"]
                if type(kp) is not list or len(kp) != width:
                    if type(kp) is list and not kp:
                        continue  # no body keypoints (e.g. a hand only): skipped, as there
                    return None
                numbers += kp
                pids.append(person.get("person_id"))
                n += 1
            counts.append(n)
            layout = data.get("keypoint_layout")
            layouts.add(layout if layout in LAYOUTS else None)
        if not files or not set(map(type, numbers)) <= _NUMBERS:
            return None
        arr = np.array(numbers, dtype=np.float64).reshape(-1, K, 3)
    except Exception:  # anything (OverflowError, a non-dict, broken JSON): file by file
        return None
    if not (np.abs(arr) <= MAX_COORDINATE).all():  # NaN, inf or too large
        return None
    keep = found(arr).any(-1)
    ends = np.cumsum(np.bincount(np.repeat(np.arange(len(counts)), counts)[keep],
                                 minlength=len(counts))).tolist()  # fmt: skip
    kept = arr[keep]
    frames = [kept[a:b] for a, b in zip([0, *ends[:-1]], ends, strict=True)]
    ids = None
    if None not in layouts:  # every file records a layout: its person_ids may be tracks
        pid = np.array([_identity(p) for p in pids], np.int64)[keep]
        ids = [pid[a:b] for a, b in zip([0, *ends[:-1]], ends, strict=True)]
        if not all((i >= 0).all() and len(np.unique(i)) == len(i) for i in ids):
            ids = None
    layout = layouts.pop() if len(layouts) == 1 else None
    if layout is not None and len(LAYOUTS[layout]) != K:
        layout = None
    return FrameFiles(frames, int((~keep).sum()), ids, layout)


def openpose_evidence(frames: Sequence[np.ndarray], keypoints: int) -> tuple[int, dict]:
    """:func:`tensorpose.layouts.layout_evidence` of OpenPose detections ``(P_t, K, 3)`` (joints
    not found count as confidence 0)."""
    return cameras_evidence([frames], keypoints)[0]


def cameras_evidence(cameras: Sequence[Sequence[np.ndarray]], keypoints: int) -> list:
    """:func:`openpose_evidence` of each camera's frames, measured at once."""
    pieces = [np.concatenate([np.zeros((0, keypoints, 3)), *frames]) for frames in cameras]
    everyone = np.concatenate(pieces)
    everyone[..., 2] = np.where(found(everyone), everyone[..., 2], 0.0)
    return split_evidence(everyone, [len(p) for p in pieces])


def read_openpose_detections(
    folder: str | os.PathLike, layout: str | None = None, progress: bool = False
) -> tuple[list[np.ndarray], list[Path], str, str, int, list[np.ndarray] | None]:
    """:func:`read_openpose_frames` plus why that layout (given, recorded in the files, or the
    detection's evidence), the count of people ignored for having no found keypoint and the
    people's identities when the files give them (:class:`FrameFiles`); ``progress``: a bar
    while reading folders of 300 files or more."""
    folder = Path(folder)
    if not folder.exists():
        raise MissingFileError(f"OpenPose folder not found: {folder}")
    if not folder.is_dir():
        raise OpenPoseError(f"{folder}: is a file, expected a folder of per-frame OpenPose JSON")
    files = frame_files(folder)
    if not files:
        raise OpenPoseError(f"{folder}: no OpenPose .json files")
    if layout is not None:
        check_layout(layout)
        K, where = len(LAYOUTS[layout]), f"layout {layout}"
    else:
        first = first_person(files)
        if first is None:
            raise OpenPoseError(f"{folder}: no person in any frame; pass --layout to read it")
        K, where = first[0], f"{first[1]}"
    bar = f"reading {folder.name}" if progress and len(files) >= 300 else None
    frames, ignored, ids, recorded = read_openpose_files(files, K, where, bar)
    if layout is not None:
        reason = f"{layout} as given"
    elif recorded is not None:
        layout, reason = recorded, f"{recorded} as recorded in the files (keypoint_layout)"
    else:
        try:
            layout, reason = layout_from_evidence(openpose_evidence(frames, K))
        except ValueError as e:
            raise OpenPoseError(f"{where}: {e}") from None
    return frames, files, layout, reason, ignored, ids


def read_openpose_frames(
    folder: str | os.PathLike, layout: str | None = None
) -> tuple[list[np.ndarray], list[Path], str]:
    """Parse every ``*.json`` file in ``folder`` (natural name order = time order).

    People without any found keypoint are dropped; values are otherwise as in the files.

    Returns:
        per frame an array ``(P_t, K, 3)`` of the raw values, the files, and the layout
        (given, or detected: :func:`tensorpose.layouts.detect_layout`).

    Raises:
        FileNotFoundError: ``folder`` does not exist.
        ValueError: an unknown ``layout``.
        OpenPoseError: ``folder`` is a file, no JSON files, a malformed file, or keypoint counts
            that differ between people/frames or do not fit ``layout`` (the message names the
            file).
    """
    frames, files, layout, *_ = read_openpose_detections(folder, layout)
    return frames, files, layout


def _cost(last: np.ndarray, xy: np.ndarray, max_distance: float | None) -> np.ndarray:
    """``(A, P)`` mean pixel distance between tracks' last seen joints ``last (A, K, 2)`` and
    people ``xy (P, K, 2)`` over the joints found in both (NaN: not found); ``inf`` where none
    is common or beyond the gate (``max_distance``, or half the track's bounding-box diagonal).
    """
    d = np.sqrt(((last[:, None] - xy[None]) ** 2).sum(-1))  # (A, P, K)
    common = ~np.isnan(d)
    n = common.sum(-1)
    cost = np.where(common, d, 0.0).sum(-1) / np.maximum(n, 1)
    if max_distance is None:
        lo = np.where(np.isnan(last), np.inf, last).min(1)
        hi = np.where(np.isnan(last), -np.inf, last).max(1)
        gate = 0.5 * np.sqrt(((hi - lo) ** 2).sum(-1, keepdims=True))
    else:
        gate = max_distance
    return np.where((n > 0) & (cost <= gate), cost, np.inf)


class LinkedTracks(NamedTuple):
    """What :func:`link_detections` returns.

    Attributes:
        keypoints: ``(T, P, K, 3)`` float64, ``P`` = number of tracks, NaN where a track is
            absent.
        dropped_detections: people with some but fewer than ``min_keypoints`` found keypoints
            that matched no track (they started none).
        retired_tracks: tracks that left the matching after ``max_gap`` frames unseen (they stay
            in ``keypoints``; a person seen again later starts a new track).
    """

    keypoints: torch.Tensor
    dropped_detections: int
    retired_tracks: int


def _check_frames(frames: Sequence[torch.Tensor | np.ndarray]) -> tuple[torch.Tensor, list[int]]:
    """All detections as one ``(N, K, 3)`` float64 tensor and the count of each frame."""
    T = len(frames)
    if T == 0:
        raise ValueError("frames must hold at least one frame")
    K = frames[0].shape[1] if frames[0].ndim == 3 else -1
    bad = [t for t, f in enumerate(frames) if f.ndim != 3 or tuple(f.shape[1:]) != (K, 3)]
    if bad:
        t = bad[0]
        want = f"(P, {K}, 3)" if K >= 0 else "(P, K, 3)"
        raise ValueError(f"frames[{t}] must have shape {want}, got {tuple(frames[t].shape)}")
    flat = torch.cat([
        f.to(torch.float64) if isinstance(f, torch.Tensor)
        else torch.from_numpy(np.ascontiguousarray(f, dtype=np.float64))
        for f in frames
    ])  # fmt: skip
    return flat, [f.shape[0] for f in frames]


def _check_link_args(max_distance: object, max_gap: object, min_keypoints: object) -> None:
    if max_distance is not None and not max_distance > 0:
        raise ValueError(f"max_distance must be positive or None, got {max_distance}")
    if max_gap is not None and not (isinstance(max_gap, int) and max_gap >= 0):
        raise ValueError(f"max_gap must be a non-negative int or None, got {max_gap!r}")
    if not (isinstance(min_keypoints, int) and min_keypoints >= 1):
        raise ValueError(f"min_keypoints must be an int >= 1, got {min_keypoints!r}")


def _scatter(flat: torch.Tensor, counts: list[int], track_ids: torch.Tensor, n_tracks: int):
    """``(T, n_tracks, K, 3)`` from the detections ``flat (N, K, 3)`` of frames of ``counts``
    people and the track of each (``-1``: none); NaN elsewhere.

    Raises:
        ValueError: the result over :data:`MAX_TRACKS_BYTES` (the limit named).
    """
    T, K = len(counts), flat.shape[1]
    need = T * n_tracks * K * 3 * 8
    if need > MAX_TRACKS_BYTES:
        raise InputError(
            f"{n_tracks} tracks over {T} frames need {need / 2**30:.1f} GiB as (T, P, K, 3) "
            f"float64, over the {_size(MAX_TRACKS_BYTES)} limit for linked tracks; read "
            "shorter pieces of the recording, or pass a max_distance that links more people"
        )
    out = torch.full((T, n_tracks, K, 3), float("nan"), dtype=torch.float64)
    frame_of = torch.repeat_interleave(torch.arange(T), torch.tensor(counts, dtype=torch.long))
    has = track_ids >= 0
    out[frame_of[has], track_ids[has]] = flat[has]  # one scatter: a track is once per frame
    return out


def link_detections(
    frames: Sequence[torch.Tensor | np.ndarray],
    max_distance: float | None = None,
    max_gap: int | None = MAX_GAP,
    min_keypoints: int = MIN_TRACK_KEYPOINTS,
) -> LinkedTracks:
    """Link per-frame detections into tracks (:func:`link_tracks`), with what was left out.

    Frame by frame (a loop over time), active tracks (seen in the last ``max_gap`` frames) are
    matched to the frame's people by a Hungarian assignment (:func:`linear_assignment`) on the
    gated mean pixel distance (:func:`_cost`). Unmatched people with ``min_keypoints`` or more
    found keypoints start tracks; those with fewer (but some: a detector's false positive, whose
    gate is zero or tiny) are dropped and counted, else each would start a track of its own
    and one such detection per frame would give ``(T, T, K, 3)``. Retiring unseen tracks keeps
    the cost per frame bounded by the people of the last ``max_gap`` frames. Memory: the
    detections once more plus the result, refused beyond :data:`MAX_TRACKS_BYTES`.

    Args:
        frames, max_distance: as for :func:`link_tracks`.
        max_gap: frames a track may go unseen and still be matched (``None``: no limit).
        min_keypoints: found keypoints a person needs to start a track (``1``: everyone).

    Raises:
        ValueError: bad arguments or frame shapes; a result over :data:`MAX_TRACKS_BYTES`.
    """
    _check_link_args(max_distance, max_gap, min_keypoints)
    flat, counts = _check_frames(frames)
    T, K = len(counts), flat.shape[1]
    ends = np.cumsum(counts).tolist()
    # What does not depend on the tracks, for all detections at once (numpy in the loop below:
    # its per-call cost on these small arrays is a fraction of torch's).
    every = flat.numpy()
    seen_all = found(every)  # (N, K)
    xy_all = np.where(seen_all[..., None], every[..., :2], np.nan)  # (N, K, 2)
    n_found = seen_all.sum(-1)
    starts = n_found >= min_keypoints  # people with too little found start no track
    few_all = (n_found > 0) & ~starts
    track_ids = np.full(len(every), -1, dtype=np.int64)  # per detection (-1: none)
    ids = np.zeros(0, dtype=np.int64)  # active tracks: their number,
    last = np.zeros((0, K, 2))  # last seen xy per joint,
    last_seen = np.zeros(0, dtype=np.int64)  # and the last frame they were seen in
    n_tracks = retired = dropped = 0
    # A loop over frames (time): each frame's matching depends on the tracks the earlier ones
    # left; all active tracks x people pairs of a frame are one batched step.
    for t in range(T):
        o0, o1 = ends[t] - counts[t], ends[t]
        if max_gap is not None and len(ids):
            active = last_seen >= t - 1 - max_gap
            if not active.all():
                retired += len(ids) - int(active.sum())
                ids, last, last_seen = ids[active], last[active], last_seen[active]
        if o0 == o1:
            continue
        seen, xy = seen_all[o0:o1], xy_all[o0:o1]  # (P_t, K), (P_t, K, 2)
        rows = cols = np.zeros(0, dtype=np.int64)
        if len(ids):
            rows, cols = linear_assignment(_cost(last, xy, max_distance))
        new = starts[o0:o1].copy()
        new[cols] = False
        few = few_all[o0:o1].copy()
        few[cols] = False
        dropped += int(few.sum())
        new_people = np.flatnonzero(new)
        m = len(new_people)
        slot = np.full(o1 - o0, -1, dtype=np.int64)  # active slot of each person
        slot[cols] = rows
        if m:
            slot[new_people] = np.arange(m) + len(ids)
            ids = np.concatenate([ids, np.arange(n_tracks, n_tracks + m)])
            last = np.concatenate([last, np.full((m, K, 2), np.nan)])
            last_seen = np.concatenate([last_seen, np.full(m, t)])
            n_tracks += m
        has = slot >= 0
        s = slot[has]
        last[s] = np.where(seen[has][..., None], xy[has], last[s])
        last_seen[s] = t
        if len(ids):
            track_ids[o0:o1] = np.where(has, ids[np.maximum(slot, 0)], -1)
    out = _scatter(flat, counts, torch.from_numpy(track_ids), n_tracks)
    return LinkedTracks(out, dropped, retired)


def identified_tracks(frames: Sequence[np.ndarray], ids: Sequence[np.ndarray]) -> torch.Tensor:
    """``(T, P, K, 3)`` tracks of detections whose identities the files give (``ids``: per
    frame the track of each person, e.g. the ``person_id`` that ``smooth`` writes): track ``p``
    is the ``p``-th smallest identity; NaN where a track is absent.

    Raises:
        ValueError: the result over :data:`MAX_TRACKS_BYTES` (the limit named).
    """
    flat, counts = _check_frames(frames)
    every = np.concatenate([np.zeros(0, np.int64), *ids])
    _, track = np.unique(every, return_inverse=True)
    n = int(track.max(initial=-1)) + 1
    return _scatter(flat, counts, torch.from_numpy(track.reshape(-1)), n)


def link_tracks(
    frames: Sequence[torch.Tensor | np.ndarray],
    max_distance: float | None = None,
    max_gap: int | None = MAX_GAP,
    min_keypoints: int = MIN_TRACK_KEYPOINTS,
) -> torch.Tensor:
    """Link per-frame detections into tracks: :func:`link_detections` without its counts.

    Each track keeps the last seen position of each of its joints; a new frame's people are
    matched to the active tracks by a Hungarian assignment on the mean pixel distance over the
    joints found in both, gated; unmatched people with at least ``min_keypoints``
    (:data:`MIN_TRACK_KEYPOINTS`) found keypoints start new tracks; a track unseen for more than
    ``max_gap`` (:data:`MAX_GAP`) frames is no longer matched.

    Args:
        frames: per frame ``(P_t, K, 3)`` with NaN, confidence 0 or ``(0, 0)`` for missing
            joints.
        max_distance: gate in pixels; ``None`` gates each track at half the diagonal of the
            bounding box of its last seen joints (half a body size).
        max_gap, min_keypoints: see :func:`link_detections`.

    Returns:
        ``(T, P, K, 3)`` float64, ``P`` = number of tracks, NaN where a track is absent.
    """
    return link_detections(frames, max_distance, max_gap, min_keypoints).keypoints


def write_openpose(
    keypoints: torch.Tensor,
    folder: str | os.PathLike,
    names: Sequence[str],
    layout: str | None = None,
    identities: bool = False,
    fps: float | None = None,
    times_s: Sequence[float] | None = None,
) -> list[Path]:
    """Write tracks as OpenPose per-frame JSON (one file per frame, people in track order;
    ``person_id = [track]`` with ``identities`` (the tracks are people followed over time, and
    :func:`read_openpose_files` reads them back as such), else OpenPose's ``[-1]``; the
    ``layout``, when given, as ``keypoint_layout``: the readers take it over detecting one;
    ``fps``, when known: ``triangulate``, ``lift`` and ``smooth`` take it without ``--fps``;
    ``times_s``, each frame's time stamp in seconds as ``time_s``: a video's, whose frame rate
    may vary).

    A track is written in a frame when any of its confidences there is finite and > 0. NaN
    coordinates are written as 0 and NaN confidences as 0 (OpenPose's "not detected"), so a
    joint that a filter predicted through a gap keeps its predicted ``x, y`` with confidence 0.

    Args:
        keypoints: ``(T, P, K, 3)``.
        folder: output folder (created).
        names: ``T`` file names (e.g. the input files' names).
    """
    if keypoints.dim() != 4 or keypoints.shape[-1] != 3:
        raise ValueError(f"keypoints must have shape (T, P, K, 3), got {tuple(keypoints.shape)}")
    T = keypoints.shape[0]
    if len(names) != T:
        raise ValueError(f"names must hold T={T} file names, got {len(names)}")
    if layout is not None:
        check_layout(layout, keypoints.shape[2])
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    kp = keypoints.detach().to("cpu", torch.float64)
    present = (kp[..., 2] > 0).any(-1)  # (T, P); NaN > 0 is False
    flat = torch.nan_to_num(kp, nan=0.0).reshape(T, kp.shape[1], -1).numpy()
    present = present.numpy()
    paths = []
    for t in range(T):  # one file per frame
        people = [
            {
                "person_id": [int(p) if identities else -1],
                "pose_keypoints_2d": [round(float(v), 6) for v in flat[t, p]],
                "face_keypoints_2d": [],
                "hand_left_keypoints_2d": [],
                "hand_right_keypoints_2d": [],
                "pose_keypoints_3d": [],
                "face_keypoints_3d": [],
                "hand_left_keypoints_3d": [],
                "hand_right_keypoints_3d": [],
            }
            for p in np.flatnonzero(present[t])
        ]
        path = folder / names[t]
        with open(path, "w", encoding="utf-8") as f:
            head = ({"version": 1.3} | ({"keypoint_layout": layout} if layout else {})
                    | ({"fps": float(fps)} if fps is not None else {})
                    | ({"time_s": round(float(times_s[t]), 6)} if times_s is not None
                       else {}))  # fmt: skip
            json.dump(head | {"people": people}, f)
        paths.append(path)
    return paths
