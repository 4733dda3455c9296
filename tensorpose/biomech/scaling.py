"""Pose2Sim 0.10's scaling rules on a TRC's markers, in plain numpy (no OpenSim).

Pose2Sim scales its model without a static trial, from the movement itself
(``Pose2Sim/kinematics.py`` + ``common.py``):

1. Standing frames (:func:`standing_frames`): frames with any marker; in each, the mean of the
   absolute right/left knee flexion (180 deg minus the ankle-knee-hip angle) and right/left hip
   flexion (the angle between knee->hip and mid-hip->neck) must be under 90 deg; when fewer than
   50 frames are, the 50 with the smallest mean. ``Neck`` is the mid-shoulder point when the
   TRC has none. Pose2Sim reads the mid-hip from a ``Hip`` marker and, when the TRC has none
   (BODY_25B, COCO-17, BlazePose), keeps every frame; here the mid-hip is built from ``RHip``
   and ``LHip`` then, so that the rule holds for every model. A TRC where no frame is under
   90 deg (or no frame has the eight markers) is refused: nobody stands up in it.
2. Segment scale factors (:func:`segment_scales`): for each marker pair of the scaling setup,
   the 50 % trimmed mean of its length over the standing frames, divided by the same length on
   the unscaled model; each body's X, Y, Z factor is the mean over its measurements' pairs (left
   and right together). OpenSim's ScaleTool then applies them (``manualScale``).
3. Height (:func:`estimate_height`, when ``--height`` is not given): per standing frame, mean
   foot (heel-ankle, else 0.10 m) + shank + thigh + back (hip-shoulder) + head (mid-shoulder to
   ``Head`` x 1.008, else to ``Nose`` x 1.5, else legs / 0.485), 50 % trimmed mean. OpenSim's
   ScaleTool stores the height and does not use it.
"""

from __future__ import annotations

import warnings
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ..errors import InputError

__all__ = [
    "LARGE_HIP_KNEE_ANGLES",
    "MIN_STANDING_FRAMES",
    "TRIMMED_PERCENT",
    "estimate_height",
    "hip_knee_angles",
    "marker_pairs",
    "segment_scales",
    "standing_frames",
    "trimmed_mean",
]

LARGE_HIP_KNEE_ANGLES = 90.0
"""Frames whose mean hip and knee flexion is above this (degrees) are not used for scaling."""
MIN_STANDING_FRAMES = 50
"""When fewer frames pass, the frames with the smallest mean flexion, this many."""
TRIMMED_PERCENT = 50.0
"""Share of the most extreme values left out of a mean (half at each end)."""


def trimmed_mean(values: np.ndarray, trimmed_percent: float = TRIMMED_PERCENT) -> float:
    """Pose2Sim's trimmed mean of ``values (N,)``: sort (NaN last), keep the slice between
    ``N * p / 2`` and ``N * (1 - p / 2)`` (``p`` = ``trimmed_percent`` / 100), mean it
    ignoring NaN (all of ``values`` when the slice is empty)."""
    values = np.asarray(values, dtype=np.float64)
    s = np.sort(values)
    p = trimmed_percent / 100
    kept = s[int(len(s) * (p / 2)) : int(len(s) * (1 - p / 2))]
    with warnings.catch_warnings():  # 'Mean of empty slice': the NaN is the answer
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(np.nanmean(values if len(kept) == 0 else kept))


def _dist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-frame distance ``(N,)`` between ``(N, 3)`` points, NaN where either is missing (the
    sum of squares as Pose2Sim: ``np.linalg.norm`` rounds differently in the last bit, and
    OpenSim's IK can turn a last-bit change of a scale factor into degrees)."""
    return np.sqrt(np.sum((b - a) ** 2, axis=-1))


def _angle(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Unsigned angle (degrees) between ``(N, 3)`` vectors, as Pose2Sim's ``points_to_angles``."""
    cross = np.cross(u, v)
    dot = np.einsum("ij,ij->i", u, v)
    return np.degrees(np.arctan2(np.linalg.norm(cross, axis=-1), dot))


def _marker(points: np.ndarray, names: Sequence[str], name: str) -> np.ndarray:
    return points[:, list(names).index(name)]


def _mid(points: np.ndarray, names: Sequence[str], name: str, right: str, left: str):
    if name in names:
        return _marker(points, names, name)
    return (_marker(points, names, right) + _marker(points, names, left)) / 2


def hip_knee_angles(points: np.ndarray, names: Sequence[str]) -> np.ndarray:
    """Mean absolute right/left knee and hip flexion per frame ``(T,)``, degrees (NaN where a
    marker is missing), of ``points (T, J, 3)``; knee: 180 deg minus the angle at the knee;
    hip: angle between knee->hip and mid-hip->neck (``Neck``, else the mid-shoulder; ``Hip``,
    else the mid-hip)."""
    m = lambda n: _marker(points, names, n)  # noqa: E731
    neck = _mid(points, names, "Neck", "RShoulder", "LShoulder")
    hip = _mid(points, names, "Hip", "RHip", "LHip")
    angles = []
    for s in "RL":
        knee = _angle(m(s + "Ankle") - m(s + "Knee"), m(s + "Hip") - m(s + "Knee"))
        angles.append(np.abs((knee - 180 + 180) % 360 - 180))
    for s in "RL":
        angles.append(np.abs((-_angle(m(s + "Hip") - m(s + "Knee"), neck - hip) + 180) % 360 - 180))
    return np.mean(angles, axis=0)


def standing_frames(points: np.ndarray, names: Sequence[str], source: str = "TRC",
                    max_angle: float = LARGE_HIP_KNEE_ANGLES,
                    min_frames: int = MIN_STANDING_FRAMES) -> np.ndarray:  # fmt: skip
    """Indices ``(N,)`` of the frames of ``points (T, J, 3)`` scaling uses (Pose2Sim's rule,
    module docstring): frames with any marker whose mean hip/knee flexion is under
    ``max_angle``, or the ``min_frames`` smallest when fewer pass (in increasing flexion).

    Raises:
        InputError: no frame under ``max_angle`` (naming ``source``).
    """
    seen = np.flatnonzero(~np.isnan(points).all(axis=(1, 2)))
    ang = hip_knee_angles(points[seen], names)
    with np.errstate(invalid="ignore"):
        low = ang < max_angle
    if not low.any():
        best = np.nanmin(ang) if np.isfinite(ang).any() else None
        why = ("no frame has all of the shoulders, hips, knees and ankles" if best is None
               else f"its smallest mean hip and knee flexion is {best:.0f} deg")  # fmt: skip
        raise InputError(f"{source}: the person never stands upright enough to scale the model "
                         f"(a frame with hip and knee flexion under {max_angle:g} deg is needed; "
                         f"{why})")  # fmt: skip
    if low.sum() >= min_frames:
        return seen[low]
    order = np.argsort(np.where(np.isnan(ang), np.inf, ang), kind="stable")
    order = order[~np.isnan(ang[order])][:min_frames]
    return seen[order]


def estimate_height(points: np.ndarray, names: Sequence[str],
                    trimmed_percent: float = TRIMMED_PERCENT) -> float:  # fmt: skip
    """The person's height in metres from ``points (N, J, 3)`` (the standing frames), as
    Pose2Sim's ``compute_height`` (module docstring); NaN when it cannot be measured."""
    m = lambda n: _marker(points, names, n)  # noqa: E731
    mid_shoulder = (m("RShoulder") + m("LShoulder")) / 2
    hip = _mid(points, names, "Hip", "RHip", "LHip")  # noqa: F841 (as Pose2Sim, unused)
    if "RHeel" in names and "LHeel" in names:
        foot = (_dist(m("RHeel"), m("RAnkle")) + _dist(m("LHeel"), m("LAnkle"))) / 2
    else:
        foot = np.full(len(points), 0.10)
    shank = (_dist(m("RAnkle"), m("RKnee")) + _dist(m("LAnkle"), m("LKnee"))) / 2
    thigh = (_dist(m("RKnee"), m("RHip")) + _dist(m("LKnee"), m("LHip"))) / 2
    back = (_dist(m("RHip"), m("RShoulder")) + _dist(m("LHip"), m("LShoulder"))) / 2
    if "Head" in names:
        heights = foot + shank + thigh + back + _dist(mid_shoulder, m("Head")) * 1.008
    elif "Nose" in names:
        heights = foot + shank + thigh + back + _dist(mid_shoulder, m("Nose")) * 1.5
    else:
        heights = (foot + shank + thigh) / 0.485
    return trimmed_mean(heights, trimmed_percent)


def marker_pairs(scaling_file: str | Path) -> list[dict]:
    """The measurements of a scaling setup: ``[{"name", "pairs": [(a, b), ...], "bodies":
    [(body, axes), ...]}]`` in file order."""
    root = ET.parse(scaling_file).getroot()
    out = []
    for meas in root.iter("Measurement"):
        pairs = [tuple(p.findtext("markers", "").split()) for p in meas.iter("MarkerPair")]
        bodies = [(b.get("name", ""), b.findtext("axes", "").split())
                  for b in meas.iter("BodyScale")]  # fmt: skip
        out.append({"name": meas.get("name", ""), "pairs": pairs, "bodies": bodies})
    return out


def segment_scales(scaling_file: str | Path, points: np.ndarray, names: Sequence[str],
                   model_markers: Mapping[str, np.ndarray],
                   trimmed_percent: float = TRIMMED_PERCENT) -> dict[str, list[float]]:  # fmt: skip
    """Scale factors per body ``{body: [x, y, z]}`` (module docstring, step 2).

    Args:
        scaling_file: a scaling setup (its measurements' marker pairs and bodies).
        points: ``(N, J, 3)`` the standing frames, metres. names: the ``J`` marker names with
            data.
        model_markers: the unscaled model's marker positions in the ground frame, ``(3,)`` each.

    A pair with a marker the TRC lacks has factor 1.
    """
    measurements = marker_pairs(scaling_file)
    pairs = [p for m in measurements for p in m["pairs"]]
    ratios = []
    for a, b in pairs:
        if a in names and b in names and a in model_markers and b in model_markers:
            trc = trimmed_mean(_dist(_marker(points, names, a), _marker(points, names, b)),
                               trimmed_percent)  # fmt: skip
            model = _dist(np.asarray(model_markers[a]), np.asarray(model_markers[b]))
            ratios.append(trc / float(model))
        else:
            ratios.append(1.0)
    per_axis: dict[str, list] = {}
    for m in measurements:
        for body, axes in m["bodies"]:
            for axis in axes:
                per_axis.setdefault(f"{body}_{axis}", []).extend(m["pairs"])
    scales: dict[str, list[float]] = {}
    for key, ps in per_axis.items():
        body, axis = key.rsplit("_", 1)
        value = float(np.mean([ratios[pairs.index(p)] for p in ps]))
        scales.setdefault(body, [1.0, 1.0, 1.0])["XYZ".index(axis)] = value
    return scales
