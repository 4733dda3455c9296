"""Left and right made consistent across cameras: a detector that sees a person from behind
often labels the left limbs right and the right ones left (BlazePose on the balancing trial's
cam02, about 30 frames in 100). Several cameras that see the same person tell which labelling
is consistent (:func:`find_swaps`).

For each person, frame and camera, the person's joints are triangulated from the OTHER cameras
alone (camera dropping as in :func:`tensorpose.multiview.triangulate.triangulate_points`, so one
more swapped camera among them is dropped) and projected into the camera; its detection as
labelled and with every left/right pair exchanged (:func:`tensorpose.layouts.flip_index`) are
compared with the projection over the paired joints both labellings see. The swapped labelling
is kept only when it agrees clearly better: its median error at most ``ratio`` of the
labelled one's and ``margin_px`` below it, on at least ``min_joints`` joints. A camera that sees
the person side on, its left and right joints close together, decides nothing: there both
labellings fit about as well. Every frame, camera and joint at once (no loop over them).

A camera whose detection is labelled the other way round mostly fails to join the person at
all (its two-view costs with the other cameras are large): :func:`rescue_swapped` joins the
detections left over that fit the person's triangulated joints once swapped (and clearly not
as labelled), by the same rule.
"""

from __future__ import annotations

import torch

from .dlt import reprojection_errors
from .triangulate import _robust

__all__ = [
    "FIT_FACTOR",
    "MARGIN_PX",
    "MIN_JOINTS",
    "RATIO",
    "apply_swaps",
    "find_swaps",
    "rescue_swapped",
]

MARGIN_PX = 15.0
"""The swapped labelling's median error must be this many pixels below the labelled one's."""
RATIO = 0.5
"""... and at most this share of it."""
MIN_JOINTS = 4
"""... over at least this many paired joints that both labellings see."""
FIT_FACTOR = 3.0
"""A detection left over joins a person swapped when its median error against the person's
joints, swapped, is within this many times ``max_error_px`` (45 px by default: the joints are
triangulated from the other cameras, each with its own error; the camera dropping of the
final triangulation then keeps or drops it joint by joint)."""


def apply_swaps(x: torch.Tensor, swap: torch.Tensor, flip: torch.Tensor) -> torch.Tensor:
    """``x (..., J, C, F)`` per joint and camera, with the joints of the cameras where ``swap
    (..., C)`` exchanged left for right (``flip (J,)``: :func:`tensorpose.layouts.flip_index`)."""
    flipped = x.index_select(-3, flip)
    return torch.where(swap.unsqueeze(-2).unsqueeze(-1), flipped, x)


def find_swaps(
    f: torch.Tensor,
    seen: torch.Tensor,
    pixels: torch.Tensor,
    K: torch.Tensor,
    dist: torch.Tensor,
    R: torch.Tensor,
    t: torch.Tensor,
    flip: torch.Tensor,
    max_error_px: float = 15.0,
    margin_px: float = MARGIN_PX,
    ratio: float = RATIO,
    min_joints: int = MIN_JOINTS,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Which cameras label a person's left and right the other way round from the rest.

    Args:
        f: ``(..., J, C, 4)`` DLT features of the person's detection in each camera
            (:func:`tensorpose.multiview.dlt._dlt_features` of the undistorted pixels).
        seen: ``(..., J, C)`` the joints each camera sees (confident enough).
        pixels: ``(..., J, C, 2)`` the observed (distorted) pixels.
        K, dist, R, t: the ``C`` cameras.
        flip: ``(J,)`` long, :func:`tensorpose.layouts.flip_index`.
        max_error_px: the triangulation's camera-dropping threshold.
        margin_px, ratio, min_joints: the decision (see the module notes).

    Returns:
        ``swap (..., C)`` bool, and the median errors (pixels) of the labelled and the swapped
        labelling ``(..., C)`` (NaN where fewer than ``min_joints`` joints compare).
    """
    C = seen.shape[-1]
    dev = seen.device
    others = ~torch.eye(C, dtype=torch.bool, device=dev)  # (held out, camera)
    # each camera held out in turn: (..., C_h, J, C)
    used = seen.unsqueeze(-3) & others[:, None, :]
    fx = f.unsqueeze(-4).expand(*used.shape, 4)
    px = pixels.unsqueeze(-4).expand(*used.shape, 2)
    tri = _robust(fx, used, px, K, dist, R, t, max_error_px, 2, "leave_one_out")
    X = tri.points  # (..., C_h, J, 3)
    ok = tri.valid  # (..., C_h, J)
    # every camera's pixels, as labelled and swapped, against each held-out triangulation
    both = torch.stack([pixels, pixels.index_select(-3, flip)])  # (2, ..., J, C, 2)
    err = reprojection_errors(X, both.unsqueeze(-4), K, dist, R, t)  # (2, ..., C_h, J, C)
    err = err.diagonal(dim1=-3, dim2=-1)  # (2, ..., J, C): camera h against its own points
    paired = flip != torch.arange(len(flip), device=dev)  # (J,)
    compare = (seen & seen.index_select(-2, flip) & paired[:, None]
               & ok.transpose(-1, -2))  # (..., J, C)  # fmt: skip
    return _decide(err[0], err[1], compare, ratio, margin_px, min_joints)


def _decide(plain: torch.Tensor, swapped: torch.Tensor, compare: torch.Tensor, ratio: float,
            margin_px: float, min_joints: int) -> tuple:  # fmt: skip
    """Median errors over the joints ``compare`` (dim -2) of both labellings and the rule."""
    n = compare.sum(-2)
    med = torch.where(compare, torch.stack([plain, swapped]), float("nan")).nanmedian(-2).values
    enough = n >= min_joints
    a, b = (torch.where(enough, m, float("nan")) for m in med.unbind(0))
    return enough & (b <= ratio * a) & (b + margin_px <= a), a, b


def rescue_swapped(
    person: torch.Tensor,
    points: torch.Tensor,
    valid: torch.Tensor,
    xy: list[torch.Tensor],
    seen: list[torch.Tensor],
    K: torch.Tensor,
    dist: torch.Tensor,
    R: torch.Tensor,
    t: torch.Tensor,
    flip: torch.Tensor,
    max_error_px: float = 15.0,
    margin_px: float = MARGIN_PX,
    ratio: float = RATIO,
    min_joints: int = MIN_JOINTS,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Detections that no person took and that fit a person once left and right are exchanged.

    Args:
        person: ``(..., T, C)`` each person's detection per camera (-1: none).
        points, valid: ``(..., T, J, 3)``, ``(..., T, J)`` the people's triangulated joints.
        xy, seen: per camera ``(T, P_c, J, 2)`` pixels and ``(T, P_c, J)`` the joints seen.
        K, dist, R, t, flip: the cameras and :func:`tensorpose.layouts.flip_index`.
        max_error_px: a swapped detection joins when its median error is within
            :data:`FIT_FACTOR` times it.
        margin_px, ratio, min_joints: as in :func:`find_swaps` (and clearly worse as labelled).

    Returns:
        ``person`` with those detections joined and ``rescued (..., T, C)``: where they did
        (each detection joins at most one person: the one it fits best).
    """
    C = len(xy)
    dev = person.device
    lead = person.shape[:-1]  # (..., T)
    people = person.reshape(-1, *person.shape[-2:])  # (M, T, C)
    pts = points.reshape(-1, *points.shape[-3:])  # (M, T, J, 3)
    ok = valid.reshape(-1, *valid.shape[-2:])
    M, T = people.shape[:2]
    paired = flip != torch.arange(len(flip), device=dev)
    out, rescued = people.clone(), torch.zeros_like(people, dtype=torch.bool)
    frame = torch.arange(T, device=dev)
    for c in range(C):  # a handful of cameras; each handles every person, frame, detection
        P = seen[c].shape[1]
        if P == 0:
            continue
        both = torch.stack([xy[c], xy[c].index_select(-2, flip)])  # (2, T, P, J, 2)
        err = reprojection_errors(
            pts[:, :, None],
            both[:, None, ..., None, :],
            K[c : c + 1],
            dist[c : c + 1],
            R[c : c + 1],
            t[c : c + 1],
        )[..., 0]
        # err: (2, M, T, P, J); the joints both labellings see, where the person is valid
        compare = (seen[c] & seen[c].index_select(-1, flip) & paired)[None] & ok[:, :, None]
        swap, _, b = _decide(err[0].transpose(-1, -2), err[1].transpose(-1, -2),
                             compare.transpose(-1, -2), ratio, margin_px, min_joints)  # fmt: skip
        taken = torch.zeros(T, P, dtype=torch.bool, device=dev)
        has = people[..., c] >= 0  # (M, T)
        taken[frame.expand(M, T)[has], people[..., c][has]] = True
        fit = swap & (b <= FIT_FACTOR * max_error_px) & ~taken & ~has[..., None]  # (M, T, P)
        score = torch.where(fit, b, float("inf"))
        best = score == score.amin(0, keepdim=True)  # each detection: the person it fits best
        score = torch.where(best, score, float("inf"))
        s, q = score.min(-1)  # (M, T): each person's best detection
        join = torch.isfinite(s)
        out[..., c] = torch.where(join, q, out[..., c])
        rescued[..., c] = join
    return out.reshape(*lead, C), rescued.reshape(*lead, C)
