"""Local joint rotations within anatomical limits (in the spirit of PoseAug), as pure tensor
functions.

:func:`rotate_joints` / :func:`sample_joint_angles`: local joint rotations within anatomical
limits (:data:`H36M17_LIMITS`), applied through forward kinematics (:func:`apply_rotations`,
the same as :func:`~tensorpose.ops.kinematics.forward_kinematics` with local rotations) so that
children move with their parents; bone lengths are preserved exactly. :func:`joint_angles`
measures the limited angles of any pose. Every function is batched over leading dims; the random
one takes an explicit ``torch.Generator`` and draws on its device. Frames and signs: see
:mod:`tensorpose.ops.poseaug_frames`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from ..skeleton import Skeleton
from ._checks import check_last_dims, check_tensor
from ._poseaug_base import (
    _cached,
    _check_generator,
    _check_joints,
    _const,
    _names_index,
    _uniform,
)
from ._vec3 import (
    Quat,
    Vec,
    _angle,
    _axpy,
    _bones_t,
    _combo,
    _compose_t,
    _dot,
    _norm,
    _quat_axis_angle,
    _quat_between,
    _quat_from_rotvec,
    _quat_mul,
    _quat_rotate,
    _scale,
    _select,
    _unit,
    _vec,
    _where,
)
from .poseaug_frames import H36M17_FRAMES, _frame_axes

__all__ = [
    "H36M17_LIMITS",
    "JointLimit",
    "apply_rotations",
    "joint_angles",
    "joint_rotations",
    "rotate_joints",
    "sample_joint_angles",
]


@dataclass(frozen=True)
class JointLimit:
    """How one joint may rotate: the angle between its bone and a reference axis stays in
    ``[lo_deg, hi_deg]``.

    Attributes:
        child: the joint at the end of the bone this joint turns (the whole subtree below the
            joint moves with it; e.g. ``thorax -> neck`` also carries the shoulders).
        kind: ``"hinge"`` (one degree of freedom: flexion in the plane of the parent bone and
            the bone; knees, elbows) or ``"cone"`` (any direction within a cone; hips,
            shoulders, spine, neck).
        frame: the body frame (a key of the frames table, e.g. ``"pelvis"``, ``"thorax"``) in
            which the random swing is drawn, ``axis`` and ``bend`` are given.
        axis: cone axis ``(out, up, fwd)`` in ``frame``; ``None`` for the direction of the
            parent bone (the bone ending at this joint). Hinges always use the parent bone: their
            angle is the flexion (0 = straight).
        lo_deg, hi_deg: the allowed range of the angle between the bone and the axis.
        swing_deg: the largest random swing (cones: axis-angle radius in ``frame``) or flexion
            change (hinges) that :func:`sample_joint_angles` draws (before ``scale``).
        twist_deg: the largest random twist about the bone (moves grandchildren: e.g. a thigh
            twist swings the shin about the thigh).
        bend: hinges only: the flexion direction ``(out, up, fwd)`` in ``frame`` used when the
            limb is (nearly) straight and the data give no bending plane.
        side: ``+1`` for left and midline joints, ``-1`` for right ones (mirrors ``out``).
    """

    child: str
    kind: str
    frame: str
    axis: tuple[float, float, float] | None
    lo_deg: float
    hi_deg: float
    swing_deg: float
    twist_deg: float = 0.0
    bend: tuple[float, float, float] = (0.0, 0.0, 0.0)
    side: int = 1


def _both_sides(name: str, **kw) -> dict[str, JointLimit]:
    child = kw.pop("child")
    return {
        f"l_{name}": JointLimit(child=f"l_{child}", side=1, **kw),
        f"r_{name}": JointLimit(child=f"r_{child}", side=-1, **kw),
    }


H36M17_LIMITS: dict[str, JointLimit] = {
    # Hip: thigh within 75 deg of an axis pointing down, forward and slightly out. Covers
    # flexion to ~115 deg (thigh above horizontal), extension ~30 deg, abduction ~55 deg.
    **_both_sides("hip", child="knee", kind="cone", frame="pelvis", axis=(0.15, -0.75, 0.65),
                  lo_deg=0.0, hi_deg=75.0, swing_deg=30.0, twist_deg=20.0),
    # Knee: flexion 0..150 deg only (no hyperextension: the angle is unsigned, the bend
    # direction for a straight knee is backwards).
    **_both_sides("knee", child="ankle", kind="hinge", frame="pelvis", axis=None,
                  lo_deg=0.0, hi_deg=150.0, swing_deg=40.0, bend=(0.0, 0.0, -1.0)),
    # Shoulder: upper arm within 110 deg of an axis pointing out, a little forward and down: arm
    # down, overhead, forward, 45 deg down-behind the body and across the chest; not straight back.
    **_both_sides("shoulder", child="elbow", kind="cone", frame="thorax",
                  axis=(0.9, -0.25, 0.35), lo_deg=0.0, hi_deg=110.0, swing_deg=40.0,
                  twist_deg=30.0),
    # Elbow: flexion 0..150 deg; a straight arm bends forwards.
    **_both_sides("elbow", child="wrist", kind="hinge", frame="thorax", axis=None,
                  lo_deg=0.0, hi_deg=150.0, swing_deg=45.0, bend=(0.0, 0.0, 1.0)),
    # Lower spine: chest within 45 deg of the pelvis' up axis tilted 10 deg forward.
    "spine": JointLimit("thorax", "cone", "pelvis", (0.0, 0.985, 0.174), 0.0, 45.0, 15.0, 20.0),
    # Upper spine: neck (and with it the shoulder girdle) within 50 deg of the chest direction.
    "thorax": JointLimit("neck", "cone", "pelvis", None, 0.0, 50.0, 10.0, 10.0),
    # Head on the neck: within 45 deg of the neck direction.
    "neck": JointLimit("head", "cone", "thorax", None, 0.0, 45.0, 15.0, 0.0),
}  # fmt: skip
"""Anatomical limits of ``h36m17`` (degrees). Rotated joints: hips, knees, shoulders, elbows,
spine, thorax, neck; the pelvis (global rotation is separate), ankles, wrists and the head tip
are ends. Every frame of the bundled CMU recordings lies inside these limits (tested)."""


_STRAIGHT = math.radians(15.0)
"""A hinge within 15 deg of straight bends (partly) along its anatomical ``bend`` direction."""


class _LimitPlan:
    """Index and constant tensors of a limits table for one skeleton, device and dtype."""

    def __init__(self, skeleton, limits, frames, device, dtype):
        names = list(limits)
        lim = list(limits.values())
        frame_names = list(frames)
        for n, v in limits.items():
            if not isinstance(v, JointLimit):
                raise TypeError(f"limits[{n!r}] must be a JointLimit, got {type(v).__name__}")
            if v.kind not in ("hinge", "cone"):
                raise ValueError(f"limits[{n!r}].kind must be 'hinge' or 'cone', got {v.kind!r}")
            if v.frame not in frames:
                raise ValueError(f"limits[{n!r}].frame {v.frame!r} is not one of {frame_names}")
            if not 0 <= v.lo_deg <= v.hi_deg <= 180:
                raise ValueError(
                    f"limits[{n!r}] needs 0 <= lo_deg <= hi_deg <= 180, got {(v.lo_deg, v.hi_deg)}"
                )
        joint = _names_index(skeleton, names, "limits")
        child = _names_index(skeleton, [v.child for v in lim], "limits (child)")
        if len(set(joint)) != len(joint):
            raise ValueError("limits names a joint twice")
        for n, j, c in zip(names, joint, child, strict=True):
            if skeleton.parents[c] != j:
                raise ValueError(f"limits[{n!r}]: {skeleton.names[c]!r} is not a child of {n!r}")
            if skeleton.parents[j] == -1:
                raise ValueError(f"limits[{n!r}]: the root has no parent bone to rotate against")
        kw = {"device": device, "dtype": dtype}
        self.L = len(names)
        bone_of = {c: s for s, (_, c) in enumerate(skeleton.bones)}
        self.bone_d = torch.tensor([bone_of[c] for c in child], device=device)
        self.bone_a = torch.tensor([bone_of[j] for j in joint], device=device)
        self.frame = torch.tensor([frame_names.index(v.frame) for v in lim], device=device)
        self.side = torch.tensor([float(v.side) for v in lim], **kw)
        self.hinge = torch.tensor([v.kind == "hinge" for v in lim], device=device)
        self.use_parent = torch.tensor(
            [v.axis is None or v.kind == "hinge" for v in lim], device=device
        )
        axis = torch.tensor([v.axis if v.axis is not None else (0, 1, 0) for v in lim], **kw)
        self.axis = axis / axis.norm(dim=-1, keepdim=True)  # (L, 3) out, up, fwd
        self.bend = torch.tensor([v.bend for v in lim], **kw)
        self.lo = torch.tensor([math.radians(v.lo_deg) for v in lim], **kw)
        self.hi = torch.tensor([math.radians(v.hi_deg) for v in lim], **kw)


class _ChainPlan:
    """For each limited joint the nearest limited proper ancestor (``L`` = none), the depth
    levels of the limited joints from the root, and for each bone ``(p, c)`` the nearest limited
    joint at or above ``p``, whose accumulated rotation the bone takes (``L`` = none)."""

    def __init__(self, skeleton, limits, device):
        joint = _names_index(skeleton, list(limits), "limits")
        L = len(joint)
        pos = {j: k for k, j in enumerate(joint)}

        def nearest(j: int) -> int:
            while j != -1 and j not in pos:
                j = skeleton.parents[j]
            return pos[j] if j != -1 else L

        self.chain_parent = torch.tensor(
            [nearest(skeleton.parents[j]) for j in joint] + [L], device=device
        )
        depth = [skeleton.depth[j] for j in joint]
        self.levels = [
            torch.tensor([d == dep for d in depth] + [False], device=device)
            for dep in sorted(set(depth))
        ]
        self.bone_chain = torch.tensor([nearest(p) for p, _ in skeleton.bones], device=device)


def _chain_plan(skeleton, limits, device) -> _ChainPlan:
    key = ("poseaug_chain", tuple(limits), device)
    return _cached(skeleton, key, lambda: _ChainPlan(skeleton, limits, device))


def _plan(skeleton, limits, frames, device, dtype) -> _LimitPlan:
    key = ("poseaug_limits", tuple(limits.items()), tuple(frames.items()), device, dtype)
    return _cached(skeleton, key, lambda: _LimitPlan(skeleton, limits, frames, device, dtype))


def _limit_geometry(joints, skeleton, limits, frames):
    """Bone vectors (components ``(..., S)``); per limited joint its body axes ``out, up,
    fwd``, bone direction ``d`` and reference axis ``a`` (components ``(..., L)``)."""
    plan = _plan(skeleton, limits, frames, joints.device, joints.dtype)
    p = _vec(joints)
    bones = _bones_t(joints, skeleton)
    left, up, fwd = (_select(v, plan.frame) for v in _frame_axes(p, skeleton, frames))
    out = _scale(left, plan.side)
    d = _unit(_select(bones, plan.bone_d))
    parent_bone = _unit(_select(bones, plan.bone_a))
    fixed = _combo(out, up, fwd, plan.axis)
    a = _where(plan.use_parent, parent_bone, fixed)
    return plan, bones, (out, up, fwd), d, a


def joint_angles(
    joints: torch.Tensor,
    skeleton: Skeleton,
    limits: Mapping[str, JointLimit] = H36M17_LIMITS,
    frames: Mapping[str, tuple[str, str, str, str]] = H36M17_FRAMES,
) -> torch.Tensor:
    """The limited angle of every joint in ``limits``: between the joint's bone (to
    ``limit.child``) and its reference axis (the parent bone for hinges and ``axis=None``, else
    ``axis`` in the joint's body frame). Hinges: the flexion, 0 = straight.

    Args:
        joints: ``(..., J, 3)``.

    Returns:
        ``(..., L)`` radians in ``[0, pi]``, in the order of ``limits``.
    """
    _check_joints("joints", joints, skeleton)
    _, _, _, d, a = _limit_geometry(joints, skeleton, limits, frames)
    return _angle(a, d)


def _check_angles(angles: torch.Tensor, limits) -> None:
    check_tensor("angles", angles, 2)
    check_last_dims("angles", angles, (len(limits), 4), f"L={len(limits)} limited joints")


def joint_rotations(
    joints: torch.Tensor,
    angles: torch.Tensor,
    skeleton: Skeleton,
    limits: Mapping[str, JointLimit] = H36M17_LIMITS,
    frames: Mapping[str, tuple[str, str, str, str]] = H36M17_FRAMES,
) -> torch.Tensor:
    """The local rotation of every joint of ``limits`` that :func:`rotate_joints` applies, as
    unit quaternions ``(..., L, 4)`` (w, x, y, z) in world coordinates of the input pose: the
    ``local_rotations`` of :func:`~tensorpose.ops.kinematics.forward_kinematics` with the
    input's bone vectors as offsets. See :func:`rotate_joints` for ``angles``."""
    _check_joints("joints", joints, skeleton)
    _check_angles(angles, limits)
    plan, _, axes, d, a = _limit_geometry(joints, skeleton, limits, frames)
    return torch.stack(_rotations(plan, axes, d, a, angles.to(joints.dtype)), -1)


def _rotations(plan, axes, d: Vec, a: Vec, ang: torch.Tensor) -> Quat:
    out, up, fwd = axes
    hinge = plan.hinge
    a0, a1, a2, a3 = ang.unbind(-1)
    # Cone: swing d by the frame-local axis-angle (mirrored for the right side).
    omega = tuple((out[i] * a0 + up[i] * a1 + fwd[i] * a2) * plan.side for i in range(3))
    d_cone = _quat_rotate(_quat_from_rotvec(omega), d)
    theta0 = _angle(a, d)
    theta1 = torch.where(hinge, theta0 + a0, _angle(a, d_cone))
    d1 = _where(hinge, d, d_cone)
    theta = torch.minimum(torch.maximum(theta1, plan.lo), plan.hi)
    # New direction at angle theta from a, in the plane of (a, d1). For a (nearly) straight
    # hinge that plane is noise: blend in the anatomical bend direction (only when bending).
    perp = _axpy(-_dot(d1, a), a, d1)
    bend = _combo(out, up, fwd, plan.bend)
    bend = _axpy(-_dot(bend, a), a, bend)
    straight = (1 - _norm(perp) / math.sin(_STRAIGHT)).clamp(0, 1)
    moving = ((theta - theta0).abs() / _STRAIGHT).clamp(max=1)
    w = torch.where(hinge, straight * moving, torch.zeros_like(moving))
    u = _unit(_axpy(w, bend, perp))
    d_new = _axpy(theta.sin(), u, _scale(a, theta.cos()))
    keep = (~hinge) & (theta == theta1)  # a cone swing inside the limits stays as it is
    d_new = _unit(_where(keep, d1, d_new))
    q_twist = _quat_axis_angle(d, a3 * plan.side)
    return _quat_mul(_quat_between(d, d_new), q_twist)


def apply_rotations(
    joints: torch.Tensor,
    rotations: torch.Tensor,
    skeleton: Skeleton,
    limits: Mapping[str, JointLimit] = H36M17_LIMITS,
    lengths: torch.Tensor | None = None,
) -> torch.Tensor:
    """Forward kinematics with local rotations at the joints of ``limits``.

    The input's bone vectors are the offsets; joint ``j`` of ``limits`` gets the local rotation
    ``rotations[..., l]`` and ``G[j] = G[parent] R[j]`` is accumulated over the depth levels of
    the limited joints; every bone turns by the ``G`` of the nearest limited joint at or above
    its parent, and the joints are composed again from the root. Every subtree moves rigidly
    with its parent; bone lengths are preserved exactly (or set to ``lengths``).

    Args:
        joints: ``(..., J, 3)``.
        rotations: ``(..., L, 4)`` unit quaternions (w, x, y, z), e.g. from
            :func:`joint_rotations`, broadcast against the joints' batch dims: ``(B, 1, L, 4)``
            turns all frames of windows ``(B, R, J, 3)`` the same way.
        lengths: optional ``(..., S)`` bone lengths to give the bones (directions kept) before
            rotating, broadcast like ``rotations``.

    Returns:
        ``(..., J, 3)`` with the root where it was.
    """
    _check_joints("joints", joints, skeleton)
    check_tensor("rotations", rotations, 2)
    check_last_dims("rotations", rotations, (len(limits), 4), f"L={len(limits)} quaternions")
    plan = _chain_plan(skeleton, limits, joints.device)
    bones = _bones_t(joints, skeleton)
    if lengths is not None:
        check_tensor("lengths", lengths)
        check_last_dims("lengths", lengths, (skeleton.num_bones,), f"S={skeleton.num_bones}")
        bones = _scale(bones, lengths.to(joints.dtype) / _norm(bones).clamp_min(1e-12))
    q = tuple(rotations.to(joints.dtype).unbind(-1))
    one = torch.ones_like(q[0][..., :1])
    zero = torch.zeros_like(one)
    q = tuple(torch.cat([c, one if i == 0 else zero], -1) for i, c in enumerate(q))  # L: none
    G = q
    for level in plan.levels:  # G[j] = G[chain parent] q[j], a loop over depth levels
        G = _where(level, _quat_mul(_select(G, plan.chain_parent), q), G)
    moved = _quat_rotate(_select(G, plan.bone_chain), bones)  # components (..., S)
    root = joints[..., skeleton.root, :].expand(*moved[0].shape[:-1], 3)
    return _compose_t(moved, root, skeleton)


def rotate_joints(
    joints: torch.Tensor,
    angles: torch.Tensor,
    skeleton: Skeleton,
    limits: Mapping[str, JointLimit] = H36M17_LIMITS,
    frames: Mapping[str, tuple[str, str, str, str]] = H36M17_FRAMES,
) -> torch.Tensor:
    """Rotate joints locally within anatomical limits; children follow their parents.

    Per joint ``l`` of ``limits`` (bone direction ``d``, reference axis ``a``, range
    ``[lo, hi]``):

    - cone: ``d`` is swung by the rotation ``angles[..., l, :3]`` (axis-angle in the joint's
      body frame, coordinates ``out, up, fwd``), then pulled back onto the cone boundary if the
      angle to ``a`` left ``[lo, hi]``;
    - hinge: the flexion becomes ``clamp(flexion + angles[..., l, 0], lo, hi)`` in the bending
      plane of the data (or ``limit.bend`` for a nearly straight limb); ``angles[..., l, 1:3]``
      are ignored;
    - then a twist of ``angles[..., l, 3]`` about the bone (mirrored for the right side).

    ``rotate_joints(x, a) == apply_rotations(x, joint_rotations(x, a))``: each pose gets the
    rotations computed from itself, so bone lengths are preserved exactly and the limited
    angles measured afterwards (:func:`joint_angles`) lie in ``[lo, hi]``. Zero angles give back
    the input wherever it is within the limits (joints outside are clamped in).

    Args:
        joints: ``(..., J, 3)`` positions.
        angles: ``(..., L, 4)``, ``L = len(limits)``, broadcast against the joints' batch dims.
        skeleton: the joint tree; ``limits`` and ``frames`` name its joints.

    Returns:
        ``(..., J, 3)``.

    Example:
        >>> from tensorpose.skeleton import get_skeleton
        >>> sk = get_skeleton("h36m17")
        >>> x = torch.randn(4, 17, 3, dtype=torch.float64)
        >>> g = torch.Generator().manual_seed(0)
        >>> y = rotate_joints(x, sample_joint_angles((4,), g, dtype=torch.float64), sk)
        >>> bool((joint_angles(y, sk) <= math.radians(150) + 1e-9).all())  # every limit <= 150
        True
    """
    return apply_rotations(joints, joint_rotations(joints, angles, skeleton, limits, frames),
                           skeleton, limits)  # fmt: skip


def sample_joint_angles(
    shape: Sequence[int],
    generator: torch.Generator,
    limits: Mapping[str, JointLimit] = H36M17_LIMITS,
    scale: float = 1.0,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Random parameters for :func:`rotate_joints`: cone swings uniform in the ball of radius
    ``scale * swing_deg``, hinge flexion changes uniform in ``+-scale * swing_deg``, twists
    uniform in ``+-scale * twist_deg``.

    Args:
        shape: leading dims, e.g. ``(B, 1)``.
        generator: the only source of randomness (draws on its device).

    Returns:
        ``(*shape, L, 4)`` radians.
    """
    _check_generator(generator)
    if scale < 0:
        raise ValueError(f"scale must be >= 0, got {scale}")
    L = len(limits)
    lim = list(limits.values())
    dev = generator.device
    swing = _const(tuple(math.radians(v.swing_deg) for v in lim), dev, dtype)
    twist = _const(tuple(math.radians(v.twist_deg) for v in lim), dev, dtype)
    hinge = _const(tuple(v.kind == "hinge" for v in lim), dev, None)
    g = torch.randn((*shape, L, 3), generator=generator, device=dev, dtype=dtype)
    r = torch.rand((*shape, L, 1), generator=generator, device=dev, dtype=dtype).pow(1 / 3)
    ball = g / g.norm(dim=-1, keepdim=True).clamp_min(1e-12) * r
    flex = _uniform((*shape, L, 1), generator, -1.0, 1.0, dtype)
    tw = _uniform((*shape, L, 1), generator, -1.0, 1.0, dtype)
    zero = torch.zeros_like(flex)
    hinge_part = torch.cat([flex, zero, zero], -1)
    swing_part = torch.where(hinge[:, None], hinge_part, ball) * swing[:, None]
    return scale * torch.cat([swing_part, tw * twist[:, None]], -1)
