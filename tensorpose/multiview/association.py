"""Cross-view association of people and their triangulation (:func:`triangulate_people`).

Every detection of every camera is a reference; it is triangulated joint by joint with every
detection of every other camera (two views at a time, all frames at once); each other camera
joins with its detection of lowest mean two-view reprojection error if below
``association_px``. The candidate with the most supporting (joint, camera) observations wins
the frame and is triangulated with :func:`~tensorpose.multiview.triangulate.triangulate_points`'s
camera dropping.

On CPU the work is restricted to the rows that need it (``nonzero``, free there); on other
devices every row runs at fixed shapes without host synchronisation. Both give the same
values (tested).

Every person across cameras, every frame at once (:func:`triangulate_everyone`):

1. Two-view costs of every detection pair of every camera pair, all frames in one batch
   (:func:`_pair_costs`): the mean reprojection error of the
   joint-by-joint two-view triangulation over the joints both detections see, and its support
   (those joints within ``max_error_px`` in both views).
2. Candidates (:func:`candidates`): every detection ``p`` of every camera ``a`` is a reference;
   each other camera joins it with its cheapest detection if the two-view cost is below
   ``association_px``. A candidate's score counts the supporting (joint, camera) observations
   over all its cameras (the reference's joints plus, per joined camera, the joints that agree
   in both views) minus ``e / (1 + e)`` for its mean cost ``e``. A candidate no other camera
   joins (a person seen by one camera) does not compete.
3. People are assigned jointly over all cameras, best first (:func:`select_people`): the best
   candidate of each frame is a person; its detections are taken, the candidates are rebuilt
   from the detections left (a taken detection neither references nor joins) and the next best
   is the next person, until none is left (all frames at once; a loop over the people of a
   frame). The first person is :func:`triangulate_people`'s
   winner; each later one is that rule's winner once the earlier people are removed, so a
   person's detections, and its 3D, do not depend on who else is in the views.
4. Each person's detections are triangulated with camera dropping
   (:func:`tensorpose.multiview.triangulate.triangulate_points`'s rule), every person and frame at
   once.

Identities over time are not decided here: a person's slot may change between frames
(:func:`tensorpose.multiview.people.link_people` links them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..ops._checks import check_tensor
from ..ops.camera import undistort_points
from .dlt import (
    _UPPER,
    _check_cameras,
    _compact,
    _dlt_basis,
    _dlt_features,
    _on_rows,
    _solve_upper,
    reprojection_errors,
)
from .swaps import apply_swaps, find_swaps, rescue_swapped
from .triangulate import Triangulation, _check_drop, _robust

__all__ = [
    "PeopleTriangulation",
    "candidates",
    "select_people",
    "triangulate_everyone",
    "triangulate_people",
]


@dataclass
class PeopleTriangulation(Triangulation):
    """Result of :func:`triangulate_people` for ``T`` frames and ``J`` joints.

    Attributes (besides :class:`Triangulation`'s, with leading dims ``(T, J)``):
        person: ``(T, C)`` the detection index chosen in each camera (-1: none).
        score: ``(T,)`` the winner's association score: supporting (joint, camera)
            observations minus ``e / (1 + e)`` for its mean two-view error ``e`` (-inf: nobody).
        swapped: ``(T, C)`` (see :class:`Triangulation`; all False unless asked for).
    """

    score: torch.Tensor = None  # type: ignore[assignment]


def _per_camera(keypoints) -> list[torch.Tensor]:
    if isinstance(keypoints, torch.Tensor):
        check_tensor("keypoints", keypoints, 5)
        if keypoints.dim() != 5 or keypoints.shape[-1] != 3:
            raise ValueError(
                f"keypoints must have shape (C, T, P, J, 3) (x, y, confidence), "
                f"got {tuple(keypoints.shape)}"
            )
        return list(keypoints.unbind(0))
    cams = list(keypoints)
    for c, k in enumerate(cams):  # argument checks per camera
        check_tensor(f"keypoints[{c}]", k, 4)
        if k.dim() != 4 or k.shape[-1] != 3:
            raise ValueError(f"keypoints[{c}] must have shape (T, P_c, J, 3), got {tuple(k.shape)}")
        if k.shape[0] != cams[0].shape[0] or k.shape[2] != cams[0].shape[2]:
            raise ValueError(
                f"keypoints[{c}] has {tuple(k.shape[::2][:2])} (T, J), camera 0 has "
                f"{tuple(cams[0].shape[::2][:2])}"
            )
    return cams


def triangulate_people(
    keypoints: torch.Tensor | list[torch.Tensor],
    K: torch.Tensor,
    dist: torch.Tensor,
    R: torch.Tensor,
    t: torch.Tensor,
    min_confidence: float = 0.3,
    max_error_px: float = 15.0,
    association_px: float = 20.0,
    min_common_joints: int = 3,
    min_cameras: int = 2,
    drop: str = "leave_one_out",
) -> PeopleTriangulation:
    """Associate the person seen by the most cameras across views and triangulate all frames
    and joints at once.

    1. Every detection ``p`` of every camera ``a`` is a reference: it is triangulated joint by
       joint with every detection ``q`` of every other camera ``b`` (two views, weighted DLT,
       all frames at once). The cost of ``(a, p, b, q)`` is the mean two-view reprojection
       error over the joints both see (at least ``min_common_joints``, else infinite).
    2. Camera ``b`` joins the reference's candidate with its cheapest detection if that costs
       less than ``association_px``. A candidate's score counts its supporting observations:
       the reference's joints plus, per joined camera, the joints whose two-view error is
       within ``max_error_px``; ties are broken by the lower mean cost ``e``
       (``score = support - e / (1 + e)``). The best candidate of each frame wins.
    3. The winner's detections are triangulated with :func:`triangulate_points` (weighted DLT
       and camera dropping).

    Args:
        keypoints: ``(C, T, P, J, 3)`` ``x, y, confidence`` per camera, frame, detection slot
            and joint (confidence 0 or NaN for empty slots and missing joints), or a list of
            ``C`` tensors ``(T, P_c, J, 3)`` (as many slots as each camera needs: less work).
        K, dist, R, t: the ``C`` cameras (see :func:`triangulate_points`).
        min_confidence: joints below it get weight 0.
        max_error_px: reprojection threshold (pixels) of the camera dropping and of the
            two-view support count.
        association_px: two-view cost threshold for joining a reference (pixels).
        min_common_joints: joints two detections must share to be compared.
        min_cameras, drop: see :func:`triangulate_points`.

    Returns:
        :class:`PeopleTriangulation` with ``points (T, J, 3)``, ``errors (T, J, C)``, ...,
        ``person (T, C)``. Not differentiable (the association is discrete): it runs under
        ``torch.inference_mode`` (less per-op overhead) and returns ordinary tensors.
    """
    with torch.inference_mode():
        res = _triangulate_people(keypoints, K, dist, R, t, min_confidence, max_error_px,
                                  association_px, min_common_joints, min_cameras, drop)  # fmt: skip
    return PeopleTriangulation(**{k: v.clone() for k, v in res.arrays().items()})


def _triangulate_people(
    keypoints: torch.Tensor | list[torch.Tensor],
    K: torch.Tensor,
    dist: torch.Tensor,
    R: torch.Tensor,
    t: torch.Tensor,
    min_confidence: float = 0.3,
    max_error_px: float = 15.0,
    association_px: float = 20.0,
    min_common_joints: int = 3,
    min_cameras: int = 2,
    drop: str = "leave_one_out",
) -> PeopleTriangulation:
    cams = _per_camera(keypoints)
    C = len(cams)
    if C < 2:
        raise ValueError(f"keypoints must hold at least 2 cameras, got {C}")
    dist = _check_cameras(C, K, dist, R, t)
    _check_options(min_confidence, max_error_px, association_px, min_common_joints, min_cameras,
                   drop)  # fmt: skip
    xy, seen, fd, pU = _detections(cams, K, dist, R, t, min_confidence)
    # 1. Two-view costs of every detection pair of every camera pair, solved in one batch.
    best = _best_matches(xy, seen, pU, K, dist, R, t, max_error_px, min_common_joints)
    # 2. One candidate per reference detection; the best of each frame wins.
    person, win_score = _winners(seen, *best, association_px, min_common_joints, K.dtype)
    # 3. Robust triangulation of the winners.
    res, _ = _triangulate_winners(person, xy, seen, fd, K, dist, R, t, max_error_px,
                                  min_cameras, drop)  # fmt: skip
    return PeopleTriangulation(
        points=res.points,
        errors=res.errors,
        used=res.used,
        mean_error=res.mean_error,
        valid=res.valid,
        person=person,
        score=win_score,
    )


def _check_options(
    min_confidence: float,
    max_error_px: float,
    association_px: float,
    min_common_joints: int,
    min_cameras: int,
    drop: str,
) -> None:
    if not 0 <= min_confidence <= 1:
        raise ValueError(f"min_confidence must be in [0, 1], got {min_confidence}")
    if not association_px > 0:
        raise ValueError(f"association_px must be positive, got {association_px}")
    if min_common_joints < 1:
        raise ValueError(f"min_common_joints must be >= 1, got {min_common_joints}")
    if not max_error_px > 0:
        raise ValueError(f"max_error_px must be positive, got {max_error_px}")
    _check_drop(drop, min_cameras)


def _detections(
    cams: list[torch.Tensor],
    K: torch.Tensor,
    dist: torch.Tensor,
    R: torch.Tensor,
    t: torch.Tensor,
    min_confidence: float,
) -> tuple[list, list, list, torch.Tensor]:
    """Every detection of every camera at once: per camera the pixels ``(T, P_c, J, 2)``, which
    joints count as seen ``(T, P_c, J)`` and their DLT features ``(T, P_c, J, 4)``; and the
    upper triangles of every detection's normal matrix, ``(C, 10, L)`` with ``L`` the most
    (frame, slot, joint) rows of a camera."""
    C = len(cams)
    dev, dtype = K.device, K.dtype
    basis = _dlt_basis(R, t)  # (C, 4, 16)
    # The cameras' detections, flattened, are padded to one (C, L, 3) tensor (a loop over the
    # C cameras to pack and unpack them).
    counts = [k[..., 0].numel() for k in cams]
    L = max(counts)
    packed = torch.zeros(C, L, 3, dtype=dtype, device=dev)
    for c, k in enumerate(cams):  # a handful of cameras: pack each one's detections
        packed[c, : counts[c]] = k.reshape(-1, 3).to(device=dev, dtype=dtype)
    pxy, conf = packed[..., :2], packed[..., 2]
    pseen = torch.isfinite(pxy).all(-1) & (conf >= min_confidence) & (conf > 0)
    cidx = torch.arange(C, device=dev).view(C, 1).expand(C, L)

    def undistort(px: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor]:
        return (undistort_points(px.unsqueeze(-2), K[c], dist[c]).squeeze(-2),)

    (norm,) = _on_rows(pseen, undistort, [pxy, cidx], [0.0])  # (C, L, 2), seen points only
    pf = _dlt_features(norm, torch.where(pseen, conf, 0.0))  # (C, L, 4)
    pN = pf @ basis  # (C, L, 16)
    upper = torch.tensor(_UPPER, device=dev)
    pU = pN.transpose(1, 2).contiguous().index_select(1, upper)  # (C, 10, L) upper triangles
    xy, seen, fd = [], [], []
    for c, k in enumerate(cams):  # unpack to (T, P_c, J, ...) per camera
        shape, n = k.shape[:-1], counts[c]
        xy.append(pxy[c, :n].reshape(*shape, 2))
        seen.append(pseen[c, :n].reshape(shape))
        fd.append(pf[c, :n].reshape(*shape, 4))
    return xy, seen, fd, pU


def _pair_rows(xy: list, seen: list, pU: torch.Tensor, pairs: list, compact: bool) -> tuple:
    """The two-view rows of every camera pair: normal matrices ``(10, rows)``, observations,
    the (pair, frame, p, q) bin of each row, which rows are valid, the bins' shapes and count.

    On CPU only the (frame, p, q, joint) rows where both detections see the joint are gathered
    (nonzero is free there); elsewhere every row, masked afterwards."""
    dev = pU.device
    J = seen[0].shape[-1]
    Ns, obs, bins, valid, shapes = [], [], [], [], []
    offset = 0
    for a, b in pairs:  # a loop over camera pairs, gathering their detection pairs
        both_seen = seen[a].unsqueeze(2) & seen[b].unsqueeze(1)  # (T, P_a, P_b, J)
        T_, P_a, P_b, _ = both_seen.shape
        if compact:
            rows = both_seen.nonzero()
        else:
            grid = [torch.arange(n, device=dev) for n in both_seen.shape]
            rows = torch.stack(torch.meshgrid(*grid, indexing="ij"), -1).reshape(-1, 4)
        fr, p, q, j = rows.unbind(-1)
        ia = (fr * P_a + p) * J + j  # flat (frame, slot, joint) rows of camera a and b
        ib = (fr * P_b + q) * J + j
        Ns.append(pU[a].index_select(1, ia) + pU[b].index_select(1, ib))  # (10, rows)
        obs.append(torch.stack([xy[a].reshape(-1, 2).index_select(0, ia),
                                xy[b].reshape(-1, 2).index_select(0, ib)], -2))  # fmt: skip
        bins.append(offset + (fr * P_a + p) * P_b + q)  # the (frame, p, q) of every row
        if not compact:  # the compacted rows all see the joint in both views
            valid.append(both_seen.reshape(-1))
        shapes.append((T_, P_a, P_b))
        offset += T_ * P_a * P_b
    return Ns, obs, bins, valid, shapes, offset


def _pair_costs(
    xy: list,
    seen: list,
    pU: torch.Tensor,
    K: torch.Tensor,
    dist: torch.Tensor,
    R: torch.Tensor,
    t: torch.Tensor,
    max_error_px: float,
    min_common_joints: int,
) -> tuple[list, list, list]:
    """Two-view costs of every detection pair of every camera pair, solved in one batch.

    Returns the camera ``pairs`` ``(a, b)`` (``a < b``) and per pair the mean two-view
    reprojection error ``cost (T, P_a, P_b)`` over the joints both detections see (``inf``
    below ``min_common_joints``) and the ``support (T, P_a, P_b)``: those joints whose error in
    both views is within ``max_error_px``."""
    C = len(xy)
    dev, dtype = K.device, K.dtype
    pairs = [(a, b) for a in range(C) for b in range(a + 1, C)]
    Ns, obs, bins, valid, shapes, offset = _pair_rows(xy, seen, pU, pairs, _compact(dev))
    X, ok = _solve_upper(torch.cat(Ns, 1))
    sizes = [len(b) for b in bins]
    # Reprojection errors in the pair's two cameras (rows are grouped by pair).
    err = torch.cat([
        reprojection_errors(Xk, ok_obs, K[[a, b]], dist[[a, b]], R[[a, b]], t[[a, b]])
        for (a, b), Xk, ok_obs in zip(pairs, X.split(sizes), obs, strict=True)
    ])  # (n, 2)  # fmt: skip
    # Per (pair, frame, p, q): sums over the joints both see, as one scatter-add each.
    valid, bins = (torch.cat(valid) & ok if valid else ok), torch.cat(bins)
    e_sum = torch.zeros(offset, dtype=dtype, device=dev)
    e_sum.index_add_(0, bins, torch.where(valid, err.mean(-1), 0.0))
    n_sum = torch.zeros(offset, dtype=torch.long, device=dev).index_add_(0, bins, valid.long())
    good = valid & (err.amax(-1) <= max_error_px)
    s_sum = torch.zeros(offset, dtype=torch.long, device=dev).index_add_(0, bins, good.long())
    cost_all = torch.where(n_sum >= min_common_joints, e_sum / n_sum.clamp_min(1), float("inf"))
    sizes = [math.prod(sh) for sh in shapes]  # bins per pair
    costs = [c.view(sh) for c, sh in zip(cost_all.split(sizes), shapes, strict=True)]
    supports = [s.view(sh) for s, sh in zip(s_sum.split(sizes), shapes, strict=True)]
    return pairs, costs, supports


def _best_matches(
    xy: list,
    seen: list,
    pU: torch.Tensor,
    K: torch.Tensor,
    dist: torch.Tensor,
    R: torch.Tensor,
    t: torch.Tensor,
    max_error_px: float,
    min_common_joints: int,
) -> tuple[list, list, list]:
    """Per reference camera ``a`` and other camera ``b``: the cheapest detection ``q`` of ``b``
    for each detection of ``a`` ``(T, P_a)``, its mean two-view cost and its support."""
    pairs, costs, supports = _pair_costs(xy, seen, pU, K, dist, R, t, max_error_px,
                                         min_common_joints)  # fmt: skip
    return _best_of(pairs, costs, supports, len(xy))


def _best_of(pairs: list, costs: list, supports: list, C: int) -> tuple[list, list, list]:
    """:func:`_best_matches` from the pair costs and supports of :func:`_pair_costs`."""
    dev = costs[0].device
    inf = torch.tensor(float("inf"), dtype=costs[0].dtype, device=dev)
    best_q = [[None] * C for _ in range(C)]  # best_q[a][b]: (T, P_a) cheapest q in b
    best_cost = [[None] * C for _ in range(C)]
    best_support = [[None] * C for _ in range(C)]
    for (a, b), cost, support in zip(pairs, costs, supports, strict=True):  # (T, P_a, P_b)
        for ref, other, c_ab, s_ab in ((a, b, cost, support), (b, a, cost.mT, support.mT)):
            if c_ab.shape[-1] == 0:  # the other camera has no detection slot
                best_cost[ref][other] = inf.expand(c_ab.shape[:-1])
                best_q[ref][other] = torch.zeros(c_ab.shape[:-1], dtype=torch.long, device=dev)
                best_support[ref][other] = best_q[ref][other]
                continue
            bc, bq = c_ab.min(-1)
            best_cost[ref][other], best_q[ref][other] = bc, bq
            best_support[ref][other] = s_ab.gather(-1, bq.unsqueeze(-1)).squeeze(-1)
    return best_q, best_cost, best_support


def _winners(
    seen: list,
    best_q: list,
    best_cost: list,
    best_support: list,
    association_px: float,
    min_common_joints: int,
    dtype: torch.dtype,
    min_joined: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One candidate per reference detection; the best of each frame wins. Returns the chosen
    detection per camera ``person (T, C)`` (-1: none) and the winner's score ``(T,)``.
    Candidates joined by fewer than ``min_joined`` other cameras do not compete."""
    C = len(seen)
    T = seen[0].shape[0]
    dev = seen[0].device
    choices, scores = [], []
    for a in range(C):  # a loop over the reference cameras
        P_a = seen[a].shape[1]
        own = torch.arange(P_a, device=dev).expand(T, P_a)
        choice, support = [], seen[a].sum(-1)
        cost_sum = torch.zeros(T, P_a, dtype=dtype, device=dev)
        joined = torch.zeros(T, P_a, dtype=torch.long, device=dev)
        for b in range(C):  # the other cameras
            if b == a:
                choice.append(own)
                continue
            match = best_cost[a][b] < association_px
            choice.append(torch.where(match, best_q[a][b], -1))
            support = support + torch.where(match, best_support[a][b], 0)
            cost_sum = cost_sum + torch.where(match, best_cost[a][b], 0.0)
            joined = joined + match
        e = cost_sum / joined.clamp_min(1)
        score = support - e / (1 + e)
        enabled = (seen[a].sum(-1) >= min_common_joints) & (joined >= min_joined)
        scores.append(torch.where(enabled, score, float("-inf")))
        choices.append(torch.stack(choice, -1))  # (T, P_a, C)
    score, choice = torch.cat(scores, 1), torch.cat(choices, 1)  # (T, sum P_c[, C])
    if score.shape[1] == 0:
        score = torch.full((T, 1), float("-inf"), dtype=dtype, device=dev)
        choice = torch.full((T, 1, C), -1, dtype=torch.long, device=dev)
    win_score, win = score.max(1)  # (T,)
    found = torch.isfinite(win_score)
    person = choice.gather(1, win.view(T, 1, 1).expand(T, 1, C)).squeeze(1)
    person = torch.where(found.unsqueeze(-1), person, -1)  # (T, C)
    return person, win_score


def _triangulate_winners(
    person: torch.Tensor,
    xy: list,
    seen: list,
    fd: list,
    K: torch.Tensor,
    dist: torch.Tensor,
    R: torch.Tensor,
    t: torch.Tensor,
    max_error_px: float,
    min_cameras: int,
    drop: str,
    flip: torch.Tensor | None = None,
) -> tuple[Triangulation, torch.Tensor | None]:
    """Robust triangulation of the winners ``person (..., T, C)`` (gathered per camera: a loop
    over cameras); with ``flip`` (:func:`tensorpose.layouts.flip_index`), each camera's
    left/right labelling made consistent with the others' first
    (:func:`tensorpose.multiview.swaps.rescue_swapped`, then
    :func:`~tensorpose.multiview.swaps.find_swaps`): also the swaps ``(..., T, C)``, and the
    result's ``person`` holds the detections that joined swapped."""
    g_f, g_seen, g_xy = _gather(person, xy, seen, fd, K)
    tri = _robust(g_f, g_seen, g_xy, K, dist, R, t, max_error_px, min_cameras, drop)
    if flip is None:
        return tri, None
    # a camera whose detection is labelled the other way round mostly fails to join: the
    # detections left over that fit the person once swapped join it, swapped
    person, rescued = rescue_swapped(person, tri.points, tri.valid, xy, seen, K, dist, R, t,
                                     flip, max_error_px)  # fmt: skip
    g = _gather(person, xy, seen, fd, K)
    g_f, g_seen, g_xy = _swapped(g, rescued, flip)
    # then each camera against the others (the rescued ones as they join: swapped)
    again, _, _ = find_swaps(g_f, g_seen, g_xy, K, dist, R, t, flip, max_error_px)
    swap = rescued ^ again
    g_f, g_seen, g_xy = _swapped(g, swap, flip)
    tri = _robust(g_f, g_seen, g_xy, K, dist, R, t, max_error_px, min_cameras, drop)
    tri.person = person
    return tri, swap


def _swapped(g: tuple, swap: torch.Tensor, flip: torch.Tensor) -> tuple:
    """:func:`_gather`'s features, seen joints and pixels with the cameras ``swap`` swapped."""
    f, seen, xy = g
    seen = apply_swaps(seen.unsqueeze(-1), swap, flip).squeeze(-1)
    return apply_swaps(f, swap, flip), seen, apply_swaps(xy, swap, flip)


def _gather(person: torch.Tensor, xy: list, seen: list, fd: list,
            K: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """The DLT features ``(..., T, J, C, 4)``, seen joints ``(..., T, J, C)`` and pixels
    ``(..., T, J, C, 2)`` of the detections ``person (..., T, C)`` (a loop over cameras)."""
    C = len(xy)
    T, J = seen[0].shape[0], seen[0].shape[-1]
    lead = person.shape[:-1]  # (..., T)
    dev, dtype = K.device, K.dtype
    g_xy, g_seen, g_f = [], [], []
    frame = torch.arange(T, device=dev)
    for c in range(C):  # a handful of cameras; each gathers every frame at once
        if seen[c].shape[1] == 0:
            g_xy.append(torch.full((*lead, J, 2), float("nan"), dtype=dtype, device=dev))
            g_seen.append(torch.zeros(*lead, J, dtype=torch.bool, device=dev))
            g_f.append(torch.zeros(*lead, J, 4, dtype=dtype, device=dev))
            continue
        q = person[..., c].clamp_min(0)
        g_xy.append(xy[c][frame, q])
        g_seen.append(seen[c][frame, q] & (person[..., c] >= 0).unsqueeze(-1))
        g_f.append(fd[c][frame, q])
    return torch.stack(g_f, -2), torch.stack(g_seen, -1), torch.stack(g_xy, -2)


# ---------------------------------------------------------------------- every person
def candidates(
    pairs: list[tuple[int, int]],
    costs: list[torch.Tensor],
    supports: list[torch.Tensor],
    seen: list[torch.Tensor],
    association_px: float,
    min_common_joints: int = 3,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The best candidate of every frame: ``person (T, C)`` its detection per camera (-1:
    none) and its ``score (T,)`` (-inf: no candidate joined by a second camera).

    Args:
        pairs: the camera pairs ``(a, b)``, ``a < b``; costs, supports: per pair ``(T, P_a,
            P_b)`` two-view cost (pixels, ``inf``: not comparable) and support (joints).
        seen: per camera ``(T, P_c, J)`` the joints each detection sees.
    """
    best = _best_of(pairs, costs, supports, len(seen))
    return _winners(seen, *best, association_px, min_common_joints, costs[0].dtype,
                    min_joined=1)  # fmt: skip


def select_people(
    pairs: list[tuple[int, int]],
    costs: list[torch.Tensor],
    supports: list[torch.Tensor],
    seen: list[torch.Tensor],
    association_px: float,
    min_common_joints: int = 3,
    max_people: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """People per frame, best first: ``person (M, T, C)`` the detection per camera of each
    (-1: none) and their ``score (M, T)`` (-inf: no person in that slot); ``M`` is the most
    people of any frame (at least 1). Arguments as in :func:`candidates`."""
    C, T = len(seen), seen[0].shape[0]
    dev = seen[0].device
    taken = [torch.zeros(s.shape[:2], dtype=torch.bool, device=dev) for s in seen]
    limit = sum(s.shape[1] for s in seen) // 2 if max_people is None else max_people
    people, scores = [], []
    frame = torch.arange(T, device=dev)
    for _ in range(max(limit, 1)):  # a loop over the people of a frame (a handful)
        left = [c.masked_fill(taken[a].unsqueeze(-1) | taken[b].unsqueeze(-2), float("inf"))
                for (a, b), c in zip(pairs, costs, strict=True)]  # fmt: skip
        free = [s & ~k.unsqueeze(-1) for s, k in zip(seen, taken, strict=True)]
        person, score = candidates(pairs, left, supports, free, association_px,
                                   min_common_joints)  # fmt: skip
        if people and not bool(torch.isfinite(score).any()):
            break
        people.append(person)
        scores.append(score)
        for c in range(C):  # mark the person's detections as taken (a loop over cameras)
            if taken[c].shape[1]:
                hit = person[:, c] >= 0
                taken[c][frame[hit], person[hit, c]] = True
    return torch.stack(people), torch.stack(scores)


def triangulate_everyone(
    keypoints: torch.Tensor | list[torch.Tensor],
    K: torch.Tensor,
    dist: torch.Tensor,
    R: torch.Tensor,
    t: torch.Tensor,
    min_confidence: float = 0.3,
    max_error_px: float = 15.0,
    association_px: float = 20.0,
    min_common_joints: int = 3,
    min_cameras: int = 2,
    drop: str = "leave_one_out",
    max_people: int | None = None,
    flip: list[int] | None = None,
) -> PeopleTriangulation:
    """Every person seen by at least two cameras in every frame, associated across views and
    triangulated (see the module's docstring).

    Args:
        keypoints, K, dist, R, t, min_confidence, max_error_px, association_px,
        min_common_joints, min_cameras, drop: as in
            :func:`tensorpose.multiview.association.triangulate_people`.
        max_people: at most this many people per frame (default: as many as are found).
        flip: :func:`tensorpose.layouts.flip_index` of the layout: each person's left and right
            made consistent across cameras before it is triangulated
            (:func:`tensorpose.multiview.swaps.find_swaps`; ``swapped`` says where); ``None``:
            as labelled.

    Returns:
        :class:`~tensorpose.multiview.association.PeopleTriangulation` with a leading people dim
        ``M`` (slots per frame, best first; not identities over time): ``points (M, T, J,
        3)``, ``errors``, ``used (M, T, J, C)``, ``mean_error``, ``valid (M, T, J)``,
        ``person (M, T, C)`` (-1: none), ``score (M, T)`` (-inf: no person in that slot),
        ``swapped (M, T, C)``.
    """
    with torch.inference_mode():
        cams = _per_camera(keypoints)
        C = len(cams)
        if C < 2:
            raise ValueError(f"keypoints must hold at least 2 cameras, got {C}")
        dist = _check_cameras(C, K, dist, R, t)
        _check_options(min_confidence, max_error_px, association_px, min_common_joints,
                       min_cameras, drop)  # fmt: skip
        if max_people is not None and max_people < 1:
            raise ValueError(f"max_people must be >= 1, got {max_people}")
        xy, seen, fd, pU = _detections(cams, K, dist, R, t, min_confidence)
        pairs, costs, supports = _pair_costs(xy, seen, pU, K, dist, R, t, max_error_px,
                                             min_common_joints)  # fmt: skip
        person, win = select_people(pairs, costs, supports, seen, association_px,
                                    min_common_joints, max_people)  # fmt: skip
        flips = None if flip is None else torch.as_tensor(flip, device=K.device)
        res, swap = _triangulate_winners(person, xy, seen, fd, K, dist, R, t, max_error_px,
                                         min_cameras, drop, flips)  # fmt: skip
        person = person if res.person is None else res.person
        if swap is None:
            swap = torch.zeros(person.shape, dtype=torch.bool, device=K.device)
        out = PeopleTriangulation(res.points, res.errors, res.used, res.mean_error, res.valid,
                                  person=person, score=win, swapped=swap)  # fmt: skip
    return PeopleTriangulation(**{k: v.clone() for k, v in out.arrays().items()})
