"""Bone-length augmentation: new bone lengths with the directions kept, and random scales per
bone group (the same for left and right)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from ..skeleton import Skeleton
from ._checks import check_last_dims, check_tensor
from ._poseaug_base import _check_generator, _check_joints, _check_range, _uniform
from ._vec3 import _bones_t, _compose_t, _norm, _scale

__all__ = [
    "H36M17_BONE_GROUPS",
    "bone_scales",
    "retarget_lengths",
    "sample_bone_scales",
    "set_bone_lengths",
]


H36M17_BONE_GROUPS: dict[str, tuple[tuple[str, str], ...]] = {
    "torso": (("pelvis", "spine"), ("spine", "thorax")),
    "neck": (("thorax", "neck"),),
    "head": (("neck", "head"),),
    "hip_width": (("pelvis", "l_hip"), ("pelvis", "r_hip")),
    "shoulder_width": (("thorax", "l_shoulder"), ("thorax", "r_shoulder")),
    "thigh": (("l_hip", "l_knee"), ("r_hip", "r_knee")),
    "shin": (("l_knee", "l_ankle"), ("r_knee", "r_ankle")),
    "upper_arm": (("l_shoulder", "l_elbow"), ("r_shoulder", "r_elbow")),
    "forearm": (("l_elbow", "l_wrist"), ("r_elbow", "r_wrist")),
}
"""Bones of ``h36m17`` by group ``(parent, child)``; one scale per group keeps left and right
equal. Every bone is in exactly one group."""


def set_bone_lengths(
    joints: torch.Tensor, lengths: torch.Tensor, skeleton: Skeleton
) -> torch.Tensor:
    """Give every bone a new length, keeping its direction and the root.

    Args:
        joints: ``(..., J, 3)``.
        lengths: ``(..., S)`` in :attr:`Skeleton.bones` order, broadcast against the joints'
            batch dims (``(B, 1, S)`` for windows ``(B, R, J, 3)``).

    Returns:
        ``(..., J, 3)``.
    """
    _check_joints("joints", joints, skeleton)
    check_tensor("lengths", lengths)
    check_last_dims("lengths", lengths, (skeleton.num_bones,), f"S={skeleton.num_bones}")
    bones = _bones_t(joints, skeleton)
    bones = _scale(bones, lengths.to(joints.dtype) / _norm(bones).clamp_min(1e-12))
    root = joints[..., skeleton.root, :].expand(*bones[0].shape[:-1], 3)
    return _compose_t(bones, root, skeleton)


def bone_scales(
    group_scales: torch.Tensor,
    skeleton: Skeleton,
    groups: Mapping[str, Sequence[tuple[str, str]]] = H36M17_BONE_GROUPS,
) -> torch.Tensor:
    """Per-bone scales from one scale per group.

    Args:
        group_scales: ``(..., G)`` in the order of ``groups``.
        groups: name -> bones ``(parent, child)``; every bone of ``skeleton`` in exactly one.

    Returns:
        ``(..., S)`` in :attr:`Skeleton.bones` order: multiply the lengths of
        :func:`~tensorpose.ops.kinematics.decompose` by them and compose again.
    """
    check_tensor("group_scales", group_scales)
    check_last_dims("group_scales", group_scales, (len(groups),), f"G={len(groups)} groups")
    key = ("poseaug_groups", tuple((k, tuple(v)) for k, v in groups.items()))
    M = skeleton._cache.get(key)
    if M is None:
        bone_of = {
            (skeleton.names[p], skeleton.names[c]): s for s, (p, c) in enumerate(skeleton.bones)
        }
        M = torch.zeros(len(groups), skeleton.num_bones, dtype=torch.float64)
        for g, (name, bones) in enumerate(groups.items()):
            for b in bones:
                if tuple(b) not in bone_of:
                    raise ValueError(f"groups[{name!r}]: {tuple(b)} is not a bone of the skeleton")
                M[g, bone_of[tuple(b)]] += 1
        if not bool((M.sum(0) == 1).all()):
            bad = [f"{skeleton.names[p]}-{skeleton.names[c]}"
                   for s, (p, c) in enumerate(skeleton.bones) if M[:, s].sum() != 1]  # fmt: skip
            raise ValueError(f"groups must cover every bone exactly once; not so for {bad}")
        skeleton._cache[key] = M
    return group_scales @ M.to(group_scales.device, group_scales.dtype)


def sample_bone_scales(
    shape: Sequence[int],
    generator: torch.Generator,
    global_range: tuple[float, float] = (0.85, 1.2),
    group_range: float = 0.1,
    groups: Mapping[str, Sequence[tuple[str, str]]] = H36M17_BONE_GROUPS,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Random group scales for :func:`bone_scales`: ``global * (1 + u_g)``, global uniform in
    ``global_range``, ``u_g`` uniform in ``+-group_range`` per group.

    Returns:
        ``(*shape, G)``.
    """
    _check_generator(generator)
    lo, hi = _check_range("global_range", global_range, 0.0)
    if not 0 <= group_range < 1:
        raise ValueError(f"group_range must be in [0, 1), got {group_range}")
    glob = _uniform((*shape, 1), generator, lo, hi, dtype)
    per = _uniform((*shape, len(groups)), generator, -group_range, group_range, dtype)
    return glob * (1 + per)


def retarget_lengths(
    lengths: torch.Tensor,
    template: torch.Tensor,
    skeleton: Skeleton,
    height_joints: tuple[str, str] = ("head", "r_ankle"),
) -> torch.Tensor:
    """Bone lengths of the ``template``'s proportions at each body's own height.

    The height is the sum of the bone lengths on the paths from the root to the two
    ``height_joints`` (head to ankle for ``h36m17``); each row of ``lengths`` becomes
    ``template * height(lengths) / height(template)``.

    Args:
        lengths: ``(..., S)`` bone lengths in :attr:`Skeleton.bones` order.
        template: ``(S,)`` or broadcastable to ``lengths``.
        skeleton: the joint tree.
        height_joints: the two joints whose root paths make the height.

    Returns:
        ``(..., S)``.

    Example:
        >>> from tensorpose.skeleton import get_skeleton
        >>> sk = get_skeleton("h36m17")
        >>> t = torch.rand(16, dtype=torch.float64) + 0.1
        >>> torch.allclose(retarget_lengths(2 * t, t, sk), 2 * t)
        True
    """
    check_tensor("lengths", lengths)
    check_tensor("template", template)
    S = skeleton.num_bones
    check_last_dims("lengths", lengths, (S,), f"S={S}")
    check_last_dims("template", template, (S,), f"S={S}")
    top, bottom = (skeleton.index(n) for n in height_joints)
    path = skeleton.tensor("path", lengths.device, lengths.dtype)
    on_path = path[top] + path[bottom]  # (S,): bones on root->top and root->bottom
    template = template.to(lengths.dtype)
    height = (lengths * on_path).sum(-1, keepdim=True)
    return template * height / (template * on_path).sum(-1, keepdim=True)
