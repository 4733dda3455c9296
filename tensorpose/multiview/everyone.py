"""Several people across cameras, every frame at once (:func:`triangulate_everyone`).

1. Two-view costs of every detection pair of every camera pair, all frames in one batch
   (:func:`tensorpose.multiview.association._pair_costs`): the mean reprojection error of the
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
   frame). The first person is :func:`~tensorpose.multiview.association.triangulate_people`'s
   winner; each later one is that rule's winner once the earlier people are removed, so a
   person's detections, and its 3D, do not depend on who else is in the views.
4. Each person's detections are triangulated with camera dropping
   (:func:`tensorpose.multiview.triangulate.triangulate_points`'s rule), every person and frame at
   once.

Identities over time are not decided here: a person's slot may change between frames
(:func:`tensorpose.multiview.people.link_people` links them).
"""

from __future__ import annotations

import torch

from .association import (
    PeopleTriangulation,
    _best_of,
    _check_options,
    _detections,
    _pair_costs,
    _per_camera,
    _triangulate_winners,
    _winners,
)
from .dlt import _check_cameras

__all__ = ["candidates", "select_people", "triangulate_everyone"]


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
) -> PeopleTriangulation:
    """Every person seen by at least two cameras in every frame, associated across views and
    triangulated (see the module's docstring).

    Args:
        keypoints, K, dist, R, t, min_confidence, max_error_px, association_px,
        min_common_joints, min_cameras, drop: as in
            :func:`tensorpose.multiview.association.triangulate_people`.
        max_people: at most this many people per frame (default: as many as are found).

    Returns:
        :class:`~tensorpose.multiview.association.PeopleTriangulation` with a leading people dim
        ``M`` (slots per frame, best first; not identities over time): ``points (M, T, J,
        3)``, ``errors``, ``used (M, T, J, C)``, ``mean_error``, ``valid (M, T, J)``,
        ``person (M, T, C)`` (-1: none), ``score (M, T)`` (-inf: no person in that slot).
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
        res = _triangulate_winners(person, xy, seen, fd, K, dist, R, t, max_error_px,
                                   min_cameras, drop)  # fmt: skip
        out = PeopleTriangulation(res.points, res.errors, res.used, res.mean_error, res.valid,
                                  person=person, score=win)  # fmt: skip
    return PeopleTriangulation(**{k: v.clone() for k, v in out.arrays().items()})
