"""Skeleton kinematics as pure tensor functions: joints <-> bone lengths + unit directions,
rotation forward kinematics, left/right flips.

How it avoids the loop over bones: joints are a linear function of bone vectors,
``joints[j] = root + sum_{s on path(root, j)} bone[s]``. With the flat layouts
``bones (..., S*D)`` and ``joints (..., J*D)`` this is ONE matrix product with the constant
``kron(path.T, I_D)`` of shape ``(S*D, J*D)`` (a single GEMM over every frame and sample at
once; its backward is another single GEMM). Decomposition is the transpose problem: bone vectors
are one product with the incidence matrix ``(J*D, S*D)``.
"""

from __future__ import annotations

import torch

from ..skeleton import Skeleton
from ._checks import broadcast_shapes, check_finite, check_last_dims, check_tensor

is_compiling = torch.compiler.is_compiling

__all__ = ["bone_lengths", "bone_vectors", "compose", "decompose", "flip", "forward_kinematics"]


def _fusable(*tensors: torch.Tensor) -> bool:
    """Take the gather path: under torch.compile without autograd, gathers fuse with what
    follows into one memory-bound kernel (measured ~5x faster than the GEMM on CPU). Eager, or
    with gradients (gather backward is a scatter-add, slow on CPU), the single GEMM wins."""
    return torch.compiler.is_compiling() and not (
        torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
    )


def _check_joints(name: str, joints: torch.Tensor, skeleton: Skeleton) -> int:
    check_tensor(name, joints, 2)
    check_last_dims(name, joints, (skeleton.num_joints, None), f"J={skeleton.num_joints} joints")
    D = joints.shape[-1]
    if D not in (2, 3):
        raise ValueError(f"{name} must have 2 or 3 coordinates in its last dim, got D={D}")
    check_finite(name, joints)
    return D


def bone_vectors(joints: torch.Tensor, skeleton: Skeleton) -> torch.Tensor:
    """Bone vectors ``child - parent`` in :attr:`Skeleton.bones` order.

    Args:
        joints: ``(..., J, D)``.

    Returns:
        ``(..., S, D)`` with ``S = J - 1``.
    """
    D = _check_joints("joints", joints, skeleton)
    if _fusable(joints):
        child = skeleton.tensor("children", joints.device)
        parent = skeleton.tensor("parents", joints.device)
        return joints.index_select(-2, child) - joints.index_select(-2, parent)
    lead = joints.shape[:-2]
    M = skeleton.bone_matrix(D, joints.device, joints.dtype)
    flat = joints.reshape(*lead, skeleton.num_joints * D) @ M
    return flat.reshape(*lead, skeleton.num_bones, D)


def decompose(
    joints: torch.Tensor, skeleton: Skeleton, eps: float = 1e-8
) -> tuple[torch.Tensor, torch.Tensor]:
    """Joints to bone lengths and unit bone directions.

    Args:
        joints: ``(..., J, D)`` positions, D = 2 or 3.
        skeleton: the joint tree.
        eps: bones shorter than ``eps`` count as zero-length: length 0, direction 0 and finite
            (zero) gradients instead of NaN.

    Returns:
        ``lengths (..., S, 1)`` and ``directions (..., S, D)``.

    Example:
        >>> from tensorpose.skeleton import get_skeleton
        >>> sk = get_skeleton("seed15")
        >>> x = torch.randn(2, 15, 3, dtype=torch.float64)
        >>> lengths, dirs = decompose(x, sk)
        >>> torch.allclose(compose(lengths, dirs, sk, root=x[..., 0, :]), x)
        True
    """
    bones = bone_vectors(joints, skeleton)
    S, D = bones.shape[-2:]
    # Squared lengths as a small GEMM on the flat layout (a sum over a size-3 last dim is slow).
    E = skeleton.bone_sum_matrix(D, bones.device, bones.dtype)
    sq = (bones.reshape(*bones.shape[:-2], S * D).square() @ E).unsqueeze(-1)
    ok = sq > eps * eps
    norm = torch.where(ok, sq, torch.ones_like(sq)).sqrt()  # never sqrt(0): finite gradients
    lengths = norm * ok
    directions = bones * (ok / norm)  # the large tensor is touched once
    return lengths, directions


def compose(
    lengths: torch.Tensor,
    directions: torch.Tensor,
    skeleton: Skeleton,
    root: torch.Tensor | None = None,
    *,
    check_values: bool = True,
) -> torch.Tensor:
    """Bone lengths and directions to joints.

    Args:
        lengths: ``(..., S, 1)``, broadcast against ``directions[..., :1]``: per-sequence
            lengths ``(B, 1, S, 1)`` with per-frame directions ``(B, T, S, D)`` is the main use.
        directions: ``(..., S, D)`` bone directions (unit vectors for a proper skeleton; any
            vectors are accepted and scaled by ``lengths``).
        skeleton: the joint tree.
        root: ``(..., D)`` root position, broadcast against the joints' batch dims;
            ``None`` puts the root at the origin.
        check_values: raise on NaN/inf in ``lengths``/``directions`` (a host read on CPU, a
            device assert on CUDA). A training forward passes ``False``: a diverged model's
            NaN then reaches the loss, where the trainer's non-finite-loss check stops the run.

    Returns:
        ``joints (..., J, D)``.
    """
    check_tensor("directions", directions, 2)
    check_tensor("lengths", lengths, 2)
    S = skeleton.num_bones
    check_last_dims("directions", directions, (S, None), f"S={S} bones")
    check_last_dims("lengths", lengths, (S, 1), f"S={S} bones")
    D = directions.shape[-1]
    if D not in (2, 3):
        raise ValueError(f"directions must have 2 or 3 coordinates, got D={D}")
    if check_values:
        check_finite("lengths", lengths)
        check_finite("directions", directions)
    try:
        shapes = (lengths.shape[:-2], directions.shape[:-2])
        # torch's own under torch.compile; eager: ours (torch's first call imports sympy, 0.5 s)
        lead = torch.broadcast_shapes(*shapes) if is_compiling() else broadcast_shapes(*shapes)
    except RuntimeError:
        raise ValueError(
            f"lengths {tuple(lengths.shape)} does not broadcast against directions "
            f"{tuple(directions.shape)}"
        ) from None
    if root is not None:
        check_tensor("root", root)
        check_last_dims("root", root, (D,), f"D={D} coordinates")
    if _fusable(lengths, directions):
        joints = _compose_by_levels(lengths * directions, skeleton)
    else:
        # Multiply in the flat (..., S*D) layout: broadcasting a size-1 last dim is slow on CPU.
        flat_len = lengths.expand(*lengths.shape[:-1], D).reshape(*lengths.shape[:-2], S * D)
        bones = directions.reshape(*directions.shape[:-2], S * D) * flat_len
        M = skeleton.compose_matrix(D, bones.device, bones.dtype)
        joints = (bones @ M).reshape(*lead, skeleton.num_joints, D)
    return joints if root is None else joints + root.unsqueeze(-2)


def _compose_by_levels(bones: torch.Tensor, skeleton: Skeleton) -> torch.Tensor:
    """The fused path of :func:`compose` (see :func:`_fusable`): per depth level, parent
    position + bone; inductor fuses the whole level loop into one memory-bound kernel."""
    steps, inverse = _level_plan(skeleton, bones.device)
    P_prev = torch.zeros_like(bones[..., :1, :])
    Ps = [P_prev]
    # A loop over depth levels (not bones), unrolled at trace time.
    for _, parent_slot, bone_idx in steps:
        P_prev = P_prev.index_select(-2, parent_slot) + bones.index_select(-2, bone_idx)
        Ps.append(P_prev)
    return torch.cat(Ps, dim=-2).index_select(-2, inverse)


def bone_lengths(joints: torch.Tensor, skeleton: Skeleton) -> torch.Tensor:
    """Bone lengths ``(..., S)`` of ``joints (..., J, D)`` (differentiable away from 0)."""
    return torch.linalg.vector_norm(bone_vectors(joints, skeleton), dim=-1)


def flip(joints: torch.Tensor, skeleton: Skeleton, axis: int = 0) -> torch.Tensor:
    """Left/right mirror: negate coordinate ``axis`` and swap joints by ``flip_index``.

    Args:
        joints: ``(..., J, D)``; mirror about the plane ``coord[axis] = 0`` (for pixels, shift
            to the image centre first or use the augmentation ops).

    Returns:
        ``(..., J, D)``; ``flip(flip(x)) == x``.
    """
    D = _check_joints("joints", joints, skeleton)
    if not -D <= axis < D:
        raise ValueError(f"axis must be in [-{D}, {D}), got {axis}")
    sign = torch.ones(D, dtype=joints.dtype, device=joints.device)
    sign[axis] = -1
    idx = skeleton.tensor("flip_index", joints.device)
    return joints.index_select(-2, idx) * sign


def forward_kinematics(
    local_rotations: torch.Tensor,
    offsets: torch.Tensor,
    root_positions: torch.Tensor | None,
    skeleton: Skeleton,
    return_rotations: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Global joint positions from local rotations (what BVH and SMPL-style rigs need).

    ``G[j] = G[parent] @ R[j]`` and ``p[j] = p[parent] + G[parent] @ offset[j]``; the root has
    ``G = R[root]`` and ``p = root_positions + offset[root]``.

    Args:
        local_rotations: ``(..., J, 3, 3)`` rotation of each joint relative to its parent.
        offsets: ``(J, 3)`` or ``(..., J, 3)`` rest offset of each joint from its parent.
        root_positions: ``(..., 3)`` root translation, or ``None`` for the origin.
        skeleton: the joint tree.
        return_rotations: also return the global rotations ``(..., J, 3, 3)``.

    Returns:
        ``positions (..., J, 3)`` (and ``rotations`` if asked).
    """
    J = skeleton.num_joints
    check_tensor("local_rotations", local_rotations, 3)
    check_last_dims("local_rotations", local_rotations, (J, 3, 3), f"J={J} rotation matrices")
    check_tensor("offsets", offsets, 2)
    check_last_dims("offsets", offsets, (J, 3), f"J={J} offsets")
    R, off = local_rotations, offsets.to(local_rotations.dtype)
    root = skeleton.root
    G_prev = R[..., root : root + 1, :, :]
    P_prev = off[..., root : root + 1, :].expand(*R.shape[:-3], 1, 3)
    if root_positions is not None:
        check_tensor("root_positions", root_positions)
        check_last_dims("root_positions", root_positions, (3,), "xyz")
        P_prev = P_prev + root_positions.unsqueeze(-2)
    Ps, Gs = [P_prev], [G_prev]
    steps, inverse = _level_plan(skeleton, R.device)
    # A loop over depth levels (not joints): each level depends on the one above it.
    for level, parent_slot, _ in steps:
        Gp = G_prev.index_select(-3, parent_slot)  # (..., n, 3, 3)
        P_prev = P_prev.index_select(-2, parent_slot) + (
            Gp @ off.index_select(-2, level).unsqueeze(-1)
        ).squeeze(-1)
        G_prev = Gp @ R.index_select(-3, level)
        Ps.append(P_prev)
        Gs.append(G_prev)
    positions = torch.cat(Ps, dim=-2).index_select(-2, inverse)
    if not return_rotations:
        return positions
    return positions, torch.cat(Gs, dim=-3).index_select(-3, inverse)


def _level_plan(
    skeleton: Skeleton, device: torch.device
) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], torch.Tensor]:
    """Steps per depth level >= 1 as (joint indices, slot of each joint's parent in the level
    above, index of the bone ending at each joint), and the permutation from level-concatenated
    order back to joint order."""
    key = ("fk_plan", torch.device(device))
    plan = skeleton._cache.get(key)
    if plan is None:
        levels = skeleton.levels
        order = torch.tensor([j for lv in levels for j in lv])
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(len(order))
        bone_of = {c: s for s, (_, c) in enumerate(skeleton.bones)}
        steps = []
        for d in range(1, len(levels)):  # once per skeleton and device, over depth levels
            slot = {j: i for i, j in enumerate(levels[d - 1])}
            parent_slot = [slot[skeleton.parents[j]] for j in levels[d]]
            bone_idx = [bone_of[j] for j in levels[d]]
            step = (levels[d], parent_slot, bone_idx)
            steps.append(tuple(torch.tensor(x, device=device) for x in step))
        plan = (steps, inverse.to(device))
        skeleton._cache[key] = plan
    return plan
