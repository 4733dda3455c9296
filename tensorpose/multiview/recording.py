"""Multi-view triangulation of a recording: one keypoint folder per calibrated camera -> 3D
joints, reprojection errors and a summary.

:func:`read_cameras` reads one folder of per-frame OpenPose JSON files per camera
(``<tracks_dir>/<camera>*/``, :func:`tensorpose.io.tracks.read_detections`) and the
calibration (Qualisys ``.qca.txt`` or Pose2Sim ``.toml``), and matches folders to calibrated
cameras by name; :func:`triangulate_cameras` triangulates every frame and joint at once with
:func:`tensorpose.multiview.association.triangulate_people` (cross-view association of the person
seen
by the most cameras, weighted DLT, camera dropping); :func:`summarize` gives the report's
figures. ``tensorpose triangulate`` (:mod:`tensorpose.apps.triangulate`) writes the files.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..errors import InputError, MissingFileError
from ..io.calibration import Calibration, load_calibration
from ..io.openpose import (
    OpenPoseError,
    cameras_evidence,
    first_person,
    frame_paths,
    read_openpose_files,
    write_openpose,
)
from ..layouts import (
    LAYOUTS,
    candidate_layouts,
    flip_index,
    join_evidence,
    layout_from_evidence,
)
from .association import triangulate_people
from .dlt import reprojection_errors
from .triangulate import DROP_RULES, Triangulation

__all__ = [
    "CHUNK_FRAMES",
    "DROP_FLAGS",
    "LIMBS",
    "CameraAgreement",
    "Cameras",
    "Recording",
    "camera_agreement",
    "camera_key",
    "check_agreement",
    "check_chunk",
    "check_options",
    "drop_rule",
    "find_camera_folders",
    "match_cameras",
    "open_recording",
    "pack_keypoints",
    "read_cameras",
    "summarize",
    "triangulate_cameras",
    "trim_frames",
    "write_repaired_2d",
]

LIMBS = [
    ("l_hip", "l_knee"), ("r_hip", "r_knee"), ("l_knee", "l_ankle"), ("r_knee", "r_ankle"),
    ("l_shoulder", "l_elbow"), ("r_shoulder", "r_elbow"), ("l_elbow", "l_wrist"),
    ("r_elbow", "r_wrist"),
]  # fmt: skip
"""Bones whose length over time the report summarises (when both joints are in the layout)."""

CHUNK_FRAMES = 1000
"""Frames read and triangulated at a time: memory holds one chunk's detections and work, plus
the small per-frame results of the whole recording (about 2 kB per frame and person)."""


def camera_key(name: str) -> str:
    """Name normalised for matching folders to calibrated cameras: lower case, a ``json``
    suffix dropped, only letters and digits, numbers without leading zeros
    (``cam01_json``, ``cam_01`` and ``Cam1`` all give ``cam1``)."""
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    key = re.sub(r"json$", "", key) or key
    return re.sub(r"\d+", lambda m: str(int(m.group())), key)


def _natural(path: Path) -> tuple:
    return tuple(int(s) if s.isdigit() else s.lower() for s in re.split(r"(\d+)", path.name))


def _names_json(folder: Path) -> bool:
    """Whether an entry of ``folder`` is named ``*.json`` (``any(folder.glob("*.json"))``)."""
    try:
        with os.scandir(folder) as entries:
            return any(e.name.endswith(".json") for e in entries)
    except PermissionError:
        return False


def find_camera_folders(tracks_dir: str | os.PathLike) -> list[Path]:
    """The sub-folders of ``tracks_dir`` holding ``*.json`` files, in natural name order."""
    root = Path(tracks_dir)
    if not root.is_dir():
        raise MissingFileError(f"tracks folder not found: {root}")
    folders = [p for p in root.iterdir() if p.is_dir() and _names_json(p)]
    if not folders:
        raise InputError(f"{root}: no camera sub-folder with OpenPose .json files")
    return sorted(folders, key=_natural)


def match_cameras(folders: list[Path], names: list[str], calib_path: Path) -> list[str]:
    """The calibrated camera of each folder, matched by :func:`camera_key`; one error naming
    both sides when they do not match."""
    both = f"cameras {names} in {calib_path}; track folders {[f.name for f in folders]}"
    if len(names) < len(folders):
        raise InputError(
            f"the calibration has {len(names)} cameras for {len(folders)} track folders: {both}"
        )
    keys: dict[str, list[str]] = {}
    for n in names:  # camera names by key (argument checks, not data)
        keys.setdefault(camera_key(n), []).append(n)
    out, missing = [], []
    for f in folders:
        hits = keys.get(camera_key(f.name), [])
        if len(hits) > 1:
            raise InputError(f"track folder {f.name!r} matches several cameras {hits}: {both}")
        if not hits:
            missing.append(f.name)
        else:
            out.append(hits[0])
    if missing:
        raise InputError(f"camera names do not match track folders {missing}: {both}")
    return out


@dataclass
class Cameras:
    """A recording's cameras, read and checked: ``folders`` (one per camera), the matched
    calibrated camera ``names``, the ``calibration`` of those cameras (in folder order), per
    camera the per-frame detections ``detections[c][t]`` ``(P, K, 3)``, and the ``layout``."""

    folders: list[Path]
    names: list[str]
    calibration: Calibration
    detections: list[list[np.ndarray]]
    layout: str

    @property
    def frames(self) -> int:
        return len(self.detections[0])

    @property
    def keypoints(self) -> int:
        return len(LAYOUTS[self.layout])

    def read(self, start: int, stop: int) -> list[list[np.ndarray]]:
        """Per camera the detections of frames ``start:stop``."""
        return [d[start:stop] for d in self.detections]

    def layout_so_far(self) -> str:
        return self.layout


@dataclass
class Recording:
    """A recording's cameras opened, not read (:func:`open_recording`): ``folders``, the
    matched calibrated camera ``names``, their ``calibration``, each camera's frame ``files``
    (paths as text, time order), the keypoint count ``keypoints`` and the ``given`` layout
    (``None``: the one the files record, else detected from every frame as they are read,
    :meth:`read`; then :attr:`layout`)."""

    folders: list[Path]
    names: list[str]
    calibration: Calibration
    files: list[list[str]]
    keypoints: int
    given: str | None = None
    sources: list[str] = field(default_factory=list)
    evidence: dict[int, list] = field(default_factory=dict, repr=False)
    last: tuple = field(default=(), repr=False)
    """The last chunk read, ``(start, stop, frames)``: read again (the agreement check after
    the triangulation), it is not parsed twice; one chunk, so memory stays bounded."""

    @property
    def frames(self) -> int:
        return len(self.files[0])

    def read(self, start: int, stop: int) -> list[list[np.ndarray]]:
        """Per camera the detections ``(P, K, 3)`` of frames ``start:stop`` (the files parsed
        now); without a given layout, their layout evidence is kept for :attr:`layout`."""
        if self.last[:2] == (start, stop):
            return self.last[2]
        frames, recorded = [], []
        for c, files in enumerate(self.files):  # a handful of cameras
            f, _, _, layout = read_openpose_files(files[start:stop], self.keypoints,
                                                  self.sources[c])  # fmt: skip
            frames.append(f)
            recorded.append(layout)
        if self.given is None:
            measured = cameras_evidence(frames, self.keypoints)
            self.evidence[start] = [stop, *zip(measured, recorded, strict=True)]
        self.last = (start, stop, frames)
        return frames

    @property
    def layout(self) -> str:
        """The given layout, else the one every camera's frames (all read) show.

        Raises:
            ValueError: the cameras show different layouts (each named).
        """
        if self.given is not None:
            return self.given
        starts = sorted(self.evidence)
        stops = [self.evidence[s][0] for s in starts]
        if starts[:1] != [0] or stops[-1] != self.frames or starts[1:] != stops[:-1]:
            raise RuntimeError("read every frame of the recording once before its layout")
        return self._layout_of(starts)

    def layout_so_far(self) -> str:
        """The given layout, else the one the frames read so far show (:attr:`layout` once
        every frame is read)."""
        if self.given is not None:
            return self.given
        return self._layout_of(sorted(self.evidence))

    def _layout_of(self, starts: list[int]) -> str:
        layouts = []
        for c in range(len(self.folders)):  # a handful of cameras
            recorded = {self.evidence[s][1 + c][1] for s in starts}
            if len(recorded) == 1 and None not in recorded:  # the files say it
                layouts.append(recorded.pop())
                continue
            joined = join_evidence([self.evidence[s][1 + c][0] for s in starts])
            layouts.append(layout_from_evidence(joined)[0])
        if len(set(layouts)) != 1:
            found = dict(zip([f.name for f in self.folders], layouts, strict=True))
            raise InputError(f"the camera folders have different layouts {found}; pass --layout")
        return layouts[0]

    def cameras(self) -> Cameras:
        """Every frame read at once, as :class:`Cameras`."""
        return Cameras(self.folders, self.names, self.calibration, self.read(0, self.frames),
                       self.layout)  # fmt: skip


def _check_no_empty_camera(root: Path, folders: list[Path], cams: list[str],
                           names: list[str]) -> None:  # fmt: skip
    """A sub-folder named as a calibrated camera that no track folder took, holding no
    ``*.json``: the camera's detections are missing (never silently left out)."""
    left = {camera_key(n): n for n in names if n not in cams}
    taken = {f.name for f in folders}
    for p in sorted(root.iterdir(), key=_natural):  # the recording's few sub-folders
        if p.is_dir() and p.name not in taken and camera_key(p.name) in left:
            raise InputError(f"{p}: the folder of camera {left[camera_key(p.name)]} holds no "
                             "OpenPose .json file; remove the folder or its camera from the "
                             "calibration")  # fmt: skip


def trim_frames(folders: list[Path], files: list[list[str]], offsets: dict[str, int],
                where: str) -> list[list[str]]:  # fmt: skip
    """Each camera's frame ``files`` without its first ``offsets[folder name]`` frames, all cut
    to the frames they have in common (``offsets``: :func:`tensorpose.io.sync.read_sync`, read
    from ``where``, named in the errors: a folder without an offset or not there, an offset
    that leaves no frame)."""
    names = [f.name for f in folders]
    if unknown := sorted(set(offsets) - set(names)):
        raise InputError(f"{where}: no camera folder {unknown} in {folders[0].parent} "
                         f"(folders {names})")  # fmt: skip
    if missing := [n for n in names if n not in offsets]:
        raise InputError(f"{where}: no offset for the camera folders {missing}")
    left = [len(fr) - offsets[n] for n, fr in zip(names, files, strict=True)]
    if short := [f"{n} ({offsets[n]} of {len(fr)} frames)"
                 for n, fr, k in zip(names, files, left, strict=True) if k <= 0]:  # fmt: skip
        raise InputError(f"{where}: offsets as long as the recording: {', '.join(short)}")
    common = min(left)
    return [fr[offsets[n] : offsets[n] + common] for n, fr in zip(names, files, strict=True)]


def open_recording(
    tracks_dir: str | os.PathLike, calib_path: str | os.PathLike, layout: str | None = None,
    offsets: dict[str, int] | None = None, offsets_from: str = "--sync",
) -> Recording:  # fmt: skip
    """Open every camera folder of ``tracks_dir`` and the calibration, matched by name: the
    frame files listed and counted, the keypoint count found (the first person of each camera;
    the frames are read later, in chunks). ``offsets`` (read from ``offsets_from``): frames
    dropped at the start of each camera folder, then all cut to their common frames
    (:func:`trim_frames`).

    Raises:
        FileNotFoundError, ValueError: missing inputs, folders that do not match the
        calibration, differing frame or keypoint counts (each named).
    """
    if layout is not None and layout not in LAYOUTS:
        raise InputError(f"--layout must be one of {sorted(LAYOUTS)}, got {layout!r}")
    folders = find_camera_folders(tracks_dir)
    calib = load_calibration(calib_path)
    cams = match_cameras(folders, calib.names, Path(calib_path))
    _check_no_empty_camera(Path(tracks_dir), folders, cams, calib.names)
    calib = calib.select(cams)
    files = [frame_paths(f) for f in folders]  # text: 5x less memory
    if offsets is not None:
        files = trim_frames(folders, files, offsets, offsets_from)
    counts = {f.name: len(fr) for f, fr in zip(folders, files, strict=True)}
    if len(set(counts.values())) != 1:
        raise InputError(f"the camera folders have different frame counts {counts}; "
                         "trim them to the same frames")  # fmt: skip
    if layout is not None:
        K = len(LAYOUTS[layout])
        return Recording(folders, cams, calib, files, K, layout, [f"layout {layout}"] * len(files))
    keypoints, sources = {}, []
    for folder, fr in zip(folders, files, strict=True):  # the first person of each camera
        first = first_person(fr)
        if first is None:
            raise OpenPoseError(f"{folder}: no person in any frame; pass --layout to read it")
        try:
            candidate_layouts(first[0])
        except ValueError as e:
            raise OpenPoseError(f"{first[1]}: {e}") from None
        keypoints[folder.name], _ = first
        sources.append(f"{first[1]}")
    if len(set(keypoints.values())) != 1:
        raise InputError(f"the camera folders have different keypoint counts {keypoints}; "
                         "they come from different detectors")  # fmt: skip
    K = next(iter(keypoints.values()))
    return Recording(folders, cams, calib, files, K, None, sources)


def read_cameras(
    tracks_dir: str | os.PathLike, calib_path: str | os.PathLike, layout: str | None = None
) -> Cameras:
    """Read every camera folder of ``tracks_dir`` and the calibration, matched by name, at once
    (:func:`open_recording`, then every frame).

    Raises:
        FileNotFoundError, ValueError: missing inputs, folders that do not match the
        calibration, differing frame counts or layouts (each named).
    """
    return open_recording(tracks_dir, calib_path, layout).cameras()


DROP_FLAGS = {"tensorpose": "leave_one_out", "pose2sim": "pose2sim"}
"""``--drop-rule`` choices -> the drop rule (:data:`DROP_RULES`) each selects."""
_FLAG_OF = {rule: flag for flag, rule in DROP_FLAGS.items()}


def drop_rule(flag: str) -> str:
    """The drop rule of a ``--drop-rule`` choice (a rule's own name stands for itself)."""
    return DROP_FLAGS.get(flag, flag)


def check_options(min_confidence: float, max_reprojection_px: float, drop: str) -> None:
    """Raises ValueError naming the CLI flag of a bad triangulation setting."""
    if not 0 <= min_confidence <= 1:
        raise InputError(f"--min-confidence must be in [0, 1], got {min_confidence}")
    if not (max_reprojection_px > 0 and math.isfinite(max_reprojection_px)):
        raise InputError(f"--max-reprojection-px must be positive, got {max_reprojection_px}")
    if drop not in DROP_RULES:
        flags = ", ".join(r if _FLAG_OF.get(r, r) == r else f"{r} (--drop-rule {_FLAG_OF[r]})"
                          for r in DROP_RULES)  # fmt: skip
        raise InputError(f"the drop rule must be one of {flags}, got {drop!r}")


def pack_keypoints(cameras: Cameras | Recording, device: str | torch.device = "cpu",
                   frames: list[list[np.ndarray]] | None = None) -> list[torch.Tensor]:  # fmt: skip
    """Each camera's detections (``frames``: per camera a list of ``(P, K, 3)``; default: every
    frame of ``cameras``) as one ``(T, P_c, K, 3)`` float64 tensor (``P_c`` the most people of a
    frame; empty slots are zeros)."""
    if frames is None:
        frames = cameras.read(0, cameras.frames)
    K = cameras.keypoints
    keypoints = []
    for per_frame in frames:  # pack each camera's frames into (T, P_c, K, 3), one scatter
        counts = np.array([len(f) for f in per_frame])
        k = np.zeros((len(per_frame), counts.max(), K, 3))
        flat = np.concatenate([np.zeros((0, K, 3)), *per_frame])
        t = np.repeat(np.arange(len(counts)), counts)
        k[t, np.arange(len(flat)) - np.repeat(np.cumsum(counts) - counts, counts)] = flat
        keypoints.append(torch.from_numpy(k).to(device))
    return keypoints


def check_chunk(chunk_frames: int) -> int:
    if not (isinstance(chunk_frames, int) and chunk_frames >= 1):
        raise InputError(f"--chunk-frames must be a frame count >= 1, got {chunk_frames!r}")
    return chunk_frames


class _Frames:
    """Per-frame arrays of a whole recording, filled a chunk at a time (allocated at the first
    chunk's shapes and dtypes)."""

    def __init__(self, frames: int) -> None:
        self.T, self.arrays = frames, {}

    def put(self, start: int, chunk: dict[str, np.ndarray]) -> None:
        for key, a in chunk.items():  # the handful of result arrays
            if key not in self.arrays:
                self.arrays[key] = np.empty((self.T, *a.shape[1:]), a.dtype)
            self.arrays[key][start : start + len(a)] = a


def triangulate_cameras(
    cameras: Cameras | Recording,
    *,
    min_confidence: float = 0.3,
    max_reprojection_px: float = 15.0,
    association_px: float = 20.0,
    drop: str = "leave_one_out",
    device: str | torch.device = "cpu",
    chunk_frames: int = CHUNK_FRAMES,
    agreement: CameraAgreement | None = None,
) -> Triangulation:
    """Triangulate every frame and joint of ``cameras`` (see
    :func:`tensorpose.multiview.association.triangulate_people`), ``chunk_frames`` frames at a time:
    each frame's association and triangulation depend on that frame alone, so the result is
    that of one pass over all frames, in memory bounded by the chunk plus the per-frame results.

    Args:
        cameras: read (:class:`Cameras`) or opened (:class:`Recording`: its files are read a
            chunk at a time).
        min_confidence: joints below it are not used.
        max_reprojection_px: camera dropping / validity threshold (pixels).
        association_px: two-view threshold for joining a person across views (pixels).
        drop: ``"leave_one_out"`` (``--drop-rule tensorpose``), ``"largest_error"`` or
            ``"pose2sim"`` (Pose2Sim's mean-error rule), see
            :func:`tensorpose.multiview.triangulate.triangulate_points`.
        agreement: gathers each camera's agreement with the points
            (:class:`CameraAgreement`) from the chunks' detections as they are triangulated.
    """
    check_options(min_confidence, max_reprojection_px, drop)
    check_chunk(chunk_frames)
    cal = cameras.calibration.to(device=device, dtype=torch.float64)
    out = _Frames(cameras.frames)
    for start in range(0, cameras.frames, chunk_frames):  # a chunk of frames at a time
        frames = cameras.read(start, min(start + chunk_frames, cameras.frames))
        packed = pack_keypoints(cameras, frames=frames)
        res = triangulate_people(
            [k.to(device) for k in packed], cal.K, cal.dist, cal.R, cal.t,
            min_confidence=min_confidence, max_error_px=max_reprojection_px,
            association_px=association_px, drop=drop,
        )  # fmt: skip
        del frames
        res = res.numpy().arrays()
        res.pop("score")
        res["points"] = np.where(res["valid"][..., None], res["points"], np.nan)
        if agreement is not None:
            agreement.add(packed, res["points"][:, None], res["valid"][:, None])
        out.put(start, res)
    return Triangulation(**out.arrays, names=list(LAYOUTS[cameras.layout]))


def _bones(tri: Triangulation) -> dict[str, dict]:
    names, valid, points = tri.names, tri.valid, tri.points
    bones = {}
    for a, b in LIMBS:  # a handful of named bones
        if a in names and b in names:
            ia, ib = names.index(a), names.index(b)
            both = valid[:, ia] & valid[:, ib]
            length = np.linalg.norm(points[both, ia] - points[both, ib], axis=-1)
            bones[f"{a}-{b}"] = {"mean_m": float(length.mean()) if both.any() else None,
                                 "std_m": float(length.std()) if both.any() else None,
                                 "frames": int(both.sum())}  # fmt: skip
    return bones


def _column_medians(x: np.ndarray, keep: np.ndarray) -> list[float | None]:
    """Per column of ``x (T, J)``, ``np.median`` of its entries where ``keep`` (``None``:
    none kept): every column sorted at once (the median of the kept entries is their middle
    order statistic, or the mean of the two middle ones)."""
    if np.isnan(x[keep]).any():  # np.median would say NaN: column by column, as it does
        with np.errstate(all="ignore"):
            return [float(np.median(x[keep[:, j], j])) if keep[:, j].any() else None
                    for j in range(x.shape[1])]  # fmt: skip
    s = np.sort(np.where(keep, x, np.inf), axis=0)  # kept entries first, in order
    n = keep.sum(0)
    lo, hi = s[np.maximum(n - 1, 0) // 2, np.arange(len(n))], s[n // 2, np.arange(len(n))]
    mid = np.where(n % 2 == 1, lo, np.mean(np.stack([lo, hi]), axis=0))
    return [float(m) if k else None for m, k in zip(mid.tolist(), n.tolist(), strict=True)]


def summarize(tri: Triangulation) -> dict:
    """The figures of a triangulation: frames, joints, frames with a person, valid fraction,
    median and 90th percentile of the mean reprojection error (px), mean cameras used,
    per-joint valid fraction and median error, bone-length mean and std (m) over frames."""
    valid, mean_error = tri.valid, tri.mean_error
    e = mean_error[valid]
    medians = _column_medians(mean_error, valid)
    per_joint = {n: {"valid": float(v), "median_px": m}
                 for n, v, m in zip(tri.names, valid.mean(0), medians, strict=True)}  # fmt: skip
    return {
        "frames": valid.shape[0],
        "joints": valid.shape[1],
        "frames_with_person": int((tri.person >= 0).any(-1).sum()),
        "valid_fraction": float(valid.mean()),
        "median_reprojection_px": float(np.median(e)) if e.size else None,
        "p90_reprojection_px": float(np.percentile(e, 90)) if e.size else None,
        "mean_cameras_used": float(tri.used[valid].sum(-1).mean()) if e.size else None,
        "per_joint": per_joint,
        "bones": _bones(tri),
    }


DISAGREE_FACTOR = 3.0
"""A camera disagrees with the others when the median reprojection error of its best-fitting
detection per frame, against the 3D points triangulated by all, is above this many times
``--max-reprojection-px`` (45 px by default)."""


def camera_agreement(cameras: Cameras | Recording, tris: list[Triangulation],
                     min_confidence: float = 0.3,
                     chunk_frames: int = CHUNK_FRAMES) -> list[dict]:  # fmt: skip
    """How well each camera's detections agree with the triangulated people ``tris``.

    Per camera and frame, each of its detections is compared with the valid 3D joints of each
    person (reprojection error, pixels, joints above ``min_confidence``, median over joints);
    the best-fitting pair of detection and person counts (a camera that sees only some of the
    people, the others occluded, agrees on those it sees). Per camera: ``median_px``, the
    median of that over the frames with a value (``None``: never any), and ``used``, the share
    of the valid joint-frames that took the camera. The detections are read ``chunk_frames`` at a
    time (bounded memory; one figure per frame and person is kept). The triangulation gathers
    the same figures as it goes (``agreement=``:class:`CameraAgreement`), without reading the
    detections again.
    """
    tally = CameraAgreement(cameras, min_confidence)
    for start in range(0, cameras.frames, chunk_frames):  # a chunk of frames at a time
        stop = min(start + chunk_frames, cameras.frames)
        tally.add(pack_keypoints(cameras, frames=cameras.read(start, stop)),
                  np.stack([t.points[start:stop] for t in tris], 1),
                  np.stack([t.valid[start:stop] for t in tris], 1))  # fmt: skip
    return tally.result(tris)


class CameraAgreement:
    """:func:`camera_agreement`'s figures gathered a chunk of frames at a time, from the
    detections the triangulation has packed (:meth:`add`); :meth:`result` then gives the
    per-camera figures for the people kept."""

    def __init__(self, cameras: Cameras | Recording, min_confidence: float) -> None:
        self.cal, self.min_confidence = cameras.calibration, min_confidence
        self.names, self.folders = cameras.names, cameras.folders
        self.best: list[torch.Tensor] = []  # per chunk (C, T, N): best detection per person
        self.slots: list[np.ndarray | None] = []  # per chunk (N, T) track of each slot
        self.keep: list[int] | None = None  # with tracks: those of the people kept

    def add(self, packed: list[torch.Tensor], points: np.ndarray, valid: np.ndarray,
            track: np.ndarray | None = None) -> None:  # fmt: skip
        """A chunk: per camera its detections ``(T, P_c, J, 3)`` (:func:`pack_keypoints`),
        the people's ``points (T, N, J, 3)`` (NaN where not valid) and ``valid (T, N, J)``;
        ``track (N, T)``: the person each slot is (-1: none; default: slot ``n`` is ``n``)."""
        cal = self.cal
        points, valid = torch.from_numpy(points), torch.from_numpy(valid)
        k = _pad_cameras(packed)
        px, conf = k[:, :, None, :, :, :2], k[:, :, None, :, :, 2]  # (C, T, 1, P, J, 2)
        # every camera at once: its detections (T, 1, P, J) against every person (T, N, 1, J)
        err = reprojection_errors(points[:, :, None], px.movedim(0, -2), cal.K, cal.dist,
                                  cal.R, cal.t).movedim(-1, 0)  # (C, T, N, P, J)  # fmt: skip
        ok = (conf >= self.min_confidence) & (conf > 0) & valid[:, :, None] & err.isfinite()
        if ok.numel():
            per = torch.where(ok, err, float("nan")).nanquantile(0.5, -1)  # (C, T, N, P)
        else:  # no detection or no person in the chunk
            per = err.new_full(err.shape[:-1], float("nan"))
        # per frame, the detection that fits each person best (empty slots never fit)
        per = per.nan_to_num(float("inf"))
        best = per.amin(-1) if per.shape[-1] else per.new_full(per.shape[:3], float("inf"))
        self.best.append(best)
        self.slots.append(track)

    def result(self, tris: list[Triangulation]) -> list[dict]:
        """Per camera ``camera``, ``folder``, ``median_px`` and ``used`` (see
        :func:`camera_agreement`) of the people ``tris``: with tracks, those numbered
        :attr:`keep` (the best fit over the people kept in each frame: a camera that sees only
        some of the people, the others occluded, agrees on those it sees)."""
        used = np.concatenate([t.used[t.valid] for t in tris])  # (valid joint-frames, C)
        parts, everyone = [], []
        for best, track in zip(self.best, self.slots, strict=True):  # the chunks
            if track is not None:  # every person triangulated, and the people kept alone
                everyone.append(_best_fit(best))
                kept = torch.from_numpy(np.isin(track, self.keep).T)  # (T, N)
                best = torch.where(kept, best, float("inf"))
            parts.append(_best_fit(best))
        out = []
        for c in range(len(self.names)):  # per camera
            b = torch.cat([p[c][p[c].isfinite()] for p in parts])
            out.append({"camera": self.names[c], "folder": self.folders[c].name,
                        "median_px": float(b.quantile(0.5)) if b.numel() else None,
                        "used": float(used[:, c].mean()) if len(used) else 0.0})  # fmt: skip
            if everyone:  # with tracks: how the camera agrees with every person triangulated
                b = torch.cat([p[c][p[c].isfinite()] for p in everyone])
                out[-1]["median_everyone_px"] = float(b.quantile(0.5)) if b.numel() else None
        return out


def _best_fit(best: torch.Tensor) -> torch.Tensor:
    """``(C, T)`` per camera and frame the best fit over the people of ``best (C, T, N)``."""
    return best.amin(-1) if best.shape[-1] else best.new_full(best.shape[:2], float("inf"))


def _pad_cameras(packed: list[torch.Tensor]) -> torch.Tensor:
    """Per-camera ``(T, P_c, J, 3)`` as one ``(C, T, P, J, 3)`` (zeros in the empty slots)."""
    P = max(k.shape[1] for k in packed)
    out = packed[0].new_zeros(len(packed), packed[0].shape[0], P, *packed[0].shape[2:])
    for c, k in enumerate(packed):  # a handful of cameras
        out[c, :, : k.shape[1]] = k
    return out


def check_agreement(agreement: list[dict], tracks_dir, max_reprojection_px: float,
                    calib_path) -> list[dict]:  # fmt: skip
    """``agreement`` (:func:`camera_agreement`, :meth:`CameraAgreement.result`) of the
    recording in ``tracks_dir``, checked. Raises ValueError when no joint was triangulated (no
    person seen by two cameras, naming the tracks folder) or naming the cameras whose
    detections disagree with the others (see :data:`DISAGREE_FACTOR`), with every camera's
    median reprojection error: a calibration whose cameras do not match the folders (e.g. two
    swapped). A camera whose detections fit the people triangulated but not kept
    (``median_everyone_px``) is not blamed: the people kept are out of its view or seen poorly
    in it; its ``sees_only_others`` is then true."""
    if all(a["median_px"] is None for a in agreement):
        raise InputError(f"{tracks_dir}: no person is seen by two cameras or more (no joint "
                         "triangulated); check that the folders hold the same scene at the "
                         "same frames, or lower --min-confidence")  # fmt: skip
    limit = DISAGREE_FACTOR * max_reprojection_px
    for a in agreement:  # a camera that fits the people not kept sees others, not these
        everyone = a.get("median_everyone_px")
        far = a["median_px"] is None or a["median_px"] > limit
        a["sees_only_others"] = bool(far and everyone is not None and everyone <= limit)
    bad = [a for a in agreement if a["median_px"] is not None and a["median_px"] > limit
           and not a["sees_only_others"]]  # fmt: skip
    if bad:
        each = ", ".join(f"{a['camera']} ({a['folder']}) "
                         + (f"{a['median_px']:.1f} px" if a["median_px"] is not None else "-")
                         for a in agreement)  # fmt: skip
        who = ", ".join(a["camera"] for a in bad)
        raise InputError(f"{calib_path}: the detections of {who} never agree with the other "
                         f"cameras (median reprojection error over {limit:g} px; per camera: "
                         f"{each}); are the cameras of the calibration matched to the right "
                         "folders?")  # fmt: skip
    return agreement


def write_repaired_2d(cameras: Cameras | Recording, tris: list[Triangulation],
                      folder: str | os.PathLike, fps: float | None = None,
                      chunk_frames: int = CHUNK_FRAMES) -> list[Path]:  # fmt: skip
    """Every camera's detections as OpenPose JSON, one sub-folder per camera named as its input
    folder, with left and right exchanged in the detections of the people ``tris`` where
    their ``swapped (T, C)`` says so (the input of ``smooth`` and ``lift``). Read and written
    ``chunk_frames`` frames at a time; returns the folders."""
    flip = torch.tensor(flip_index(cameras.layout))
    out = [Path(folder) / f.name for f in cameras.folders]
    names = [[Path(x).name for x in files] for files in getattr(cameras, "files", [])]
    for start in range(0, cameras.frames, chunk_frames):  # a chunk of frames at a time
        stop = min(start + chunk_frames, cameras.frames)
        packed = pack_keypoints(cameras, frames=cameras.read(start, stop))
        for c, kp in enumerate(packed):  # a handful of cameras
            for tri in tris:  # a handful of people: their swapped detections, all at once
                if tri.swapped is None:
                    continue
                hit = torch.from_numpy(
                    tri.swapped[start:stop, c] & (tri.person[start:stop, c] >= 0)
                )
                t = hit.nonzero().squeeze(-1)
                q = torch.from_numpy(tri.person[start:stop, c])[t]
                kp[t, q] = kp[t, q].index_select(-2, flip)
            files = (names[c][start:stop] if names
                     else [f"{cameras.folders[c].name}_{i:012d}_keypoints.json"
                           for i in range(start, stop)])  # fmt: skip
            write_openpose(kp, out[c], files, cameras.layout, fps=fps)
    return out
