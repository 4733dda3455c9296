"""Kinematic pose augmentation (in the spirit of PoseAug) as pure tensor functions.

Every function is batched over leading dims; the random ones take an explicit
``torch.Generator`` and draw on its device. Deterministic parts take the random parameters as
tensors, so that "identity parameters give back the input" is testable.

What is here, in the order a synthetic training sample uses it:

- :func:`rotate_joints` / :func:`sample_joint_angles`: local joint rotations within anatomical
  limits (:data:`H36M17_LIMITS`), applied through
  :func:`~tensorpose.ops.kinematics.forward_kinematics` so that children move with their
  parents; bone lengths are preserved exactly.
  :func:`joint_angles` measures the limited angles of any pose.
- :func:`bone_scales` / :func:`sample_bone_scales`: a global scale times one scale per bone group
  (:data:`H36M17_BONE_GROUPS`, the same for left and right).
- :func:`global_rotation` / :func:`sample_global_angles`: yaw about the vertical, small pitch/roll.
- :func:`sample_cameras` and :func:`fit_in_frame`: random pinhole cameras (field of view, image
  size incl. portrait, principal point, distance, elevation, roll, off-centre framing) and the
  depth shift that keeps every point in the image.
- :func:`detector_offsets` / :func:`sample_detector_offsets` and :func:`derive_joints`: the
  systematic difference between 2D-detector keypoints and mocap joint centres
  (:data:`H36M17_DETECTOR_OFFSETS`, :data:`H36M17_DETECTOR_RULES`).
- :func:`keypoint_noise`, :func:`drop_joints`, :func:`window_positions`: detector-like 2D noise
  (heavier at wrists/ankles, :data:`H36M17_NOISE_SCALE`), dropped joints with a mask, and
  temporal jitter / playback speed of windows.
- :func:`normalize_with_intrinsics` / :func:`default_intrinsics`: the camera-independent 2D input
  ``K^-1 [u, v, 1]``.

Frames and signs. Body frames have columns ``(out, up, fwd)``: ``left`` is from the right to the
left hip (pelvis frame) or shoulder (thorax frame), ``up`` from the pelvis to the spine (or from
the thorax to the neck) made orthogonal to ``left``, ``fwd = left x up`` (the way the body
faces). For a joint of the right side ``out = -left``, so tables read the same for both sides and
left/right parameters act as mirror images. Angles are radians in every function (tables are in
degrees, for reading).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from ..skeleton import Skeleton
from ._checks import check_last_dims, check_tensor
from .camera import intrinsic_matrix, look_at
from .rotations import euler_to_matrix

__all__ = [
    "DEFAULT_FOCAL_FACTOR",
    "H36M17_BONE_GROUPS",
    "H36M17_DETECTOR_OFFSETS",
    "H36M17_DETECTOR_RULES",
    "H36M17_FRAMES",
    "H36M17_LIMITS",
    "H36M17_NOISE_SCALE",
    "DetectorOffset",
    "JointLimit",
    "apply_rotations",
    "body_frames",
    "bone_scales",
    "default_intrinsics",
    "derive_joints",
    "detector_offsets",
    "drop_joints",
    "fit_in_frame",
    "global_rotation",
    "joint_angles",
    "joint_rotations",
    "keypoint_noise",
    "normalize_with_intrinsics",
    "rotate_joints",
    "sample_bone_scales",
    "sample_cameras",
    "sample_detector_offsets",
    "sample_global_angles",
    "sample_joint_angles",
    "set_bone_lengths",
    "window_positions",
]


# ============================================================================ tables
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


H36M17_FRAMES: dict[str, tuple[str, str, str, str]] = {
    "pelvis": ("l_hip", "r_hip", "pelvis", "spine"),
    "thorax": ("l_shoulder", "r_shoulder", "thorax", "neck"),
}
"""Body frames as ``(left joint, right joint, lower joint, upper joint)``: ``left`` axis from the
right to the left joint, ``up`` from lower to upper made orthogonal to it, ``fwd = left x up``."""


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


@dataclass(frozen=True)
class DetectorOffset:
    """Where a detector puts a keypoint relative to the mocap joint centre, in metres in a body
    frame ``(out, up, fwd)``: ``mean`` plus a uniform random part in ``[-spread, spread]`` per
    axis (drawn once per sample: a systematic, not a per-frame, error)."""

    frame: str
    mean: tuple[float, float, float]
    spread: tuple[float, float, float]
    side: int = 1


def _offset_both(name: str, frame: str, mean, spread) -> dict[str, DetectorOffset]:
    return {
        f"l_{name}": DetectorOffset(frame, mean, spread, 1),
        f"r_{name}": DetectorOffset(frame, mean, spread, -1),
    }


H36M17_DETECTOR_OFFSETS: dict[str, DetectorOffset] = {
    # COCO/OpenPose hip keypoints sit on the outside of the hip (near the greater trochanter),
    # wider and higher than the functional hip joint centres of mocap.
    **_offset_both("hip", "pelvis", (0.03, 0.03, 0.0), (0.02, 0.02, 0.02)),
    # Shoulder keypoints are near the acromion: a little above the gleno-humeral centre.
    **_offset_both("shoulder", "thorax", (0.0, 0.02, 0.0), (0.015, 0.015, 0.015)),
    # Limb ends and mid joints: no systematic shift, only a per-sample one.
    **_offset_both("knee", "pelvis", (0.0, 0.0, 0.0), (0.015, 0.015, 0.015)),
    **_offset_both("ankle", "pelvis", (0.0, 0.0, 0.0), (0.015, 0.015, 0.015)),
    **_offset_both("elbow", "thorax", (0.0, 0.0, 0.0), (0.015, 0.015, 0.015)),
    **_offset_both("wrist", "thorax", (0.0, 0.0, 0.0), (0.015, 0.015, 0.015)),
    # Head joints: detectors have no head-centre joint; whatever rule maps their face/neck
    # keypoints to it is uncertain by a few centimetres.
    "neck": DetectorOffset("thorax", (0.0, 0.0, 0.0), (0.01, 0.03, 0.02)),
    "head": DetectorOffset("thorax", (0.0, 0.0, 0.0), (0.02, 0.03, 0.03)),
}
"""Systematic detector-vs-mocap offsets for ``h36m17`` (metres). Joints absent here get none."""


H36M17_DETECTOR_RULES: dict[str, dict[str, float]] = {
    "pelvis": {"l_hip": 0.5, "r_hip": 0.5},
    "thorax": {"l_shoulder": 0.5, "r_shoulder": 0.5},
    "spine": {"l_hip": 0.25, "r_hip": 0.25, "l_shoulder": 0.25, "r_shoulder": 0.25},
    "head": {"head": 2.2, "neck": -1.2},
}
"""Joints a body detector does not give, as weighted sums of ones it gives (what a converter
from COCO/OpenPose to ``h36m17`` computes): pelvis = mid-hips, thorax = mid-shoulders, spine =
the mean of both. Apply the same rule to synthetic keypoints (:func:`derive_joints`) and to real
detections, so both see the same convention. ``head`` is the top of the head, as the layout
converters make it (:mod:`tensorpose.layouts`: BODY_25B's head top, or extrapolated beyond the
nose): the CMU mocap ``head`` (the Head end site) lies only about 9 cm above its ``neck`` (the
Head joint, top of the neck), so the synthetic head top continues that direction to about 20 cm
(``head + 1.2 (head - neck)``)."""


H36M17_NOISE_SCALE: dict[str, float] = {
    "pelvis": 1.0, "r_hip": 1.5, "r_knee": 1.2, "r_ankle": 1.5, "l_hip": 1.5, "l_knee": 1.2,
    "l_ankle": 1.5, "spine": 1.0, "thorax": 1.0, "neck": 1.0, "head": 1.0, "l_shoulder": 1.0,
    "l_elbow": 1.3, "l_wrist": 2.0, "r_shoulder": 1.0, "r_elbow": 1.3, "r_wrist": 2.0,
}  # fmt: skip
"""Relative 2D noise per ``h36m17`` joint: wrists and ankles move fast and are small in the
image (detectors jitter most there), hips are ill-defined under clothing."""

_STRAIGHT = math.radians(15.0)
"""A hinge within 15 deg of straight bends (partly) along its anatomical ``bend`` direction."""

DEFAULT_FOCAL_FACTOR = 1.0
""":func:`default_intrinsics` uses ``focal = DEFAULT_FOCAL_FACTOR * max(width, height)``: a
53 deg field of view across the long side, between the Human3.6M cameras (1.15 x 1000 px) and
phone video (about 0.85-0.9 x the long side)."""


# ============================================================================ helpers
def _check_generator(generator: object) -> torch.Generator:
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    return generator


def _check_range(name: str, r: Sequence[float], low: float | None = None) -> tuple[float, float]:
    if len(r) != 2 or not r[0] <= r[1]:
        raise ValueError(f"{name} must be (low, high) with low <= high, got {tuple(r)}")
    if low is not None and r[0] < low:
        raise ValueError(f"{name} must be >= {low}, got {tuple(r)}")
    return float(r[0]), float(r[1])


@functools.lru_cache(maxsize=256)
def _const(values: tuple, device: torch.device, dtype: torch.dtype | None) -> torch.Tensor:
    """A constant table as a tensor on ``device``, built once (no per-batch host copies)."""
    return torch.tensor(values, device=device, dtype=dtype)


def _uniform(shape, generator: torch.Generator, lo, hi, dtype) -> torch.Tensor:
    u = torch.rand(shape, generator=generator, device=generator.device, dtype=dtype)
    return lo + (hi - lo) * u


# Small-vector algebra. Vectors are tuples of their 3 component tensors (quaternions: 4, w
# first), each with the joints/bones in the last dim: per-component arithmetic on contiguous
# tensors, no stacking, no reduction over a size-3 dim (both slow on CPU).
Vec = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
Quat = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def _vec(x: torch.Tensor) -> Vec:
    """``(..., n, 3)`` -> contiguous components ``(..., n)`` (one copy)."""
    a, b, c = x.transpose(-1, -2).contiguous().unbind(-2)
    return a, b, c


def _bones_t(joints: torch.Tensor, skeleton: Skeleton) -> Vec:
    """Bone vectors as contiguous components ``(..., S)``: one product with the ``(J, S)``
    incidence matrix on the coordinate-major joints."""
    inc = skeleton.bone_matrix(1, joints.device, joints.dtype)  # (J, S): child +1, parent -1
    a, b, c = (joints.transpose(-1, -2) @ inc).unbind(-2)
    return a, b, c


def _compose_t(bones: Vec, root: torch.Tensor, skeleton: Skeleton) -> torch.Tensor:
    """Joints ``(..., J, 3)`` (a transposed view of coordinate-major memory) from bone
    components and the root ``(..., 3)``: one product with the ``(S, J)`` path matrix."""
    path = skeleton.tensor("path", root.device, root.dtype)  # (J, S)
    joints_t = torch.stack(bones, -2) @ path.T + root.unsqueeze(-1)  # (..., 3, J)
    return joints_t.transpose(-1, -2)


def _stack(v: Vec) -> torch.Tensor:
    return torch.stack(v, -1)


def _dot(a: Vec, b: Vec) -> torch.Tensor:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _cross(a: Vec, b: Vec) -> Vec:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _scale(a: Vec, s: torch.Tensor | float) -> Vec:
    return (a[0] * s, a[1] * s, a[2] * s)


def _sub(a: Vec, b: Vec) -> Vec:
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def _axpy(s: torch.Tensor, a: Vec, b: Vec) -> Vec:
    """``s * a + b``."""
    return (s * a[0] + b[0], s * a[1] + b[1], s * a[2] + b[2])


def _combo(a: Vec, b: Vec, c: Vec, w: torch.Tensor) -> Vec:
    """``w[:, 0] a + w[:, 1] b + w[:, 2] c`` with ``w (n, 3)`` per last-dim entry."""
    w0, w1, w2 = w.unbind(-1)
    return tuple(a[i] * w0 + b[i] * w1 + c[i] * w2 for i in range(3))  # over 3 coordinates


def _where(m: torch.Tensor, a: tuple, b: tuple) -> tuple:
    return tuple(torch.where(m, x, y) for x, y in zip(a, b, strict=True))


def _select(a: tuple, idx: torch.Tensor) -> tuple:
    return tuple(x.index_select(-1, idx) for x in a)


def _norm(a: Vec) -> torch.Tensor:
    return _dot(a, a).sqrt()


def _unit(a: Vec, eps: float = 1e-12) -> Vec:
    return _scale(a, 1 / _norm(a).clamp_min(eps))


def _angle(a: Vec, b: Vec) -> torch.Tensor:
    """Angle between unit vectors, accurate near 0 and pi (``atan2(|a x b|, a . b)``)."""
    return torch.atan2(_norm(_cross(a, b)), _dot(a, b))


def _quat_axis_angle(axis: Vec, angle: torch.Tensor) -> Quat:
    """Unit (or zero) ``axis`` and ``angle`` -> quaternion."""
    s = (angle / 2).sin()
    return ((angle / 2).cos(), axis[0] * s, axis[1] * s, axis[2] * s)


def _quat_from_rotvec(v: Vec) -> Quat:
    """Axis-angle -> quaternion; exactly the identity at zero."""
    n = _norm(v)
    return _quat_axis_angle(_scale(v, 1 / n.clamp_min(1e-30)), n)


def _quat_between(a: Vec, b: Vec) -> Quat:
    """The smallest rotation taking unit ``a`` to unit ``b``: ``normalize(1 + a.b, a x b)``
    (no trigonometry; exactly the identity for ``a == b``; undefined for ``b == -a``, which the
    limits never ask for)."""
    w = 1 + _dot(a, b)
    x, y, z = _cross(a, b)
    n = (w * w + x * x + y * y + z * z).sqrt().clamp_min(1e-30)
    return (w / n, x / n, y / n, z / n)


def _quat_mul(p: Quat, q: Quat) -> Quat:
    """Hamilton product ``p q`` (rotate by ``q``, then by ``p``)."""
    pw, px, py, pz = p
    qw, qx, qy, qz = q
    return (
        pw * qw - px * qx - py * qy - pz * qz,
        pw * qx + px * qw + py * qz - pz * qy,
        pw * qy - px * qz + py * qw + pz * qx,
        pw * qz + px * qy - py * qx + pz * qw,
    )


def _quat_rotate(q: Quat, v: Vec) -> Vec:
    """Rotate ``v`` by unit ``q``: ``v + w t + q_v x t`` with ``t = 2 q_v x v``."""
    u = q[1:]
    t = _scale(_cross(u, v), 2.0)
    return tuple(v[i] + q[0] * t[i] + c for i, c in enumerate(_cross(u, t)))  # 3 coordinates


def _names_index(skeleton: Skeleton, names: Sequence[str], what: str) -> list[int]:
    out = []
    for n in names:
        if n not in skeleton.names:
            raise ValueError(
                f"{what}: joint {n!r} is not in skeleton {skeleton.name or skeleton.names}"
            )
        out.append(skeleton.names.index(n))
    return out


def _cached(skeleton: Skeleton, key: tuple, build):
    """A constant derived from tables, built once per skeleton (and key: device, dtype)."""
    value = skeleton._cache.get(key)
    if value is None:
        value = build()
        skeleton._cache[key] = value
    return value


def _check_joints(name: str, joints: torch.Tensor, skeleton: Skeleton) -> None:
    check_tensor(name, joints, 2)
    check_last_dims(name, joints, (skeleton.num_joints, 3), f"J={skeleton.num_joints} xyz")


# ============================================================================ body frames
def _frame_axes(p: Vec, skeleton, frames) -> tuple[Vec, Vec, Vec]:
    """``left, up, fwd`` of joint components ``p``, each with ``len(frames)`` in the last dim."""
    idx = _cached(
        skeleton,
        ("poseaug_frames", tuple(frames.items()), p[0].device),
        lambda: torch.tensor(
            [_names_index(skeleton, q, "frames") for q in frames.values()], device=p[0].device
        ).T.contiguous(),
    )  # (4, Fr)
    left = _unit(_sub(_select(p, idx[0]), _select(p, idx[1])))
    up = _sub(_select(p, idx[3]), _select(p, idx[2]))
    up = _unit(_axpy(-_dot(up, left), left, up))
    return left, up, _cross(left, up)


def body_frames(
    joints: torch.Tensor,
    skeleton: Skeleton,
    frames: Mapping[str, tuple[str, str, str, str]] = H36M17_FRAMES,
) -> torch.Tensor:
    """Orthonormal body frames of a pose.

    Args:
        joints: ``(..., J, 3)``.
        frames: name -> ``(left joint, right joint, lower joint, upper joint)``.

    Returns:
        ``(..., len(frames), 3, 3)``: per frame, columns ``left, up, fwd`` (right-handed), in
        the order of ``frames``.
    """
    _check_joints("joints", joints, skeleton)
    return torch.stack([_stack(v) for v in _frame_axes(_vec(joints), skeleton, frames)], -1)


# ============================================================================ joint rotations
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
        >>> from tensorpose import skeletons
        >>> sk = skeletons.get("h36m17")
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


# ============================================================================ bone lengths
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


# ============================================================================ global rotation
def global_rotation(angles: torch.Tensor) -> torch.Tensor:
    """``(..., 3)`` yaw, pitch, roll (radians; Y up) -> ``R = R_y(yaw) R_x(pitch) R_z(roll)``
    ``(..., 3, 3)``: yaw turns about the vertical, pitch leans forward/back, roll sideways."""
    check_tensor("angles", angles)
    check_last_dims("angles", angles, (3,), "yaw, pitch, roll")
    return euler_to_matrix(angles, "YXZ")


def sample_global_angles(
    shape: Sequence[int],
    generator: torch.Generator,
    yaw_deg: float = 180.0,
    pitch_deg: float = 10.0,
    roll_deg: float = 10.0,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Uniform yaw in ``+-yaw_deg``, pitch in ``+-pitch_deg``, roll in ``+-roll_deg``:
    ``(*shape, 3)`` radians for :func:`global_rotation`."""
    _check_generator(generator)
    for name, v in (("yaw_deg", yaw_deg), ("pitch_deg", pitch_deg), ("roll_deg", roll_deg)):
        if not 0 <= v <= 180:
            raise ValueError(f"{name} must be in [0, 180], got {v}")
    u = _uniform((*shape, 3), generator, -1.0, 1.0, dtype)
    scale = (math.radians(yaw_deg), math.radians(pitch_deg), math.radians(roll_deg))
    return u * _const(scale, generator.device, dtype)


# ============================================================================ cameras
def sample_cameras(
    n: int,
    generator: torch.Generator,
    target: torch.Tensor,
    image_sizes: Sequence[tuple[int, int]] = ((1000, 1000), (1920, 1080), (1080, 1920)),
    fov_deg: tuple[float, float] = (40.0, 75.0),
    principal_offset: float = 0.03,
    distance_m: tuple[float, float] = (2.5, 9.0),
    elevation_deg: tuple[float, float] = (-10.0, 35.0),
    roll_deg: float = 5.0,
    off_centre: float = 0.5,
) -> dict[str, torch.Tensor]:
    """``n`` random pinhole cameras looking (roughly) at ``target``, in a Y-up world.

    Each camera: an image size from ``image_sizes`` (width, height; portrait allowed), a field
    of view across the long side uniform in ``fov_deg`` (``focal = long / 2 / tan(fov / 2)``,
    square pixels), the principal point off the image centre by up to ``principal_offset`` of
    the width/height, a position at ``distance_m`` from the target, ``elevation_deg`` above
    the horizontal plane (positive: looking down) on the world ``+z`` side (turn the subject,
    not the camera, for other azimuths), a roll about the optical axis in ``+-roll_deg``, and
    the aim turned off the target by up to ``off_centre`` of the half field of view (the subject
    is not always in the middle). Use :func:`fit_in_frame` to keep a subject inside the image.

    Args:
        n: number of cameras.
        generator: the only source of randomness; outputs are on its device.
        target: ``(n, 3)`` or ``(3,)`` world points to look at.

    Returns:
        dict with ``K (n, 3, 3)``, ``R (n, 3, 3)``, ``t (n, 3)`` (``x_cam = R x + t``),
        ``size (n, 2)`` (width, height), all in ``target``'s dtype on the generator's device.
    """
    _check_generator(generator)
    check_tensor("target", target)
    check_last_dims("target", target, (3,), "xyz")
    if not image_sizes or any(len(s) != 2 or min(s) <= 0 for s in image_sizes):
        raise ValueError(f"image_sizes must be (width, height) pairs > 0, got {image_sizes}")
    f0, f1 = _check_range("fov_deg", fov_deg, 1.0)
    if f1 >= 170:
        raise ValueError(f"fov_deg must be below 170, got {fov_deg}")
    d0, d1 = _check_range("distance_m", distance_m)
    if d0 <= 0:
        raise ValueError(f"distance_m must be positive, got {distance_m}")
    e0, e1 = _check_range("elevation_deg", elevation_deg)
    if not -90 < e0 <= e1 < 90:
        raise ValueError(f"elevation_deg must lie inside (-90, 90), got {elevation_deg}")
    if not 0 <= principal_offset < 0.5 or not 0 <= off_centre <= 1:
        raise ValueError(
            f"principal_offset must be in [0, 0.5) and off_centre in [0, 1], got "
            f"{principal_offset}, {off_centre}"
        )
    dtype, dev = target.dtype, generator.device
    sizes = _const(tuple(tuple(int(v) for v in s) for s in image_sizes), dev, dtype)
    pick = torch.randint(len(image_sizes), (n,), generator=generator, device=dev)
    size = sizes[pick]  # (n, 2)
    u = torch.rand(n, 9, generator=generator, device=dev, dtype=dtype)
    fov = torch.deg2rad(f0 + (f1 - f0) * u[:, 0])
    focal = size.amax(-1) / 2 / torch.tan(fov / 2)
    centre = size * (0.5 + principal_offset * (2 * u[:, 1:3] - 1))
    K = intrinsic_matrix(torch.stack([focal, focal], -1), centre, dtype=dtype, device=dev)
    dist = d0 + (d1 - d0) * u[:, 3]
    elev = torch.deg2rad(e0 + (e1 - e0) * u[:, 4])
    tgt = target.to(dev).expand(n, 3)
    eye = tgt + torch.stack([torch.zeros_like(dist), elev.sin(), elev.cos()], -1) * dist[:, None]
    R, _ = look_at(eye, tgt)
    # Roll about the optical axis, then turn the aim off the target (pan about the camera's y,
    # tilt about its x) by up to off_centre of the half field of view.
    half = torch.atan(size / 2 / focal[:, None])  # (n, 2) half fields of view x, y
    pan = off_centre * half[:, 0] * (2 * u[:, 5] - 1)
    tilt = off_centre * half[:, 1] * (2 * u[:, 6] - 1)
    roll = math.radians(roll_deg) * (2 * u[:, 7] - 1)
    turn = euler_to_matrix(torch.stack([tilt, pan, roll], -1), "XYZ")
    R = turn @ R
    t = -(R @ eye.unsqueeze(-1)).squeeze(-1)
    return {"K": K, "R": R, "t": t, "size": size}


def fit_in_frame(
    points: torch.Tensor,
    K: torch.Tensor,
    size: torch.Tensor,
    margin: float = 0.02,
    min_depth: float = 0.5,
) -> torch.Tensor:
    """The smallest push along each camera's optical axis that puts every point inside its
    image (with ``margin`` of the width/height free on each side) and at least ``min_depth``
    in front of it.

    A point at camera coordinates ``(x, y, z)`` projects inside when ``z + s >= fx * x /
    (right - cx)`` for ``x > 0`` (and the mirrored conditions for the left, top and bottom
    edges); ``s`` is the largest requirement over the points, never negative.

    Args:
        points: ``(n, ..., 3)`` camera coordinates of each camera's subject (any number of
            points per camera).
        K: ``(n, 3, 3)`` intrinsics (principal point inside the margins).
        size: ``(n, 2)`` width, height in pixels.

    Returns:
        ``(n,)`` shifts: use ``points + shift * e_z``.
    """
    check_tensor("points", points, 2)
    check_last_dims("points", points, (3,), "camera xyz")
    check_last_dims("K", K, (3, 3), "intrinsics")
    check_last_dims("size", size, (2,), "width, height")
    if not 0 <= margin < 0.5:
        raise ValueError(f"margin must be in [0, 0.5), got {margin}")
    n = points.shape[0]
    if K.shape[0] != n or size.shape[0] != n:
        raise ValueError(
            f"points, K and size need the same first dim, got {points.shape[0]}, "
            f"{K.shape[0]}, {size.shape[0]}"
        )
    x, y, z = points.reshape(n, -1, 3).unbind(-1)  # (n, P) each
    need = torch.full_like(z, min_depth)
    for coord, axis in ((x, 0), (y, 1)):  # the two image axes
        f, c = K[:, axis, axis, None], K[:, axis, 2, None]
        lo, hi = margin * size[:, axis, None], (1 - margin) * size[:, axis, None]
        room = torch.where(coord > 0, hi - c, c - lo).clamp_min(1e-6)  # pixels to the edge
        need = torch.maximum(need, f * coord.abs() / room)  # depth each point needs
    return (need - z).amax(-1).clamp_min(0)


# ============================================================================ detector model
def detector_offsets(
    joints: torch.Tensor,
    local_offsets: torch.Tensor,
    skeleton: Skeleton,
    offsets: Mapping[str, DetectorOffset] = H36M17_DETECTOR_OFFSETS,
    frames: Mapping[str, tuple[str, str, str, str]] = H36M17_FRAMES,
) -> torch.Tensor:
    """Move joints to where a detector would put them: per joint of ``offsets`` a vector
    ``local_offsets[..., k, :]`` in metres in its body frame (``out, up, fwd``; ``out``
    mirrored for the right side) is rotated into the pose's frame and added.

    Args:
        joints: ``(..., J, 3)``.
        local_offsets: ``(..., K, 3)``, ``K = len(offsets)``, broadcast against the joints'
            batch dims (e.g. ``(B, 1, K, 3)``: one systematic offset per window).

    Returns:
        ``(..., J, 3)``; joints not in ``offsets`` are unchanged.
    """
    _check_joints("joints", joints, skeleton)
    check_tensor("local_offsets", local_offsets, 2)
    check_last_dims("local_offsets", local_offsets, (len(offsets), 3), f"K={len(offsets)}")
    key = ("poseaug_offsets", tuple(offsets.items()), tuple(frames.items()), joints.device,
           joints.dtype)  # fmt: skip
    fidx, side, M = _cached(
        skeleton, key, lambda: _offset_plan(skeleton, offsets, frames, joints.device, joints.dtype)
    )
    out, up, fwd = (_select(v, fidx) for v in _frame_axes(_vec(joints), skeleton, frames))
    o0, o1, o2 = local_offsets.to(joints.dtype).unbind(-1)
    world = tuple((out[i] * side * o0 + up[i] * o1 + fwd[i] * o2) @ M.T for i in range(3))
    return joints + _stack(world)  # (..., K) @ (K, J): a scatter without a loop


def _offset_plan(skeleton, offsets, frames, device, dtype):
    frame_names = list(frames)
    for n, o in offsets.items():
        if not isinstance(o, DetectorOffset):
            raise TypeError(f"offsets[{n!r}] must be a DetectorOffset, got {type(o).__name__}")
        if o.frame not in frames:
            raise ValueError(f"offsets[{n!r}].frame {o.frame!r} is not one of {frame_names}")
    idx = torch.tensor(_names_index(skeleton, list(offsets), "offsets"))
    fidx = torch.tensor([frame_names.index(o.frame) for o in offsets.values()], device=device)
    side = torch.tensor([float(o.side) for o in offsets.values()], dtype=dtype)
    M = torch.zeros(skeleton.num_joints, len(offsets), dtype=dtype)
    M[idx, torch.arange(len(offsets))] = 1.0
    return fidx, side.to(device), M.to(device)


def sample_detector_offsets(
    shape: Sequence[int],
    generator: torch.Generator,
    offsets: Mapping[str, DetectorOffset] = H36M17_DETECTOR_OFFSETS,
    scale: float = 1.0,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """``scale * (mean + uniform(-spread, spread))`` per joint of ``offsets``: ``(*shape, K,
    3)`` metres for :func:`detector_offsets`."""
    _check_generator(generator)
    if scale < 0:
        raise ValueError(f"scale must be >= 0, got {scale}")
    dev = generator.device
    mean = _const(tuple(o.mean for o in offsets.values()), dev, dtype)
    spread = _const(tuple(o.spread for o in offsets.values()), dev, dtype)
    u = _uniform((*shape, len(offsets), 3), generator, -1.0, 1.0, dtype)
    return scale * (mean + u * spread)


def derive_joints(
    points: torch.Tensor,
    skeleton: Skeleton,
    rules: Mapping[str, Mapping[str, float]] = H36M17_DETECTOR_RULES,
) -> torch.Tensor:
    """Replace joints by weighted sums of other joints (see :data:`H36M17_DETECTOR_RULES`).

    Args:
        points: ``(..., J, D)`` (2D or 3D).
        rules: joint -> {source joint: weight}. Sources are read from the input (rules do not
            chain).

    Returns:
        ``(..., J, D)``: one ``(J, J)`` matrix product (a transposed view of ``(..., D, J)``
        memory).
    """
    check_tensor("points", points, 2)
    check_last_dims("points", points, (skeleton.num_joints, None), f"J={skeleton.num_joints}")
    J = skeleton.num_joints
    W = torch.eye(J, dtype=points.dtype, device=points.device)
    tgt = torch.tensor(_names_index(skeleton, list(rules), "rules"), device=points.device)
    rows = torch.zeros(len(rules), J, dtype=torch.float64)
    for r, src in enumerate(rules.values()):  # over the rules table (a few entries), not data
        for n, w in src.items():
            rows[r, _names_index(skeleton, [n], "rules (source)")[0]] += w
    W = W.index_copy(0, tgt, rows.to(points.device, points.dtype))
    return (points.transpose(-1, -2) @ W.T).transpose(-1, -2)  # one product, (..., D, J)


# ============================================================================ 2D noise
def keypoint_noise(
    shape: Sequence[int],
    sigma: torch.Tensor,
    generator: torch.Generator,
    outlier_prob: float = 0.0,
    outlier_scale: float = 10.0,
) -> torch.Tensor:
    """Detector-like 2D noise ``(*shape, 2)``: Gaussian with per-point ``sigma`` (broadcast
    against ``shape``; e.g. ``(B, 1, J)`` = person size in pixels x per-joint factors), and with
    probability ``outlier_prob`` per point a gross error of ``outlier_scale * sigma``.

    Args:
        shape: e.g. ``(B, R, J)``.
        sigma: pixels, broadcast to ``shape``.
    """
    _check_generator(generator)
    check_tensor("sigma", sigma)
    if not 0 <= outlier_prob <= 1:
        raise ValueError(f"outlier_prob must be in [0, 1], got {outlier_prob}")
    dev = generator.device
    n = torch.randn((*shape, 2), generator=generator, device=dev, dtype=sigma.dtype)
    s = sigma.to(dev).expand(*shape)
    if outlier_prob > 0:
        out = torch.rand(tuple(shape), generator=generator, device=dev) < outlier_prob
        s = torch.where(out, s * outlier_scale, s)
    return n * s.unsqueeze(-1)


def drop_joints(
    keypoints: torch.Tensor,
    generator: torch.Generator,
    prob: float = 0.02,
    window_prob: float = 0.0,
    fill: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop keypoints like a detector that misses joints.

    Each point of ``keypoints (..., R, J, D)`` is dropped with probability ``prob``
    independently, and each joint of each window (all ``R`` frames) with ``window_prob``.

    Returns:
        ``(keypoints, mask)``: dropped points set to ``fill``; ``mask (..., R, J)`` bool, True
        where a point was dropped.
    """
    _check_generator(generator)
    check_tensor("keypoints", keypoints, 3)
    for name, p in (("prob", prob), ("window_prob", window_prob)):
        if not 0 <= p <= 1:
            raise ValueError(f"{name} must be in [0, 1], got {p}")
    dev = generator.device
    shape = keypoints.shape[:-1]
    mask = torch.rand(shape, generator=generator, device=dev) < prob
    whole = torch.rand((*shape[:-2], 1, shape[-1]), generator=generator, device=dev) < window_prob
    mask = mask | whole
    return keypoints.masked_fill(mask.unsqueeze(-1), fill), mask


def window_positions(
    centre: torch.Tensor,
    receptive_field: int,
    speed: torch.Tensor,
    jitter: torch.Tensor | None = None,
) -> torch.Tensor:
    """Fractional frame positions of windows: ``centre + speed * (r - R // 2) + jitter``.

    ``speed`` plays the motion faster (> 1) or slower; ``jitter (B, R)`` (frames) shifts each
    sample time like an uneven video clock. Interpolate the sequence at these positions
    (clamped to it) to get the window.

    Args:
        centre: ``(B,)`` frame of the window's centre (float).
        speed: ``(B,)``.

    Returns:
        ``(B, R)``; the centre sample lies exactly at ``centre`` (no jitter there).
    """
    check_tensor("centre", centre)
    check_tensor("speed", speed)
    if not isinstance(receptive_field, int) or receptive_field < 1:
        raise ValueError(f"receptive_field must be a positive int, got {receptive_field!r}")
    half = receptive_field // 2
    off = torch.arange(-half, receptive_field - half, device=centre.device, dtype=centre.dtype)
    pos = centre[:, None] + speed[:, None] * off
    if jitter is not None:
        check_last_dims("jitter", jitter, (receptive_field,), f"R={receptive_field}")
        pos = pos + jitter * (off != 0)
    return pos


# ============================================================================ normalisation
def normalize_with_intrinsics(pixels: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """Camera-independent 2D: ``K^-1 [u, v, 1]`` as ``(x/z, y/z)`` (the ray through each pixel
    at unit depth).

    Args:
        pixels: ``(..., N, 2)``.
        K: ``(..., 3, 3)`` intrinsics, broadcast like ``R`` in
            :func:`~tensorpose.ops.camera.world_to_camera` (``(B, 1, 3, 3)`` for windows
            ``(B, R, J, 2)``). Any invertible K (skew allowed).

    Returns:
        ``(..., N, 2)``.

    Example:
        >>> K = torch.tensor([[1000.0, 0, 500], [0, 1000, 400], [0, 0, 1]])
        >>> normalize_with_intrinsics(torch.tensor([[600.0, 200.0]]), K)
        tensor([[ 0.1000, -0.2000]])
    """
    check_tensor("pixels", pixels, 1)
    check_last_dims("pixels", pixels, (2,), "uv pixels")
    check_tensor("K", K, 2)
    check_last_dims("K", K, (3, 3), "intrinsic matrix")
    Kinv = torch.linalg.inv(K.to(pixels.dtype))
    h = pixels @ Kinv[..., :, :2].transpose(-1, -2) + Kinv[..., None, :, 2]
    return h[..., :2] / h[..., 2:]


def default_intrinsics(
    width: float | torch.Tensor,
    height: float | torch.Tensor,
    focal_factor: float = DEFAULT_FOCAL_FACTOR,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Intrinsics for an image whose camera is unknown: ``focal = focal_factor * max(width,
    height)``, principal point at the image centre (see :data:`DEFAULT_FOCAL_FACTOR`).

    Returns:
        ``(..., 3, 3)`` (leading dims of ``width``/``height``).
    """
    w = torch.as_tensor(width, dtype=dtype, device=device)
    h = torch.as_tensor(height, dtype=dtype, device=device)
    if focal_factor <= 0:
        raise ValueError(f"focal_factor must be positive, got {focal_factor}")
    w, h = torch.broadcast_tensors(w, h)
    focal = focal_factor * torch.maximum(w, h)
    f2 = torch.stack([focal, focal], -1)  # (..., 2): never read as (fx, fy) of one camera
    return intrinsic_matrix(f2, torch.stack([w / 2, h / 2], -1), dtype=dtype, device=device)
