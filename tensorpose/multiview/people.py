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

import warnings

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

ROWS_BUDGET = 1 << 30
"""Bytes of per-track rows :class:`TrackStore` holds in one pass over a recording; beyond it the
rows are dropped and the people kept are triangulated again in a second pass, which holds only
theirs (:func:`_track_rows`)."""

ASSOCIATION_BUDGET = 1 << 30
"""Bytes the association of one batch of frames may take (:func:`_batch_frames`): a crowd is
associated a few frames at a time."""

_PAIR_BYTES = 6_000
"""Measured bytes of association work per frame, pair of cameras and pair of people (four
cameras: 16 people 9.5 MB per frame, 32 people 31 MB, 60 people 90 MB)."""


def _batch_frames(frames: list[list[np.ndarray]], chunk_frames: int) -> int:
    """Frames associated at once so that the work of the most crowded frame of ``frames`` (per
    camera, per frame ``(P, K, 3)``) stays within :data:`ASSOCIATION_BUDGET`."""
    C = len(frames)
    most = max((len(p) for cam in frames for p in cam), default=0)
    per_frame = _PAIR_BYTES * max(most, 1) ** 2 * max(C * (C - 1) // 2, 1)
    return max(1, min(chunk_frames, ASSOCIATION_BUDGET // per_frame))


class TrackStore:
    """The rows of every track, held only for the frames the track was seen (memory grows with
    the people found, not with frames x tracks), and per track the figures that rank it:
    valid joint-frames, frames with a valid joint, frames each camera sees it (:func:`seen_by`)
    and its centre in each frame seen.

    ``only``: hold the rows of these tracks alone (a second pass). Past ``budget`` bytes of rows
    (default :data:`ROWS_BUDGET`) the rows are dropped (:attr:`dropped`); the figures are
    always complete.
    """

    def __init__(self, T: int, only: set[int] | None = None, budget: float | None = None) -> None:
        self.T, self.only = T, only
        self.budget = ROWS_BUDGET if budget is None else budget
        self.rows: dict[int, list[tuple[np.ndarray, dict[str, np.ndarray]]]] = {}
        self.centre: list[list[np.ndarray]] = []  # per track, (n, 3) per chunk
        self.valid = np.zeros(0, dtype=np.int64)  # valid joint-frames per track
        self.frames = np.zeros(0, dtype=np.int64)  # frames with a valid joint per track
        self.per_camera = np.zeros((0, 0), dtype=np.int64)  # (tracks, C) frames seen
        self.nbytes, self.dropped = 0, False

    def add(self, start: int, track: np.ndarray, slots: dict[str, np.ndarray]) -> None:
        """``track (M, T)`` of the chunk's slots ``slots[key] (M, T, ...)`` from frame
        ``start``."""
        m, t = np.nonzero(track >= 0)
        ids = track[m, t]
        n = max(int(track.max(initial=-1)) + 1, len(self.valid))
        grow = n - len(self.valid)
        C = slots["person"].shape[-1]
        valid = slots["valid"][m, t]  # (rows, J)
        sees = (slots["used"][m, t] & valid[..., None]).any(-2) & (slots["person"][m, t] >= 0)
        self.valid = np.concatenate([self.valid, np.zeros(grow, np.int64)])
        self.frames = np.concatenate([self.frames, np.zeros(grow, np.int64)])
        self.per_camera = np.concatenate([self.per_camera.reshape(-1, C),
                                          np.zeros((grow, C), np.int64)])  # fmt: skip
        self.centre += [[] for _ in range(grow)]
        self.valid += np.bincount(ids, valid.sum(-1), n).astype(np.int64)
        self.frames += np.bincount(ids, valid.any(-1), n).astype(np.int64)
        for c in range(C):  # a handful of cameras
            self.per_camera[:, c] += np.bincount(ids, sees[:, c], n).astype(np.int64)
        here = centres(slots["points"][m, t], valid)  # (rows, 3)
        order = np.argsort(ids, kind="stable")  # rows grouped by track, in time order
        bounds = np.searchsorted(ids[order], np.arange(n + 1))
        for k in np.flatnonzero(np.diff(bounds)).tolist():  # the tracks seen in this chunk
            rows = order[bounds[k] : bounds[k + 1]]
            self.centre[k].append(here[rows])
            if self.dropped or (self.only is not None and k not in self.only):
                continue
            part = {key: slots[key][m[rows], t[rows]] for key in KEYS}
            self.rows.setdefault(k, []).append((start + t[rows], part))
            self.nbytes += sum(a.nbytes for a in part.values())
        if self.nbytes > self.budget:  # too many rows: the second pass holds the kept ones
            self.rows, self.nbytes, self.dropped = {}, 0, True

    def seen(self, k: int) -> dict:
        """:func:`seen_by`'s figures of track ``k``."""
        frames, per = int(self.frames[k]), self.per_camera[k]
        steady = per >= max(STEADY * frames, 1)
        return {"frames": frames, "per_camera": per.tolist(), "camera_frames": int(per.sum()),
                "steady_camera_frames": int(per[steady].sum())}  # fmt: skip

    def centre_m(self, k: int) -> list[float]:
        """The median over frames of track ``k``'s centre (NaN: never a valid joint)."""
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmedian(np.concatenate(self.centre[k]), 0).tolist()

    def track(self, k: int, J: int, C: int) -> dict[str, np.ndarray]:
        """Track ``k``'s arrays over every frame (NaN, False or -1 where it is absent)."""
        parts = self.rows.get(k, [])
        shapes = {"points": (J, 3), "errors": (J, C), "mean_error": (J,), "used": (J, C),
                  "valid": (J,), "person": (C,), "swapped": (C,)}  # fmt: skip
        dtypes = {"points": np.float64, "errors": np.float64, "mean_error": np.float64,
                  "used": bool, "valid": bool, "person": np.int64, "swapped": bool}  # fmt: skip
        out = {}
        for key in KEYS:  # the handful of result arrays
            dtype = parts[0][1][key].dtype if parts else np.dtype(dtypes[key])
            fill = {"b": False, "i": -1}.get(dtype.kind, np.nan)
            a = np.full((self.T, *shapes[key]), fill, dtype)
            for frames, part in parts:  # the chunks the track was seen in
                a[frames] = part[key]
            out[key] = a
        return out

    @staticmethod
    def dense_bytes(J: int, C: int) -> int:
        """Bytes of one track's arrays per frame (:meth:`track`)."""
        return J * 3 * 8 + J * C * 8 + J * 8 + J * C + J + C * 8 + C


def split_tracks(slots: dict[str, np.ndarray], track: np.ndarray) -> list[dict[str, np.ndarray]]:
    """Per track, the arrays ``slots[key] (M, T, ...)`` of its slot in each frame (NaN, False
    or -1 where the track has no person)."""
    store = TrackStore(track.shape[1], budget=np.inf)
    store.add(0, track, slots)
    J, C = slots["valid"].shape[-1], slots["person"].shape[-1]
    return [store.track(k, J, C) for k in range(len(store.valid))]


def _link_recording(cameras: Cameras | Recording, *, min_confidence: float,
                    max_reprojection_px: float, association_px: float, drop: str,
                    max_gap: int, gate_m: float, device, chunk_frames: int,
                    agreement: CameraAgreement | None, fix_swaps: bool = False,
                    most_at_once: int | None = None, only: set[int] | None = None,
                    budget: float | None = None) -> TrackStore:  # fmt: skip
    """Every person of ``cameras`` associated, triangulated and linked over time, a chunk of
    frames at a time (a crowded chunk in smaller batches, :func:`_batch_frames`): the rows and
    figures of every track (:class:`TrackStore`; ``only``: the rows of those tracks alone).
    ``fix_swaps``: each person's left and right made consistent across cameras first
    (:mod:`tensorpose.multiview.swaps`). ``most_at_once``: more people than that in one frame
    is an error naming ``--people auto`` and the frame."""
    check_options(min_confidence, max_reprojection_px, drop)
    check_chunk(chunk_frames)
    cal = cameras.calibration.to(device=device, dtype=torch.float64)
    T = cameras.frames
    linker, store = PeopleLinker(max_gap, gate_m), TrackStore(T, only, budget)
    for start in range(0, T, chunk_frames):  # a chunk of frames at a time
        frames = cameras.read(start, min(start + chunk_frames, T))
        n = len(frames[0])
        step = _batch_frames(frames, chunk_frames)
        for b in range(0, n, step):  # one batch, or a crowd a few frames at a time
            batch = [f[b : b + step] for f in frames]
            packed = pack_keypoints(cameras, frames=batch)
            flip = flip_index(cameras.layout_so_far()) if fix_swaps else None
            res = triangulate_everyone([k.to(device) for k in packed], cal.K, cal.dist,
                                       cal.R, cal.t, min_confidence=min_confidence,
                                       max_error_px=max_reprojection_px,
                                       association_px=association_px, drop=drop,
                                       flip=flip)  # fmt: skip
            r = res.numpy().arrays()
            r["points"] = np.where(r["valid"][..., None], r["points"], np.nan)
            at_once = r["valid"].any(-1).sum(0)  # (T,) people per frame
            if most_at_once is not None and at_once.max(initial=0) > most_at_once:
                t = start + b + int(np.argmax(at_once > most_at_once))
                raise InputError(f"--people auto: {int(at_once.max())} people at once in frame "
                                 f"{t} of {cameras.folders[0].parent}, more than the "
                                 f"{most_at_once} it tracks; pass --people N (at most "
                                 f"{most_at_once}) to keep the N best seen")  # fmt: skip
            track = linker.link(centres(r["points"], r["valid"]))
            if agreement is not None:
                agreement.add(packed, np.ascontiguousarray(r["points"].swapaxes(0, 1)),
                              np.ascontiguousarray(r["valid"].swapaxes(0, 1)),
                              track)  # fmt: skip
            store.add(start + b, track, r)
        del frames
    return store


def _rows_of(cameras: Cameras | Recording, store: TrackStore, keep: list[int],
             options: dict) -> TrackStore:  # fmt: skip
    """``store``, or where it dropped its rows (over :data:`ROWS_BUDGET`), a second pass over
    the recording that holds the rows of the tracks ``keep`` alone (the same linking: the same
    track numbers)."""
    if not store.dropped:
        return store
    return _link_recording(cameras, **options, agreement=None, only=set(keep), budget=np.inf)


DENSE_BUDGET = 1 << 30
"""Bytes of the arrays of the people ``triangulate --people`` returns (every frame of each)."""


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
    options = dict(min_confidence=min_confidence, max_reprojection_px=max_reprojection_px,
                   association_px=association_px, drop=drop, max_gap=max_gap, gate_m=gate_m,
                   device=device, chunk_frames=chunk_frames, fix_swaps=fix_swaps)  # fmt: skip
    rows = _link_recording(cameras, **options, agreement=agreement,
                           most_at_once=MAX_PEOPLE if people is None else None)  # fmt: skip
    order = sorted(range(len(rows.valid)), key=lambda k: -int(rows.valid[k]))
    if people is None:
        keep = [k for k in order if rows.frames[k] >= max(min_frames * T, 1)]
    else:
        keep = order[:people]
    found = len(keep) if people is None else len(rows.valid)
    if people is not None and found < people:
        raise InputError(f"--people {people}: found only {found} people seen by two cameras "
                         f"or more in {cameras.folders[0].parent}")  # fmt: skip
    if not keep and len(rows.valid):
        longest = int(rows.frames.max())
        raise InputError(f"--people auto: no person is present in {min_frames:.0%} of the "
                         f"frames of {cameras.folders[0].parent} or more (the longest track "
                         f"has {longest} of {T} frames: an identity restarts when its person "
                         f"jumps or is unseen for over {max_gap} frames); pass --people N to "
                         f"keep the N best seen")  # fmt: skip
    if not keep:
        raise InputError(f"--people auto: no person seen by two cameras or more in "
                         f"{cameras.folders[0].parent}")  # fmt: skip
    if len(keep) > MAX_PEOPLE:
        raise InputError(f"--people auto found {len(keep)} people, more than {MAX_PEOPLE}: "
                         f"pass --people N")  # fmt: skip
    names = list(LAYOUTS[cameras.layout])
    J, C = len(names), len(cameras.names)
    need = len(keep) * T * TrackStore.dense_bytes(J, C)
    if need > DENSE_BUDGET:
        raise InputError(f"--people: {len(keep)} people over {T} frames need "
                         f"{need / 2**30:.1f} GiB of results, over the "
                         f"{DENSE_BUDGET / 2**30:g} GiB limit: keep fewer (--people N) or "
                         f"triangulate the recording in parts")  # fmt: skip
    rows = _rows_of(cameras, rows, keep, options)
    tris = [Triangulation(**rows.track(k, J, C), names=names) for k in keep]
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
    options = dict(min_confidence=min_confidence, max_reprojection_px=max_reprojection_px,
                   association_px=association_px, drop=drop, max_gap=max_gap, gate_m=gate_m,
                   device=device, chunk_frames=chunk_frames, fix_swaps=fix_swaps)  # fmt: skip
    rows = _link_recording(cameras, **options, agreement=agreement)
    names = list(LAYOUTS[cameras.layout])
    J, C = len(names), len(cameras.names)
    order = sorted(range(len(rows.valid)), key=lambda k: -int(rows.valid[k]))
    if not order:
        tri = Triangulation(np.full((T, J, 3), np.nan), np.full((T, J, C), np.nan),
                            np.zeros((T, J, C), bool), np.full((T, J), np.nan),
                            np.zeros((T, J), bool), np.full((T, C), -1), names,
                            np.zeros((T, C), bool))  # fmt: skip
        if agreement is not None:
            agreement.keep = []
        return tri, [], -1
    seen = [rows.seen(k) for k in order]  # every track, best seen first
    best = choose_person(seen)
    keep = [k for k in range(len(order))
            if rows.frames[order[k]] >= max(min_frames * T, 1) or k == best]  # fmt: skip
    people = [seen[k] | {"centre_m": rows.centre_m(order[k])} for k in keep]
    if agreement is not None:
        agreement.keep = [order[best]]
    rows = _rows_of(cameras, rows, [order[best]], options)
    return Triangulation(**rows.track(order[best], J, C), names=names), people, keep.index(best)
