"""Several people in a multi-camera recording: associated across views in every frame
(:func:`tensorpose.ops.multiperson.triangulate_everyone`), linked over time into identities
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

from .io.openpose import _assign
from .layouts import LAYOUTS
from .multiview import Cameras, Triangulation, check_options, pack_keypoints
from .ops.multiperson import triangulate_everyone

__all__ = ["MAX_PEOPLE", "centres", "link_people", "split_tracks", "triangulate_cameras_people"]

MAX_PEOPLE = 32
"""The most people ``triangulate --people`` writes."""


def centres(points: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """``(..., 3)`` mean of the valid joints of ``points (..., J, 3)``; NaN where none is."""
    n = valid.sum(-1)
    s = np.where(valid[..., None], np.nan_to_num(points), 0.0).sum(-2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((n > 0)[..., None], s / n[..., None], np.nan)


def link_people(centre: np.ndarray, max_gap: int = 30, gate_m: float = 0.5) -> np.ndarray:
    """Identities over time of the per-frame people whose centres are ``centre (M, T, 3)``
    (NaN: no person in that slot): ``(M, T)`` track index of each slot (-1: none), tracks
    numbered by first appearance.

    A loop over frames (the motion model is a recurrence); each step is a Hungarian
    assignment of a handful of people.
    """
    M, T = centre.shape[:2]
    track = np.full((M, T), -1, dtype=np.int64)
    last = np.zeros((0, 3))
    vel = np.zeros((0, 3))
    seen_at = np.zeros(0, dtype=np.int64)
    for t in range(T):  # the recurrence over time
        here = np.flatnonzero(np.isfinite(centre[:, t]).all(-1))
        gap = t - seen_at
        active = np.flatnonzero(gap <= max_gap)
        pos = centre[here, t]
        pred = last[active] + vel[active] * gap[active, None]
        cost = np.linalg.norm(pred[:, None] - pos[None], axis=-1)  # (A, P)
        cost[cost > gate_m * np.sqrt(gap[active])[:, None]] = np.inf
        rows, cols = _assign(cost)
        k = active[rows]
        vel[k] = 0.5 * vel[k] + 0.5 * (pos[cols] - last[k]) / gap[k, None]
        last[k], seen_at[k] = pos[cols], t
        track[here[cols], t] = k
        new = np.setdiff1d(np.arange(len(here)), cols)
        track[here[new], t] = len(last) + np.arange(len(new))
        last = np.concatenate([last, pos[new]])
        vel = np.concatenate([vel, np.zeros((len(new), 3))])
        seen_at = np.concatenate([seen_at, np.full(len(new), t)])
    return track


def split_tracks(slots: dict[str, np.ndarray], track: np.ndarray) -> list[dict[str, np.ndarray]]:
    """Per track, the arrays ``slots[key] (M, T, ...)`` of its slot in each frame (NaN, False
    or -1 where the track has no person)."""
    T = track.shape[1]
    out = []
    frames = np.arange(T)
    for k in range(int(track.max(initial=-1)) + 1):  # a loop over the tracks (people)
        mine = track == k  # (M, T), at most one slot per frame
        slot = mine.argmax(0)
        here = mine.any(0)
        arrays = {}
        for key, a in slots.items():  # the handful of result arrays
            fill = {"b": False, "i": -1}.get(a.dtype.kind, np.nan)
            g = a[slot, frames]
            mask = here.reshape(T, *[1] * (g.ndim - 1))
            arrays[key] = np.where(mask, g, np.array(fill, dtype=a.dtype))
        out.append(arrays)
    return out


def triangulate_cameras_people(
    cameras: Cameras,
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
) -> list[Triangulation]:
    """Every person of ``cameras`` seen by two cameras or more, associated, triangulated and
    linked over time; ranked by valid joint-frames (best seen first).

    Args:
        people: how many people to keep (the best seen); ``None``: every track present in at
            least ``min_frames`` of the frames (a fraction).
        min_confidence, max_reprojection_px, association_px, drop: as in
            :func:`tensorpose.multiview.triangulate_cameras`.
        max_gap, gate_m: see :func:`link_people`.

    Raises:
        ValueError: fewer than ``people`` people found (naming ``--people``), none at all, or
            more than :data:`MAX_PEOPLE`.
    """
    check_options(min_confidence, max_reprojection_px, drop)
    keypoints = pack_keypoints(cameras, device)
    cal = cameras.calibration.to(device=device, dtype=torch.float64)
    res = triangulate_everyone(keypoints, cal.K, cal.dist, cal.R, cal.t,
                               min_confidence=min_confidence, max_error_px=max_reprojection_px,
                               association_px=association_px, drop=drop)  # fmt: skip
    r = {k: v.cpu().numpy() for k, v in vars(res).items()}
    r["points"] = np.where(r["valid"][..., None], r["points"], np.nan)
    track = link_people(centres(r["points"], r["valid"]), max_gap, gate_m)
    tracks = split_tracks({k: r[k] for k in ("points", "errors", "mean_error", "used", "valid",
                                             "person")}, track)  # fmt: skip
    T = cameras.frames
    order = sorted(range(len(tracks)), key=lambda k: -int(tracks[k]["valid"].sum()))
    if people is None:
        keep = [k for k in order if (tracks[k]["valid"].any(-1)).sum() >= max(min_frames * T, 1)]
    else:
        keep = order[:people]
    found = len(keep) if people is None else len(tracks)
    if people is not None and found < people:
        raise ValueError(f"--people {people}: found only {found} people seen by two cameras "
                         f"or more in {cameras.folders[0].parent}")  # fmt: skip
    if not keep:
        raise ValueError(f"--people auto: no person seen by two cameras or more in "
                         f"{cameras.folders[0].parent}")  # fmt: skip
    if len(keep) > MAX_PEOPLE:
        raise ValueError(f"--people auto found {len(keep)} people, more than {MAX_PEOPLE}: "
                         f"pass --people N")  # fmt: skip
    names = list(LAYOUTS[cameras.layout])
    return [Triangulation(**{k: tracks[i][k] for k in ("points", "errors", "mean_error", "used",
                                                       "valid", "person")}, names=names)
            for i in keep]  # fmt: skip
