"""OpenPose per-frame JSON folders -> keypoint tracks ``(T, P, K, 3)``, and back.

OpenPose writes one JSON file per frame with a list of ``people``, each with a flat
``pose_keypoints_2d = [x0, y0, c0, x1, y1, c1, ...]`` (``0, 0, 0`` for a joint it did not
find). People are not identified across frames: :func:`link_tracks` links them into tracks
(:func:`tensorpose.io.tracks.read_tracks` reads a folder into linked tracks).

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
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from ..layouts import COCO17_INDEX, LAYOUTS, check_layout, detect_layout
from .files import read_bytes

__all__ = [
    "COCO17_INDEX",
    "LAYOUTS",
    "OpenPoseError",
    "bundled_tracks",
    "found",
    "frame_files",
    "link_tracks",
    "openpose_folders",
    "read_openpose_detections",
    "read_openpose_frames",
    "write_openpose",
]

BUNDLED_FPS = 60.0
"""Frame rate of the bundled tracks (the pose2sim demo session is configured at 60 fps)."""

MAX_FRAME_BYTES = 64 << 20
"""Largest OpenPose frame file read (64 MiB)."""

MAX_COORDINATE = 1e7
"""Largest accepted ``|x|``, ``|y|`` or confidence in a file (no image is that large)."""


class OpenPoseError(ValueError):
    """An OpenPose folder or file could not be read; the message names the file."""


def bundled_tracks() -> list[Path]:
    """The four camera folders of real OpenPose BODY_25B tracks shipped with the package
    (pose2sim demo balancing trial, 100 frames each at 60 fps; see assets/ATTRIBUTION.md)."""
    root = Path(__file__).resolve().parent.parent / "assets" / "tracks" / "openpose_body25b"
    return sorted(p for p in root.glob("cam*_json") if p.is_dir())


def _frame_key(path: Path) -> tuple:
    """Natural sort: numbers in the name compare as numbers (``f9`` before ``f10``)."""
    return tuple(int(s) if s.isdigit() else s for s in re.split(r"(\d+)", path.name))


def frame_files(folder: str | os.PathLike) -> list[Path]:
    """The regular ``*.json`` files of ``folder`` in natural name order (= time order);
    subfolders and other non-files with such names are skipped."""
    return sorted((p for p in Path(folder).glob("*.json") if p.is_file()), key=_frame_key)


def openpose_folders(path: str | os.PathLike) -> list[Path]:
    """The OpenPose folders under ``path``: ``[path]`` when it holds frame files, else its
    subfolders that do (e.g. one per camera, as the bundled tracks), in name order.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        OpenPoseError: ``path`` is a file, or neither it nor a subfolder holds ``*.json`` files.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"OpenPose folder not found: {path}")
    if not path.is_dir():
        raise OpenPoseError(f"{path}: is a file, expected a folder of per-frame OpenPose JSON")
    if frame_files(path):
        return [path]
    subs = sorted(d for d in path.iterdir() if d.is_dir() and frame_files(d))
    if not subs:
        raise OpenPoseError(f"{path}: no OpenPose .json files in it or in its subfolders")
    return subs


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
    bad = next((v for v in kp if type(v) not in (int, float)), None)
    if bad is not None:
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


def _parse_frame(path: Path) -> list[np.ndarray]:
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
    people = []
    for i, person in enumerate(data["people"]):
        kp = person.get("pose_keypoints_2d") if isinstance(person, dict) else None
        arr = _person(path, i, kp)
        if arr is not None:
            people.append(arr)
    return people


def found(keypoints: torch.Tensor | np.ndarray):
    """``(..., K)`` bool: a keypoint is found when its confidence is positive, its ``x, y`` are
    finite and not ``(0, 0)`` (OpenPose's "not found", whatever the confidence)."""
    lib = torch if isinstance(keypoints, torch.Tensor) else np
    x, y, c = keypoints[..., 0], keypoints[..., 1], keypoints[..., 2]
    return (c > 0) & lib.isfinite(x) & lib.isfinite(y) & ~((x == 0) & (y == 0))


def read_openpose_detections(
    folder: str | os.PathLike, layout: str | None = None, progress: bool = False
) -> tuple[list[np.ndarray], list[Path], str, str, int]:
    """:func:`read_openpose_frames` plus why that layout (given, or the detection's evidence)
    and the count of people ignored for having no found keypoint; ``progress``: a bar while
    reading folders of 300 files or more."""
    from tqdm import tqdm

    folder = Path(folder)
    if not folder.exists():
        raise FileNotFoundError(f"OpenPose folder not found: {folder}")
    if not folder.is_dir():
        raise OpenPoseError(f"{folder}: is a file, expected a folder of per-frame OpenPose JSON")
    files = frame_files(folder)
    if not files:
        raise OpenPoseError(f"{folder}: no OpenPose .json files")
    if layout is not None:
        check_layout(layout)
    K = len(LAYOUTS[layout]) if layout is not None else None
    first_file = None
    frames: list[np.ndarray | None] = []
    ignored = 0
    long = progress and len(files) >= 300
    for path in tqdm(files, desc=f"reading {folder.name}", unit="file", disable=not long,
                     leave=False):  # fmt: skip  # one parse per file
        people = _parse_frame(path)
        for p in people:
            if K is None:
                K, first_file = p.shape[0], path
            if p.shape[0] != K:
                where = f"{first_file}" if first_file is not None else f"layout {layout}"
                raise OpenPoseError(
                    f"{path}: a person has {p.shape[0]} keypoints, expected {K} (as in {where})"
                )
        kept = [p for p in people if found(p).any()]
        ignored += len(people) - len(kept)
        frames.append(np.stack(kept) if kept else None)
    if K is None:
        raise OpenPoseError(f"{folder}: no person in any frame; pass --layout to read it")
    frames = [f if f is not None else np.zeros((0, K, 3)) for f in frames]
    if layout is not None:
        reason = f"{layout} as given"
    else:
        everyone = np.concatenate(frames)
        everyone[..., 2] = np.where(found(everyone), everyone[..., 2], 0.0)
        try:
            layout, reason = detect_layout(everyone)
        except ValueError as e:
            raise OpenPoseError(f"{first_file}: {e}") from None
    return frames, files, layout, reason, ignored


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
    frames, files, layout, _, _ = read_openpose_detections(folder, layout)
    return frames, files, layout


def _assign(cost: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Minimum-cost matching of rows to columns of ``cost (A, B)`` (``inf`` = forbidden).

    Uses scipy's Hungarian solver (``linear_sum_assignment``) when scipy is installed; otherwise
    a greedy fallback that repeatedly takes the globally cheapest remaining pair (optimal
    whenever each person's nearest track is mutual, as for people who stay apart). Returns
    matched ``(rows, cols)``, forbidden pairs dropped."""
    A, B = cost.shape
    if A == 0 or B == 0:
        empty = torch.zeros(0, dtype=torch.long)
        return empty, empty
    finite = torch.isfinite(cost)
    try:
        from scipy.optimize import linear_sum_assignment
    except ImportError:  # greedy fallback: one pick per match, each a vectorised argmin
        c = cost.clone()
        rows, cols = [], []
        for _ in range(min(A, B)):  # loop over matches (at most the number of people)
            flat = int(torch.argmin(c))
            i, j = divmod(flat, B)
            if not torch.isfinite(c[i, j]):
                break
            rows.append(i)
            cols.append(j)
            c[i, :] = float("inf")
            c[:, j] = float("inf")
        return torch.tensor(rows, dtype=torch.long), torch.tensor(cols, dtype=torch.long)
    big = float(cost[finite].max()) * 2 + 1 if bool(finite.any()) else 1.0
    r, c = linear_sum_assignment(torch.where(finite, cost, big).numpy())
    r, c = torch.as_tensor(r, dtype=torch.long), torch.as_tensor(c, dtype=torch.long)
    keep = finite[r, c]
    return r[keep], c[keep]


def link_tracks(
    frames: Sequence[torch.Tensor | np.ndarray], max_distance: float | None = None
) -> torch.Tensor:
    """Link per-frame detections into tracks.

    Frame by frame (a loop over time), each existing track keeps the last seen position of each
    of its joints. The cost between every track and every person of the new frame is the mean
    pixel distance over the joints found in both (one batched ``(tracks, people, K)``
    computation); pairs with no common joint, or farther apart than the gate, are forbidden.
    The matching is a Hungarian assignment (:func:`_assign`); unmatched people start new tracks.
    People without any found keypoint (see :func:`found`) get no track.

    Args:
        frames: per frame ``(P_t, K, 3)`` with NaN, confidence 0 or ``(0, 0)`` for missing
            joints.
        max_distance: gate in pixels; ``None`` gates each track at half the diagonal of the
            bounding box of its last seen joints (half a body size).

    Returns:
        ``(T, P, K, 3)`` float64, ``P`` = number of tracks, NaN where a track is absent.
    """
    if max_distance is not None and not max_distance > 0:
        raise ValueError(f"max_distance must be positive or None, got {max_distance}")
    T = len(frames)
    if T == 0:
        raise ValueError("frames must hold at least one frame")
    frames = [
        f.to(torch.float64)
        if isinstance(f, torch.Tensor)
        else torch.from_numpy(np.ascontiguousarray(f, dtype=np.float64))
        for f in frames
    ]
    K = frames[0].shape[1] if frames[0].dim() == 3 else -1
    bad = [t for t, f in enumerate(frames) if f.dim() != 3 or f.shape[1:] != (K, 3)]
    if bad:
        t = bad[0]
        want = f"(P, {K}, 3)" if K >= 0 else "(P, K, 3)"
        raise ValueError(f"frames[{t}] must have shape {want}, got {tuple(frames[t].shape)}")
    last = torch.zeros(0, K, 2, dtype=torch.float64)  # last seen xy per track and joint
    assigned: list[torch.Tensor] = []  # per frame, the track of each person (-1: none)
    # A loop over frames (time); all tracks x people pairs of a frame are one batched step.
    for f in frames:
        seen = found(f)  # (P_t, K)
        xy = f[..., :2].masked_fill(~seen[..., None], float("nan"))  # (P_t, K, 2)
        d = torch.linalg.vector_norm(last[:, None] - xy[None], dim=-1)  # (A, P_t, K)
        common = ~torch.isnan(d)
        n = common.sum(-1)
        cost = torch.where(common, d, 0.0).sum(-1) / n.clamp(min=1)
        if max_distance is None:
            lo = torch.where(torch.isnan(last), float("inf"), last).amin(1)
            hi = torch.where(torch.isnan(last), float("-inf"), last).amax(1)
            gate = 0.5 * torch.linalg.vector_norm(hi - lo, dim=-1, keepdim=True)
        else:
            gate = torch.tensor(max_distance, dtype=torch.float64)
        cost = torch.where((n > 0) & (cost <= gate), cost, float("inf"))
        rows, cols = _assign(cost)
        new = seen.any(-1)  # people with nothing found start no track
        new[cols] = False
        new_people = new.nonzero().squeeze(-1)
        track_of = torch.full((xy.shape[0],), -1, dtype=torch.long)
        track_of[cols] = rows
        track_of[new_people] = torch.arange(len(new_people)) + last.shape[0]
        last = torch.cat([last, torch.full((len(new_people), K, 2), float("nan"))])
        has = track_of >= 0
        upd = seen[has, :, None]
        last[track_of[has]] = torch.where(upd, xy[has], last[track_of[has]])
        assigned.append(track_of)
    P = last.shape[0]
    out = torch.full((T, P, K, 3), float("nan"), dtype=torch.float64)
    for t, track_of in enumerate(assigned):  # loop over frames (time): scatter
        has = track_of >= 0
        out[t, track_of[has]] = frames[t][has]
    return out


def write_openpose(
    keypoints: torch.Tensor, folder: str | os.PathLike, names: Sequence[str]
) -> list[Path]:
    """Write tracks as OpenPose per-frame JSON (one file per frame, people in track order,
    ``person_id = [track]``).

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
                "person_id": [int(p)],
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
            json.dump({"version": 1.3, "people": people}, f)
        paths.append(path)
    return paths
