"""A 2D detector's errors on synthetic keypoints: systematic keypoint offsets from the mocap
joint centres, the joints a detector does not give (derived from others), per-frame noise with
outliers, dropped joints, and temporal jitter / playback speed of windows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from ..skeleton import Skeleton
from ._checks import check_last_dims, check_tensor
from ._poseaug_base import _cached, _check_generator, _check_joints, _const, _names_index, _uniform
from ._vec3 import _select, _stack, _vec
from .poseaug_frames import H36M17_FRAMES, _frame_axes

__all__ = [
    "H36M17_DETECTOR_OFFSETS",
    "H36M17_DETECTOR_RULES",
    "H36M17_NOISE_SCALE",
    "DetectorOffset",
    "derive_joints",
    "detector_offsets",
    "drop_joints",
    "keypoint_noise",
    "sample_detector_offsets",
    "window_positions",
]


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
