"""The one reader of 2D keypoint tracks: an OpenPose JSON folder, a COCO results JSON or an
``.npz`` -> per-frame detections (:func:`read_detections`), linked tracks (:func:`read_tracks`)
or one person (:func:`read_person`). ``lift``, ``smooth``, ``triangulate`` and ``eval-wild``
read their inputs through it.

- OpenPose folder: one JSON per frame (:mod:`tensorpose.io.openpose`).
- COCO results JSON: a list of ``{image_id, keypoints, score}`` (or a COCO file's
  ``annotations``); ``image_id`` order = frame order.
- ``.npz``: ``keypoints (T, K, 2|3)`` of one person (NaN = missing; confidence 1 where the
  file has none), optional ``fps``, ``width``, ``height``; a regular file only (no FIFO or
  device), each array real numbers (no complex, boolean or object) of at most
  :data:`MAX_NPZ_ARRAY_BYTES`, both checked on the array's header before it is decompressed.

Linking (OpenPose folders, COCO results) leaves out detections with fewer than
:data:`~tensorpose.io.openpose.MIN_TRACK_KEYPOINTS` found keypoints that match no track, and
stops linking a track after :data:`~tensorpose.io.openpose.MAX_GAP` frames unseen
(:attr:`Tracks.dropped_detections`, :attr:`Tracks.retired_tracks` count them): memory and time
grow linearly in frames and people.

The layout is given or detected from the keypoint count and geometry
(:func:`tensorpose.layouts.detect_layout`); every result says why.
"""

from __future__ import annotations

import json
import math
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..errors import InputError, MissingFileError
from ..layouts import COCO17_INDEX, LAYOUTS, check_layout, detect_layout, to_h36m17
from .files import MAX_FILE_BYTES, check_regular_file, read_text
from .openpose import (
    OpenPoseError,
    found,
    identified_tracks,
    link_detections,
    read_openpose_detections,
    recorded_fps,
)
from .safe_pickle import _MAX_HEADER, _read_header

__all__ = ["Detections", "Keypoints2D", "Tracks", "read_detections", "read_person", "read_tracks"]

MAX_JSON_BYTES = 1 << 30
"""Largest COCO results file read (1 GiB)."""

MAX_NPZ_ARRAY_BYTES = 2 << 30
"""Largest array of a keypoints ``.npz`` (2 GiB, shape x item size as its header says), checked
before it is decompressed: a few MiB of compressed zeros can claim many GiB."""

_NPZ_KEYS = ("keypoints", "fps", "width", "height")


@dataclass
class Detections:
    """Per-frame detections of a keypoint file or folder, people not linked across frames.

    Attributes:
        frames: per frame ``(P_t, K, 3)`` float64 ``x, y, confidence`` as in the file (people
            without any found keypoint dropped; npz: one person per frame, NaN kept).
        layout, layout_reason: the layout and why.
        kind: ``openpose``, ``coco`` or ``npz``.
        files: OpenPose frame files (else empty).
        ignored_people: OpenPose people without any found keypoint.
        ids: OpenPose files that identify their people (``person_id``, as ``smooth`` writes
            them): per frame each person's identity; else ``None`` (linked by position).
        fps: stored in the npz, or recorded in the OpenPose JSON (``fps``); size: npz only.
    """

    frames: list[np.ndarray]
    layout: str
    layout_reason: str
    kind: str
    files: list[Path] = field(default_factory=list)
    ignored_people: int = 0
    fps: float | None = None
    size: tuple[int, int] | None = None
    ids: list[np.ndarray] | None = None


@dataclass
class Tracks:
    """Keypoint tracks read from one OpenPose folder, COCO results file or npz.

    Attributes:
        keypoints: ``(T, P, K, 3)`` float64 ``x, y, confidence`` in pixels; NaN where a track
            has no person in a frame, or a joint was not found or fell below
            ``min_confidence``.
        layout: the layout name (a key of :data:`LAYOUTS`).
        files: the ``T`` frame files in time order (OpenPose folders; else empty).
        min_confidence: the threshold that was applied.
        raw: ``(T, P, K, 3)`` the same before the threshold (NaN only where the track is absent
            or OpenPose found no joint: confidence 0, or at ``(0, 0)``).
        people_per_frame: how many people each frame has (those with a found keypoint).
        layout_reason: why the layout was chosen (given, or the detection's evidence).
        ignored_people: people listed in the files without any found keypoint (ignored).
        kind: ``openpose``, ``coco`` or ``npz``.
        fps, size: frame rate (npz, or OpenPose JSON written by tensorpose) and
            ``(width, height)`` (npz) stored in the file, if any.
        dropped_detections: people with too few found keypoints to start a track that matched
            none (:func:`tensorpose.io.openpose.link_detections`), left out.
        retired_tracks: tracks no longer linked after :data:`~tensorpose.io.openpose.MAX_GAP`
            frames unseen (a person seen again later is a new track).
    """

    keypoints: torch.Tensor
    layout: str
    files: list[Path]
    min_confidence: float
    raw: torch.Tensor
    people_per_frame: list[int] = field(default_factory=list)
    layout_reason: str = ""
    ignored_people: int = 0
    kind: str = "openpose"
    fps: float | None = None
    size: tuple[int, int] | None = None
    dropped_detections: int = 0
    retired_tracks: int = 0

    @property
    def low_confidence(self) -> torch.Tensor:
        """``(T, P, K)`` bool: detected with ``0 < confidence < min_confidence``, hence NaN in
        :attr:`keypoints` (missing for the filters)."""
        c = self.raw[..., 2]
        return (c > 0) & (c < self.min_confidence)

    @property
    def names(self) -> list[str]:
        return LAYOUTS[self.layout]

    @property
    def num_frames(self) -> int:
        return self.keypoints.shape[0]

    @property
    def num_tracks(self) -> int:
        return self.keypoints.shape[1]

    def to_coco17(self) -> torch.Tensor:
        """``(T, P, 17, 3)`` in the order of ``tensorpose.skeleton.coco17()``."""
        if self.layout not in COCO17_INDEX:
            raise InputError(f"layout {self.layout} does not contain the 17 COCO keypoints")
        return self.keypoints[:, :, COCO17_INDEX[self.layout]]

    def to_h36m17(self) -> torch.Tensor:
        """``(T, P, 17, 3)`` in the order of ``tensorpose.skeleton.h36m17()`` (the lifter's
        input), see
        :func:`tensorpose.layouts.to_h36m17`."""
        return to_h36m17(self.keypoints, self.layout)


@dataclass
class Keypoints2D:
    """One person's 2D keypoints read from a file.

    Attributes:
        keypoints: ``(T, K, 3)`` float64 ``x, y, confidence`` in pixels; NaN where the person
            is absent or a keypoint was not found (confidence 1 where the file had none).
        layout: keypoint layout (a key of :data:`tensorpose.layouts.LAYOUTS`).
        layout_reason: why that layout (given, or the detection's evidence).
        kind: ``openpose``, ``coco`` or ``npz``.
        track_frames: frames in which each linked track is present (one entry for npz).
        person: the chosen track.
        track_centres: per track the median over its frames of its found keypoints' mean
            ``(x, y)`` in pixels (where in the image it is; NaN: never found).
        fps, size: frame rate and ``(width, height)`` stored in the file, if any.
        dropped_detections: detections too small to start a track, left out (see
            :class:`Tracks`).
    """

    keypoints: torch.Tensor
    layout: str
    layout_reason: str
    kind: str
    track_frames: list[int] = field(default_factory=list)
    person: int = 0
    fps: float | None = None
    size: tuple[int, int] | None = None
    dropped_detections: int = 0
    track_centres: list[tuple[float, float]] = field(default_factory=list)

    def people(self, min_fraction: float = 0.1) -> list[int]:
        """The tracks present in at least ``min_fraction`` of the frames (the people: a
        track of a few frames is a flicker, not a person), the chosen one always included."""
        T = self.keypoints.shape[0]
        return [p for p, n in enumerate(self.track_frames)
                if n >= max(min_fraction * T, 1) or p == self.person]  # fmt: skip


def _read_coco_results(path: Path) -> list[np.ndarray]:
    """Per frame (sorted ``image_id``) ``(P_t, K, 3)`` detections of a COCO results file."""
    try:
        data = json.loads(read_text(path, MAX_JSON_BYTES, "COCO results file"))
    except RecursionError:
        raise InputError(f"{path}: not valid JSON (nested too deeply)") from None
    except ValueError as e:
        raise InputError(f"{path}: not a JSON file: {e}") from None
    if isinstance(data, dict) and "annotations" not in data:
        raise OpenPoseError(
            f"{path}: is a file, expected a folder of per-frame OpenPose JSON or a COCO results "
            "list"
        )
    if isinstance(data, dict):
        data = data["annotations"]
    if not isinstance(data, list) or not data:
        raise InputError(f"{path}: expected a non-empty list of {{image_id, keypoints, score}}")
    per_image: dict[int, list[np.ndarray]] = {}
    K = None
    for i, r in enumerate(data):
        kp = r.get("keypoints") if isinstance(r, dict) else None
        iid = r.get("image_id") if isinstance(r, dict) else None
        if not isinstance(iid, int) or isinstance(iid, bool) or not isinstance(kp, list):
            raise InputError(f"{path}: entry {i} needs an integer image_id and a keypoints list")
        if not kp or len(kp) % 3 or (K is not None and len(kp) != 3 * K):
            want = f"{3 * K}" if K is not None else "a multiple of 3"
            raise InputError(f"{path}: entry {i} has {len(kp)} keypoint values, expected {want}")
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in kp):
            raise InputError(f"{path}: entry {i}: keypoints are not all numbers")
        try:
            arr = np.asarray(kp, dtype=np.float64).reshape(-1, 3)
        except OverflowError:
            raise InputError(f"{path}: entry {i}: a keypoint value is too large") from None
        if not np.isfinite(arr).all():
            raise InputError(f"{path}: entry {i}: keypoints are not all finite")
        K = arr.shape[0]
        per_image.setdefault(iid, []).append(arr)
    return [np.stack(per_image[k]) for k in sorted(per_image)]


def _npz_arrays(path: Path) -> dict[str, np.ndarray]:
    """The arrays of :data:`_NPZ_KEYS` in a keypoints ``.npz``, each header checked first: real
    numbers only, at most :data:`MAX_NPZ_ARRAY_BYTES` (both named in the error with the file and
    the key)."""
    check_regular_file(path, MAX_FILE_BYTES, "keypoints .npz")  # no FIFO, device or folder
    try:
        zf = zipfile.ZipFile(path)
    except (OSError, EOFError, zipfile.BadZipFile, ValueError) as e:
        raise InputError(f"{path}: not a readable .npz file: {e}") from None
    out = {}
    with zf:
        members = {i.filename[:-4]: i for i in zf.infolist() if i.filename.endswith(".npy")}
        if "keypoints" not in members:
            raise InputError(f"{path}: no 'keypoints' array (has {sorted(members)})")
        for key in (k for k in _NPZ_KEYS if k in members):  # four names, not data
            try:
                with zf.open(members[key]) as f:
                    shape, _, dtype = _read_header(f)
            except (
                OSError,
                EOFError,
                zipfile.BadZipFile,
                ValueError,
                SyntaxError,
                RecursionError,
            ) as e:
                raise InputError(
                    f"{path}: array {key!r}: not a readable .npy header: {e}"
                ) from None
            if dtype.kind not in "iuf":
                what = {"c": "complex", "b": "boolean", "O": "object"}.get(dtype.kind, str(dtype))
                raise InputError(
                    f"{path}: array {key!r} holds {what} values ({dtype}), expected real numbers"
                )
            need = math.prod(shape) * dtype.itemsize
            if need > MAX_NPZ_ARRAY_BYTES:
                raise InputError(
                    f"{path}: array {key!r} of shape {tuple(shape)} ({dtype}) needs "
                    f"{need / 2**30:.1f} GiB, over the {MAX_NPZ_ARRAY_BYTES >> 30} GiB limit for "
                    "an array of a keypoints .npz"
                )
            try:
                with zf.open(members[key]) as f:
                    out[key] = np.lib.format.read_array(
                        f, allow_pickle=False, max_header_size=_MAX_HEADER
                    )
            except (OSError, EOFError, zipfile.BadZipFile, ValueError) as e:
                raise InputError(f"{path}: array {key!r}: cannot read it: {e}") from None
    return out


def _read_npz(path: Path) -> tuple[np.ndarray, float | None, tuple[int, int] | None]:
    z = _npz_arrays(path)
    try:
        kp = np.asarray(z["keypoints"], dtype=np.float64)
        fps = float(z["fps"]) if "fps" in z else None
        size = (int(z["width"]), int(z["height"])) if {"width", "height"} <= set(z) else None
    except (TypeError, ValueError) as e:
        raise InputError(f"{path}: cannot read its arrays: {e}") from None
    if kp.ndim != 3 or kp.shape[-1] not in (2, 3) or kp.shape[0] == 0:
        raise InputError(f"{path}: keypoints must have shape (T, K, 2|3), got {kp.shape}")
    if kp.shape[-1] == 2:
        kp = np.concatenate([kp, np.isfinite(kp).all(-1, keepdims=True).astype(np.float64)], -1)
    return kp, fps, size


def _layout_of(kp: torch.Tensor, layout: str | None, source: Path) -> tuple[str, str]:
    K = kp.shape[-2]
    if layout is not None:
        check_layout(layout, K, f"{source}")
        return layout, f"{layout} as given"
    try:
        return detect_layout(kp.nan_to_num(0.0))
    except ValueError as e:
        raise InputError(f"{source}: {e}") from None


def read_detections(
    path: str | os.PathLike, layout: str | None = None, progress: bool = False
) -> Detections:
    """Per-frame detections of an OpenPose folder, a COCO results ``.json`` or an ``.npz``.

    Args:
        layout: keypoint layout (default: detected from the keypoint count and geometry).
        progress: a progress bar while reading an OpenPose folder of 300 files or more.

    Raises:
        FileNotFoundError: no such file or folder.
        ValueError: a malformed file (named), a layout whose keypoint count differs from the
            file's (both counts named), an input of another kind.
    """
    src = Path(path)
    if not src.exists():
        raise MissingFileError(f"input not found: {src}")
    if layout is not None:
        check_layout(layout)
    if src.is_dir():
        frames, files, lay, reason, ignored, ids = read_openpose_detections(src, layout, progress)
        return Detections(frames, lay, reason, "openpose", files, ignored, ids=ids,
                          fps=recorded_fps(files))  # fmt: skip
    check_regular_file(src, MAX_JSON_BYTES, "keypoint file")
    if src.suffix.lower() == ".npz":
        arr, fps, size = _read_npz(src)
        lay, reason = _layout_of(torch.from_numpy(arr), layout, src)
        return Detections(list(arr[:, None]), lay, reason, "npz", fps=fps, size=size)
    if src.suffix.lower() == ".json":
        frames = _read_coco_results(src)
        everyone = torch.from_numpy(np.concatenate(frames))
        everyone = everyone.masked_fill(~found(everyone)[..., None], float("nan"))
        lay, reason = _layout_of(everyone, layout, src)
        return Detections(frames, lay, reason, "coco")
    raise OpenPoseError(
        f"{src}: is a file, expected a folder of per-frame OpenPose JSON, a COCO results .json "
        "or an .npz"
    )


def read_tracks(
    path: str | os.PathLike,
    layout: str | None = None,
    min_confidence: float = 0.3,
    max_distance: float | None = None,
    progress: bool = False,
) -> Tracks:
    """Read a keypoint file or folder into linked tracks.

    Args:
        path: an OpenPose folder of per-frame ``*.json`` files, a COCO results ``.json`` or an
            ``.npz`` (see the module notes).
        layout: a key of :data:`LAYOUTS` (``"BODY_25"``, ``"BODY_25B"``, ``"COCO_18"``, ...);
            ``None`` detects it from the keypoint count and geometry
            (:func:`tensorpose.layouts.detect_layout`; :attr:`Tracks.layout_reason` says why).
        min_confidence: joints with confidence below it (and all joints OpenPose did not find:
            confidence 0, or at ``(0, 0)``) become NaN, i.e. missing for the filters.
        max_distance: track-linking gate in pixels (see
            :func:`tensorpose.io.openpose.link_tracks`).
        progress: a progress bar while reading folders of 300 files or more.

    Returns:
        :class:`Tracks` with ``keypoints (T, P, K, 3)`` (an npz: one track, ``P = 1``).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: a bad argument; a malformed file (see :func:`read_detections`).
    """
    if not 0 <= min_confidence <= 1:
        raise InputError(f"min_confidence must be in [0, 1], got {min_confidence}")
    det = read_detections(path, layout, progress)
    dropped = retired = 0
    if det.kind == "npz":  # one person, as stored
        raw = torch.from_numpy(np.stack(det.frames))
    elif det.ids is not None:  # people identified in the files (e.g. by smooth): as given
        raw = identified_tracks(det.frames, det.ids)
        raw.masked_fill_(~found(raw)[..., None], float("nan"))
    else:
        raw, dropped, retired = link_detections(det.frames, max_distance)
        raw.masked_fill_(~found(raw)[..., None], float("nan"))  # OpenPose's "not found"
    people = [len(f) for f in det.frames]
    det.frames = []  # the detections are in raw now: free them before the copy below
    kp = raw.masked_fill(raw[..., 2:] < min_confidence, float("nan"))
    return Tracks(kp, det.layout, det.files, float(min_confidence), raw, people,
                  det.layout_reason, det.ignored_people, det.kind, det.fps, det.size, dropped,
                  retired)  # fmt: skip


def _pick_person(tracks: torch.Tensor, layout: str, person: int | None,
                 source: Path) -> tuple[int, list[int]]:  # fmt: skip
    """``tracks (T, P, K, 3)``: the chosen track (default: the one seen whole in the most
    frames, i.e. with every joint of the lifter's skeleton (``h36m17``, made from the layout)
    found; ties: the most frames with a keypoint found, then the most found keypoints over all
    frames, then the first; never the largest in the image) and the frames each track is
    present in."""
    seen = torch.isfinite(tracks[..., :2]).all(-1)  # (T, P, K)
    counts = [int(n) for n in seen.any(-1).sum(0)]
    if not counts:
        raise InputError(f"{source}: no person in any frame")
    if person is None:
        whole = torch.isfinite(to_h36m17(tracks, layout)[..., :2]).all(-1).all(-1)  # (T, P)
        covered = whole.sum(0).tolist()
        keypoints = seen.sum((0, 2)).tolist()
        best = max(range(len(counts)), key=lambda p: (covered[p], counts[p], keypoints[p], -p))
        return best, counts
    if not 0 <= person < len(counts):
        raise InputError(
            f"--person {person}: {source} has {len(counts)} track(s) (0..{len(counts) - 1}; "
            f"frames present: {', '.join(map(str, counts))})"
        )
    return person, counts


def track_centres(tracks: torch.Tensor) -> list[tuple[float, float]]:
    """Per track of ``tracks (T, P, K, 3)`` the median over its frames of the mean ``(x, y)``
    of its found keypoints (pixels; NaN where never found)."""
    xy = tracks[..., :2]
    mean = xy.nanmean(-2)  # (T, P, 2): NaN where the track has no keypoint
    mid = mean.nanmedian(0).values if len(xy) else xy.new_full((xy.shape[1], 2), float("nan"))
    return [(float(x), float(y)) for x, y in mid.tolist()]


def read_person(
    path: str | os.PathLike,
    layout: str | None = None,
    person: int | None = None,
    progress: bool = False,
    min_confidence: float = 0.3,
) -> Keypoints2D:
    """Read one person's 2D keypoints from an OpenPose folder, a COCO results JSON or an npz.

    Args:
        path: an OpenPose JSON folder, a ``.json`` COCO results file or an ``.npz``.
        layout: keypoint layout (default: detected from the keypoint count and geometry).
        person: track index (default: after linking, the track seen whole in the most
            frames, i.e. with every joint the lifter needs; ties: the most frames seen, then
            the most found keypoints; all counting the joints of confidence
            ``min_confidence`` or more, the ones ``lift`` uses: the choice is the same before
            and after ``smooth``, which keeps only those).
        progress: a progress bar while reading an OpenPose folder of 300 files or more.

    Returns:
        :class:`Keypoints2D`.

    Raises:
        FileNotFoundError: no such file or folder.
        ValueError: a malformed file (named), a layout whose keypoint count differs from the
            file's (both counts named), ``person`` out of range (the track count named).
    """
    src = Path(path)
    tracks = read_tracks(src, layout, min_confidence, progress=progress)
    if tracks.kind == "npz" and person not in (None, 0):
        raise InputError(f"--person {person}: {src} holds one person (track 0)")
    p, _ = _pick_person(tracks.keypoints, tracks.layout, person, src)
    counts = [int(n) for n in torch.isfinite(tracks.raw[..., :2]).all(-1).any(-1).sum(0)]
    return Keypoints2D(tracks.raw[:, p].clone(), tracks.layout, tracks.layout_reason,
                       tracks.kind, counts, p, tracks.fps, tracks.size,
                       tracks.dropped_detections, track_centres(tracks.raw))  # fmt: skip
