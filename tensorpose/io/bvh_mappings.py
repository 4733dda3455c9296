"""BVH joint namings -> a target skeleton (``h36m17``), and the file's length unit.

A :class:`Mapping` names, per target joint, the source joint(s) it is (the mean of several,
e.g. the pelvis as the mean of both hips). Shipped namings (``MAPPINGS``):

- ``cmu_3dsmax``: the "3dsMax-friendly" CMU release (LeftHip, LeftKnee, Chest, ...);
- ``cmu_motionbuilder``: the "MotionBuilder-friendly" CMU release (LeftUpLeg, Neck1, ...);
- ``cmu_daz``: the "Daz-friendly" CMU release (hip, abdomen, chest, lThigh, lShin, lShldr, ...);
- ``mixamo``: Adobe Mixamo rigs (``mixamorig:Hips``, ``mixamorig:LeftUpLeg``, ...).

Joint names are matched after dropping a namespace prefix (everything up to the last ``:``):
``mixamorig:LeftArm``, ``mixamorig1:LeftArm`` and ``LeftArm`` are one name.

Units: BVH files do not say theirs. :func:`resolve_units` takes the user's ``--units`` /
``data.units`` when given, else the unit that makes the skeleton's standing height (the rest
pose's ankle-to-head path, see :func:`standing_height`) a person's, 1.4 to 2.1 m; no such unit
is an error naming ``--units``. The candidate units are at least 1.5x apart, so at most one fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..errors import InputError
from ..skeleton import Skeleton

Motion = Any
"""A :class:`tensorpose.io.bvh.Motion` (not imported: bvh.py imports this module)."""

__all__ = [
    "CMU_UNIT_M",
    "HEIGHT_RANGE_M",
    "MAPPINGS",
    "UNITS",
    "Mapping",
    "detect_mapping",
    "get_mapping",
    "resolve_units",
    "standing_height",
]

CMU_UNIT_M = 0.0254 / 0.45
"""One CMU BVH length unit in metres (inches / 0.45, the ASF convention): 0.05644 m."""

UNITS: dict[str, float] = {"m": 1.0, "cm": 0.01, "mm": 0.001, "inch": 0.0254, "cmu": CMU_UNIT_M}
"""Length units of ``--units`` / ``data.units``, in metres."""

HEIGHT_RANGE_M = (1.4, 2.1)
"""Standing heights (metres) that identify a file's unit."""

HEIGHT_PATH = ("r_ankle", "r_knee", "r_hip", "pelvis", "spine", "thorax", "neck", "head")
"""Target joints whose rest-pose path is the standing height, with :data:`FLOOR_TO_ANKLE`."""

FLOOR_TO_ANKLE = 1.1
"""Stature / the ankle-to-head path: the ankle's height and the skull above the mapped head
joint (about 10 % on the CMU, Daz, DeepMimic skeletons, whose head joint sits low)."""


def _strip(name: str) -> str:
    """A joint name without its namespace prefix (``mixamorig:Hips`` -> ``Hips``)."""
    return name.rsplit(":", 1)[-1]


@dataclass(frozen=True)
class Mapping:
    """Source joint names -> target skeleton joints; a target may be the mean of several
    sources. ``extend`` adds virtual source points past a joint where a naming has none
    (``name: (joint, k)`` is ``joint + k * (joint - its parent)``, the bone into ``joint``
    prolonged; e.g. a head top above the head joint). Lengths are scaled to metres by
    :func:`resolve_units`.
    """

    name: str
    target_skeleton: str
    joints: dict[str, tuple[str, ...]]
    extend: dict[str, tuple[str, float]] = field(default_factory=dict)

    def target(self) -> Skeleton:
        from ..skeleton import get_skeleton

        return get_skeleton(self.target_skeleton)

    def sources(self) -> set[str]:
        """The file joints (or end sites) this mapping reads, without the virtual ones."""
        used = {s for srcs in self.joints.values() for s in srcs}
        return (used - set(self.extend)) | {j for j, _ in self.extend.values()}

    def weights(self, source_names: Sequence[str], path: str = "") -> torch.Tensor:
        """``(J_target, J_source)`` averaging matrix over ``source_names`` (names as in the
        file; prefixes are dropped for matching); the error names the missing joints."""
        target = self.target()
        lookup = {_strip(n): i for i, n in enumerate(source_names)}
        W = torch.zeros(target.num_joints, len(source_names), dtype=torch.float64)
        missing = []
        for t, tname in enumerate(target.names):
            srcs = self.joints.get(tname)
            if not srcs:
                raise InputError(f"mapping {self.name!r} gives no source for joint {tname!r}")
            for s in srcs:
                if s not in lookup:
                    missing.append(s)
                else:
                    W[t, lookup[s]] = 1.0 / len(srcs)
        if missing:
            where = f" in {path}" if path else ""
            raise InputError(
                f"mapping {self.name!r} needs joints {sorted(set(missing))} not found{where}"
            )
        return W

    def source_points(self, pos: torch.Tensor, names: Sequence[str], parents: Sequence[int]):
        """``pos (..., S, 3)`` of the file's joints/end sites ``names`` (with ``parents``) ->
        the same with this mapping's virtual points appended, and their names."""
        if not self.extend:
            return pos, list(names)
        lookup = {_strip(n): i for i, n in enumerate(names)}
        extra, out_names = [], list(names)
        for vname, (joint, k) in self.extend.items():  # one or two virtual points
            if joint not in lookup:
                continue  # weights() names it as missing
            j = lookup[joint]
            p = parents[j] if parents[j] >= 0 else j
            extra.append(pos[..., j, :] + k * (pos[..., j, :] - pos[..., p, :]))
            out_names.append(vname)
        if not extra:
            return pos, out_names
        return torch.cat([pos, torch.stack(extra, -2)], -2), out_names

    def map_points(
        self, pos: torch.Tensor, names: Sequence[str], parents: Sequence[int], path: str = ""
    ) -> torch.Tensor:
        """File points ``pos (..., S, 3)`` -> target joints ``(..., J_target, 3)`` (file units)."""
        full, full_names = self.source_points(pos, names, parents)
        W = self.weights(full_names, path).to(device=pos.device, dtype=pos.dtype)
        return torch.einsum("ts,...sc->...tc", W, full)

    def apply(self, motion: Motion, dtype=torch.float64, device=None, units: str = ""):
        """``(T, J_target, 3)`` metres of every frame of ``motion`` (units: see
        :func:`resolve_units`)."""
        scale = resolve_units(motion, self, units)
        pos = motion.positions(end_sites=True, dtype=dtype, device=device)
        sk = motion.skeleton(end_sites=True)
        return self.map_points(pos, sk.names, sk.parents, motion.path) * scale


def _mapping(name: str, pairs: dict, extend: dict | None = None) -> Mapping:
    joints = {k: (v,) if isinstance(v, str) else tuple(v) for k, v in pairs.items()}
    return Mapping(name, "h36m17", joints, dict(extend or {}))


def _limbs(pattern: str, left: str, right: str) -> dict[str, str]:
    """The 12 limb joints of h36m17 from a naming pattern of hip, knee, ankle, shoulder,
    elbow, wrist with ``{}`` for the side (``"{}UpLeg {}Leg ..."``, ``"Left"``, ``"Right"``)."""
    parts = ("hip", "knee", "ankle", "shoulder", "elbow", "wrist")
    names = pattern.split()
    return {f"{s}_{p}": n.format(side) for s, side in (("l", left), ("r", right))
            for p, n in zip(parts, names, strict=True)}  # fmt: skip


MAPPINGS: dict[str, Mapping] = {
    # The "3dsMax-friendly" CMU release (the bundled files): LeftHip/LeftKnee/LeftAnkle, Chest...
    "cmu_3dsmax": _mapping(
        "cmu_3dsmax",
        {
            "pelvis": ("LeftHip", "RightHip"),
            **_limbs("{}Hip {}Knee {}Ankle {}Shoulder {}Elbow {}Wrist", "Left", "Right"),
            "spine": "Chest",
            "thorax": "Neck",
            "neck": "Head",
            "head": "Head_End",
        },
    ),
    # The "MotionBuilder-friendly" CMU release: LeftUpLeg/LeftLeg/LeftFoot, Spine, LeftArm...
    "cmu_motionbuilder": _mapping(
        "cmu_motionbuilder",
        {
            "pelvis": ("LeftUpLeg", "RightUpLeg"),
            **_limbs("{}UpLeg {}Leg {}Foot {}Arm {}ForeArm {}Hand", "Left", "Right"),
            "spine": "Spine",
            "thorax": "Neck1",
            "neck": "Head",
            "head": "Head_End",
        },
    ),
    # The "Daz-friendly" CMU release (43 joints, centimetres): hip, abdomen, chest, neck, head,
    # lThigh/lShin/lFoot, lShldr/lForeArm/lHand. Placed like the CMU skeletons' points (rest
    # pose, heights above the pelvis as a fraction of the shoulders'): the spine is the mean of
    # abdomen and chest (0.51; CMU's Chest 0.52); the neck joint sits 5 cm above the shoulder
    # joints, CMU's Neck (the thorax) at their level, so the thorax is the mean of the neck and
    # both shoulders; the head has no end site: its top is the neck bone prolonged 1.25x past
    # the head joint (~9 cm, where CMU's Head_End sits).
    "cmu_daz": _mapping(
        "cmu_daz",
        {
            "pelvis": ("lThigh", "rThigh"),
            **_limbs("{}Thigh {}Shin {}Foot {}Shldr {}ForeArm {}Hand", "l", "r"),
            "spine": ("abdomen", "chest"),
            "thorax": ("neck", "lShldr", "rShldr"),
            "neck": "head",
            "head": "head_top",
        },
        {"head_top": ("head", 1.25)},
    ),
    # Adobe Mixamo rigs (mixamorig:Hips, mixamorig:LeftUpLeg, ...; any namespace prefix).
    # Spine1 is the middle of its three spine joints; HeadTop_End is a joint at the skull top.
    "mixamo": _mapping(
        "mixamo",
        {
            "pelvis": ("LeftUpLeg", "RightUpLeg"),
            **_limbs("{}UpLeg {}Leg {}Foot {}Arm {}ForeArm {}Hand", "Left", "Right"),
            "spine": "Spine1",
            "thorax": "Neck",
            "neck": "Head",
            "head": "HeadTop_End",
        },
    ),
}


def get_mapping(name: str) -> Mapping:
    if name not in MAPPINGS:
        raise InputError(f"unknown mapping {name!r}; known: {', '.join(sorted(MAPPINGS))}")
    return MAPPINGS[name]


def detect_mapping(names: Sequence[str], path: str = "") -> str:
    """The name of the shipped mapping whose source joints all appear in ``names`` (namespace
    prefixes dropped); the first in ``MAPPINGS`` order when several fit."""
    have = {_strip(n) for n in names}
    for key, m in MAPPINGS.items():
        if m.sources() <= have:
            return key
    where = f" for {path}" if path else ""
    raise InputError(
        f"no shipped mapping fits the joint names{where}; known: {', '.join(sorted(MAPPINGS))}. "
        "Pass a tensorpose.io.bvh.Mapping of your own."
    )


def standing_height(motion: Motion, mapping: Mapping) -> float:
    """The skeleton's standing height in file units: the rest pose's (offsets only) path
    ankle -> knee -> hip -> pelvis -> spine -> thorax -> neck -> head x :data:`FLOOR_TO_ANKLE`.
    Independent of the pose, the up axis and a T- or A-pose."""
    offsets = [np.asarray(o, np.float64) for o in motion.offsets]
    offsets += [np.asarray(o, np.float64) for _, o in motion.end_sites]
    sk = motion.skeleton(end_sites=True)
    rest = np.zeros((len(offsets), 3))
    for j, p in enumerate(sk.parents):  # file order: parents first; one pose, not a hot path
        rest[j] = offsets[j] + (rest[p] if p >= 0 else 0.0)
    mapped = mapping.map_points(torch.from_numpy(rest), sk.names, sk.parents, motion.path)
    idx = [mapping.target().index(n) for n in HEIGHT_PATH]
    path = mapped[idx]
    return float(torch.linalg.vector_norm(path[1:] - path[:-1], dim=-1).sum()) * FLOOR_TO_ANKLE


PLAUSIBLE_HEIGHT_M = (1.0, 2.5)
"""Standing heights accepted with an explicit ``--units`` (wider than the range that identifies
a unit: children and tall people)."""


def resolve_units(motion: Motion, mapping: Mapping, units: str = "") -> float:
    """Metres per file unit: ``units`` (a key of :data:`UNITS`) when given, else the unit in
    which :func:`standing_height` is 1.4 to 2.1 m; an explicit unit must give 1 to 2.5 m.

    Raises:
        ValueError: ``units`` is unknown, or no unit gives a person's height (the message
            names ``--units``, the file and the heights each unit would give).
    """
    h = standing_height(motion, mapping)
    if units:
        if units not in UNITS:
            raise InputError(f"--units must be one of {', '.join(UNITS)}, got {units!r}")
        lo, hi = PLAUSIBLE_HEIGHT_M
        if not lo <= h * UNITS[units] <= hi:
            raise InputError(
                f"{motion.path}: --units {units} makes the skeleton {h * UNITS[units]:.3g} m "
                f"tall, not a person's height ({lo}-{hi} m); check --units"
            )
        return UNITS[units]
    lo, hi = HEIGHT_RANGE_M
    fits = [u for u, s in UNITS.items() if lo <= h * s <= hi]
    if len(fits) == 1:
        return UNITS[fits[0]]
    tried = ", ".join(f"{h * s:.3g} m in {u}" for u, s in UNITS.items())
    raise InputError(
        f"{motion.path}: cannot tell the length unit from the skeleton's standing height "
        f"({tried}; a person is {lo}-{hi} m): pass --units ({'|'.join(UNITS)})"
    )
