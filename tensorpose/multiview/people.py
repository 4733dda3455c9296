"""Several people in a multi-camera recording: associated across views in every frame
(:func:`tensorpose.multiview.association.triangulate_everyone`), linked over time into identities
(:func:`link_people`) and ranked (:func:`triangulate_cameras_people`).

Linking follows each person's centre (the mean of its valid joints) with a constant-velocity
model: in each frame the active tracks' predicted centres are matched to the frame's people by a
Hungarian assignment on the distance, gated at ``gate_m * sqrt(gap)`` metres for a track last
seen ``gap`` frames ago; a track unseen for more than ``max_gap`` frames retires, so identities
hold through occlusions of up to ``max_gap`` frames.
"""

from __future__ import annotations

import numpy as np
import torch

from ..errors import InputError
from ..layouts import LAYOUTS, flip_index
from ..ops.assignment import linear_assignment
from .association import triangulate_everyone
from .recording import (
    CHUNK_FRAMES,
    CameraAgreement,
    Cameras,
    Recording,
    check_chunk,
    check_options,
    pack_keypoints,
)
from .triangulate import Triangulation

__all__ = [
    "MAX_PEOPLE",
    "PeopleLinker",
    "centres",
    "check_people",
    "choose_person",
    "link_people",
    "seen_by",
    "split_tracks",
    "triangulate_cameras_one",
    "triangulate_cameras_people",
]

MAX_PEOPLE = 32
"""The most people ``triangulate --people`` writes."""


def check_people(people: int | str | None) -> int | str | None:
    """``None`` (one person), ``"auto"`` or a count 1..MAX_PEOPLE (ints or their text)."""
    if people is None or people == "auto":
        return people
    if isinstance(people, str) and people.strip().isdigit():
        people = int(people)
    if not isinstance(people, int) or isinstance(people, bool) or not 1 <= people <= MAX_PEOPLE:
        raise InputError(f"--people must be auto or a number in 1..{MAX_PEOPLE}, got {people!r}")
    return people


def centres(points: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """``(..., 3)`` mean of the valid joints of ``points (..., J, 3)``; NaN where none is."""
    n = valid.sum(-1)
    s = np.where(valid[..., None], np.nan_to_num(points), 0.0).sum(-2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((n > 0)[..., None], s / n[..., None], np.nan)


class PeopleLinker:
    """Identities over time of per-frame people, fed a chunk of frames at a time: the state of
    the motion model (each track's last centre, velocity and last frame) carries from one chunk
    to the next, so the chunks of a recording get the identities of one pass over it.

    Each track's centre follows a constant-velocity model; in each frame the active tracks'
    predicted centres are matched to the frame's people by a Hungarian assignment on the
    distance, gated at ``gate_m * sqrt(gap)`` metres for a track last seen ``gap`` frames ago; a
    track unseen for more than ``max_gap`` frames retires. Tracks are numbered by first
    appearance.
    """

    def __init__(self, max_gap: int = 30, gate_m: float = 0.5) -> None:
        self.max_gap, self.gate_m = max_gap, gate_m
        self.last = np.zeros((0, 3))
        self.vel = np.zeros((0, 3))
        self.seen_at = np.zeros(0, dtype=np.int64)
        self.t = 0  # frames linked so far

    def link(self, centre: np.ndarray) -> np.ndarray:
        """``(M, T)`` track of each slot of the next ``T`` frames' people, whose centres are
        ``centre (M, T, 3)`` (NaN: no person in that slot); -1: none.

        A loop over frames (the motion model is a recurrence); each step is a Hungarian
        assignment of a handful of people.
        """
        M, T = centre.shape[:2]
        track = np.full((M, T), -1, dtype=np.int64)
        last, vel, seen_at = self.last, self.vel, self.seen_at
        for i in range(T):  # the recurrence over time
            t = self.t + i
            here = np.flatnonzero(np.isfinite(centre[:, i]).all(-1))
            gap = t - seen_at
            active = np.flatnonzero(gap <= self.max_gap)
            pos = centre[here, i]
            pred = last[active] + vel[active] * gap[active, None]
            cost = np.linalg.norm(pred[:, None] - pos[None], axis=-1)  # (A, P)
            cost[cost > self.gate_m * np.sqrt(gap[active])[:, None]] = np.inf
            rows, cols = linear_assignment(cost)
            k = active[rows]
            vel[k] = 0.5 * vel[k] + 0.5 * (pos[cols] - last[k]) / gap[k, None]
            last[k], seen_at[k] = pos[cols], t
            track[here[cols], i] = k
            if len(cols) == len(here):  # every person matched: no new track
                continue
            unmatched = np.ones(len(here), dtype=bool)
            unmatched[cols] = False
            new = np.flatnonzero(unmatched)
            track[here[new], i] = len(last) + np.arange(len(new))
            last = np.concatenate([last, pos[new]])
            vel = np.concatenate([vel, np.zeros((len(new), 3))])
            seen_at = np.concatenate([seen_at, np.full(len(new), t)])
        self.last, self.vel, self.seen_at, self.t = last, vel, seen_at, self.t + T
        return track


def link_people(centre: np.ndarray, max_gap: int = 30, gate_m: float = 0.5) -> np.ndarray:
    """Identities over time of the per-frame people whose centres are ``centre (M, T, 3)``
    (NaN: no person in that slot): ``(M, T)`` track index of each slot (-1: none), tracks
    numbered by first appearance (:class:`PeopleLinker` over all frames at once)."""
    return PeopleLinker(max_gap, gate_m).link(centre)


KEYS = ("points", "errors", "mean_error", "used", "valid", "person", "swapped")
"""The per-frame arrays of a person's :class:`~tensorpose.multiview.triangulate.Triangulation`."""


class _TrackRows:
    """Every track's rows written straight into its own full-length arrays (``np.empty``: the
    pages of frames a track never has are never touched, so memory grows with the rows of the
    people actually found, not with frames x tracks, and nothing is held twice)."""

    def __init__(self, T: int) -> None:
        self.T = T
        self.arrays: list[dict[str, np.ndarray]] = []
        self.present: list[np.ndarray] = []  # per track, the frames it has (T,) bool
        self.valid = np.zeros(0, dtype=np.int64)  # valid joint-frames per track
        self.frames = np.zeros(0, dtype=np.int64)  # frames with a valid joint per track

    def add(self, start: int, track: np.ndarray, slots: dict[str, np.ndarray]) -> None:
        """``track (M, T)`` of the chunk's slots ``slots[key] (M, T, ...)`` from frame
        ``start``."""
        m, t = np.nonzero(track >= 0)
        ids = track[m, t]
        n = int(track.max(initial=-1)) + 1
        for _ in range(len(self.arrays), n):  # the tracks that start in this chunk
            self.arrays.append({key: np.empty((self.T, *slots[key].shape[2:]), slots[key].dtype)
                                for key in KEYS})  # fmt: skip
            self.present.append(np.zeros(self.T, dtype=bool))
        for k in np.unique(ids).tolist():  # the handful of tracks in this chunk
            mine = ids == k
            frames = start + t[mine]
            for key, a in self.arrays[k].items():  # the handful of result arrays
                a[frames] = slots[key][m[mine], t[mine]]
            self.present[k][frames] = True
        valid = slots["valid"][m, t]
        grow = max(n - len(self.valid), 0)
        self.valid = np.concatenate([self.valid, np.zeros(grow, np.int64)])
        self.frames = np.concatenate([self.frames, np.zeros(grow, np.int64)])
        self.valid += np.bincount(ids, valid.sum(-1), len(self.valid)).astype(np.int64)
        self.frames += np.bincount(ids, valid.any(-1), len(self.frames)).astype(np.int64)

    def tracks(self, keep: list[int]) -> list[dict[str, np.ndarray]]:
        """The arrays of the tracks ``keep`` over all frames (NaN, False or -1 where a track is
        absent)."""
        for k in keep:  # the handful of people kept
            absent = ~self.present[k]
            for a in self.arrays[k].values():  # the handful of result arrays
                a[absent] = {"b": False, "i": -1}.get(a.dtype.kind, np.nan)
        return [self.arrays[k] for k in keep]


def split_tracks(slots: dict[str, np.ndarray], track: np.ndarray) -> list[dict[str, np.ndarray]]:
    """Per track, the arrays ``slots[key] (M, T, ...)`` of its slot in each frame (NaN, False
    or -1 where the track has no person)."""
    rows = _TrackRows(track.shape[1])
    rows.add(0, track, slots)
    return rows.tracks(list(range(len(rows.valid))))


def _link_recording(cameras: Cameras | Recording, *, min_confidence: float,
                    max_reprojection_px: float, association_px: float, drop: str,
                    max_gap: int, gate_m: float, device, chunk_frames: int,
                    agreement: CameraAgreement | None,
                    fix_swaps: bool = False) -> _TrackRows:  # fmt: skip
    """Every person of ``cameras`` associated, triangulated and linked over time, a chunk of
    frames at a time: the rows of every track (``fix_swaps``: each person's left and right
    made consistent across cameras first, :mod:`tensorpose.multiview.swaps`)."""
    check_options(min_confidence, max_reprojection_px, drop)
    check_chunk(chunk_frames)
    cal = cameras.calibration.to(device=device, dtype=torch.float64)
    T = cameras.frames
    linker, rows = PeopleLinker(max_gap, gate_m), _TrackRows(T)
    for start in range(0, T, chunk_frames):  # a chunk of frames at a time
        frames = cameras.read(start, min(start + chunk_frames, T))
        packed = pack_keypoints(cameras, frames=frames)
        flip = flip_index(cameras.layout_so_far()) if fix_swaps else None
        res = triangulate_everyone([k.to(device) for k in packed], cal.K, cal.dist,
                                   cal.R, cal.t, min_confidence=min_confidence,
                                   max_error_px=max_reprojection_px,
                                   association_px=association_px, drop=drop,
                                   flip=flip)  # fmt: skip
        del frames
        r = res.numpy().arrays()
        r["points"] = np.where(r["valid"][..., None], r["points"], np.nan)
        track = linker.link(centres(r["points"], r["valid"]))
        if agreement is not None:
            agreement.add(packed, np.ascontiguousarray(r["points"].swapaxes(0, 1)),
                          np.ascontiguousarray(r["valid"].swapaxes(0, 1)), track)  # fmt: skip
        rows.add(start, track, r)
    return rows


def triangulate_cameras_people(
    cameras: Cameras | Recording,
    people: int | None = None,
    *,
    min_confidence: float = 0.3,
    max_reprojection_px: float = 15.0,
    association_px: float = 20.0,
    drop: str = "leave_one_out",
    max_gap: int = 30,
    gate_m: float = 0.5,
    min_frames: float = 0.1,
    device: str | torch.device = "cpu",
    chunk_frames: int = CHUNK_FRAMES,
    agreement: CameraAgreement | None = None,
    fix_swaps: bool = False,
) -> list[Triangulation]:
    """Every person of ``cameras`` seen by two cameras or more, associated, triangulated and
    linked over time; ranked by valid joint-frames (best seen first).

    ``chunk_frames`` frames at a time: each frame's association and triangulation depend on
    that frame alone and the linking's state carries across chunks (:class:`PeopleLinker`), so
    the result is that of one pass; memory holds one chunk's work plus the rows of the people
    found.

    Args:
        cameras: read (:class:`~tensorpose.multiview.recording.Cameras`) or opened
            (:class:`~tensorpose.multiview.recording.Recording`, read a chunk at a time).
        people: how many people to keep (the best seen); ``None``: every track present in at
            least ``min_frames`` of the frames (a fraction).
        min_confidence, max_reprojection_px, association_px, drop: as in
            :func:`tensorpose.multiview.recording.triangulate_cameras`.
        max_gap, gate_m: see :class:`PeopleLinker`.
        agreement: gathers each camera's agreement with the people
            (:class:`~tensorpose.multiview.recording.CameraAgreement`; its ``result`` then
            counts the people kept) from the chunks' detections as they are triangulated.
        fix_swaps: each person's left and right made consistent across cameras before it is
            triangulated (:mod:`tensorpose.multiview.swaps`; each result's ``swapped (T, C)``
            says where).

    Raises:
        ValueError: fewer than ``people`` people found (naming ``--people``), none at all, or
            more than :data:`MAX_PEOPLE`.
    """
    T = cameras.frames
    rows = _link_recording(cameras, min_confidence=min_confidence,
                           max_reprojection_px=max_reprojection_px,
                           association_px=association_px, drop=drop, max_gap=max_gap,
                           gate_m=gate_m, device=device, chunk_frames=chunk_frames,
                           agreement=agreement, fix_swaps=fix_swaps)  # fmt: skip
    order = sorted(range(len(rows.valid)), key=lambda k: -int(rows.valid[k]))
    if people is None:
        keep = [k for k in order if rows.frames[k] >= max(min_frames * T, 1)]
    else:
        keep = order[:people]
    found = len(keep) if people is None else len(rows.valid)
    if people is not None and found < people:
        raise InputError(f"--people {people}: found only {found} people seen by two cameras "
                         f"or more in {cameras.folders[0].parent}")  # fmt: skip
    if not keep:
        raise InputError(f"--people auto: no person seen by two cameras or more in "
                         f"{cameras.folders[0].parent}")  # fmt: skip
    if len(keep) > MAX_PEOPLE:
        raise InputError(f"--people auto found {len(keep)} people, more than {MAX_PEOPLE}: "
                         f"pass --people N")  # fmt: skip
    names = list(LAYOUTS[cameras.layout])
    tris = [Triangulation(**arrays, names=names) for arrays in rows.tracks(keep)]
    if agreement is not None:
        agreement.keep = keep  # the tracks of ``tris``, in their order
    return tris


STEADY = 0.5
"""A camera counts towards how well a person is seen (:func:`seen_by`) when it sees the person
in at least this share of the person's frames: a camera that joins a person only now and then
is most often a mistaken association (another person's detection that happens to fit)."""


def seen_by(person: np.ndarray, used: np.ndarray, valid: np.ndarray) -> dict:
    """How well the cameras see one person: ``person (T, C)`` its detection per camera (-1:
    none), ``used (T, J, C)``, ``valid (T, J)``. A camera sees the person in a frame when it
    gave a valid joint. Returns ``frames`` (frames with a valid joint), ``per_camera`` (frames
    each camera sees it), ``camera_frames`` (their sum) and ``steady_camera_frames``: the sum
    over the cameras that see it in at least :data:`STEADY` of its frames (the ranking of
    :func:`choose_person`)."""
    sees = (used & valid[..., None]).any(-2) & (person >= 0)  # (T, C)
    frames = int(valid.any(-1).sum())
    per = sees.sum(0)
    steady = per >= max(STEADY * frames, 1)
    return {"frames": frames, "per_camera": per.tolist(), "camera_frames": int(per.sum()),
            "steady_camera_frames": int(per[steady].sum())}  # fmt: skip


def choose_person(seen: list[dict]) -> int:
    """The person most cameras see longest among :func:`seen_by`'s figures of each: the most
    camera-frames of the cameras that see it steadily (:data:`STEADY`); ties: the most
    camera-frames, then the first. Never the largest in one view: a person seen by one camera
    is not triangulated at all."""
    return max(
        range(len(seen)),
        key=lambda k: (seen[k]["steady_camera_frames"], seen[k]["camera_frames"], -k),
    )


def triangulate_cameras_one(
    cameras: Cameras | Recording,
    *,
    min_confidence: float = 0.3,
    max_reprojection_px: float = 15.0,
    association_px: float = 20.0,
    drop: str = "leave_one_out",
    max_gap: int = 30,
    gate_m: float = 0.5,
    min_frames: float = 0.1,
    device: str | torch.device = "cpu",
    chunk_frames: int = CHUNK_FRAMES,
    agreement: CameraAgreement | None = None,
    fix_swaps: bool = False,
) -> tuple[Triangulation, list[dict], int]:
    """One person of ``cameras``: every person associated, triangulated and linked over time
    (as :func:`triangulate_cameras_people`), then the one most cameras see longest
    (:func:`choose_person`), in every frame (empty where that person is not seen).

    Returns the person's triangulation, the figures of the people (each present in at least
    ``min_frames`` of the frames, and the one chosen; ranked as ``--people auto`` ranks them,
    by valid joint-frames: :func:`seen_by`'s plus ``centre_m``, the median of its centre) and
    the index of the one chosen among them. With nobody seen by two cameras, an empty
    triangulation (every joint invalid) and no people. ``agreement`` then counts that person.
    """
    T = cameras.frames
    rows = _link_recording(cameras, min_confidence=min_confidence,
                           max_reprojection_px=max_reprojection_px,
                           association_px=association_px, drop=drop, max_gap=max_gap,
                           gate_m=gate_m, device=device, chunk_frames=chunk_frames,
                           agreement=agreement, fix_swaps=fix_swaps)  # fmt: skip
    names = list(LAYOUTS[cameras.layout])
    order = sorted(range(len(rows.valid)), key=lambda k: -int(rows.valid[k]))
    if not order:
        C, J = len(cameras.names), len(names)
        tri = Triangulation(np.full((T, J, 3), np.nan), np.full((T, J, C), np.nan),
                            np.zeros((T, J, C), bool), np.full((T, J), np.nan),
                            np.zeros((T, J), bool), np.full((T, C), -1), names,
                            np.zeros((T, C), bool))  # fmt: skip
        if agreement is not None:
            agreement.keep = []
        return tri, [], -1
    arrays = rows.tracks(order)  # every track's rows, best seen first
    seen = [seen_by(a["person"], a["used"], a["valid"]) for a in arrays]
    best = choose_person(seen)
    keep = [k for k in range(len(order))
            if rows.frames[order[k]] >= max(min_frames * T, 1) or k == best]  # fmt: skip
    with np.errstate(all="ignore"):
        people = [seen[k] | {"centre_m": np.nanmedian(centres(arrays[k]["points"],
                                                             arrays[k]["valid"]), 0).tolist()}
                  for k in keep]  # fmt: skip
    if agreement is not None:
        agreement.keep = [order[best]]
    return Triangulation(**arrays[best], names=names), people, keep.index(best)
