"""DeepMimic motion files with their character file -> joint positions in metres, Y up.

A character file (e.g. ``characters/humanoid3d.txt``) is JSON: ``{"Skeleton": {"Joints":
[{"ID", "Name", "Type", "Parent", "AttachX/Y/Z", "AttachThetaX/Y/Z", ...}, ...]}}``; each
joint's ``Attach`` is its offset in metres from its parent, in the parent's frame. A motion
file is JSON ``{"Loop": ..., "Frames": [[dt, root x y z, root quaternion w x y z, then per
joint in the character's order: w x y z for a spherical joint, one angle (radians, about the
joint's Z axis) for a revolute one, nothing for a fixed one], ...]}``; ``dt`` is the frame's
duration in seconds (the last frame's is 0: it only ends the clip).

Forward kinematics is :func:`tensorpose.ops.kinematics.forward_kinematics` over all frames at
once: ``G[j] = G[parent] @ R[j]``, ``p[j] = p[parent] + G[parent] @ attach[j]``, the root at
its position with its rotation. :func:`deepmimic_to_h36m17` maps the humanoid to ``h36m17``
(placed like the CMU BVH skeletons' points: the thorax 3 cm above the neck joint, which sits
below the shoulders, in the chest's frame; no head joint: points 12 and 21 cm above the neck
joint, in its frame, stand for CMU's Head joint and Head_End).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..errors import InputError
from ..ops.kinematics import forward_kinematics
from ..skeleton import Skeleton, get_skeleton
from .files import check_regular_file

__all__ = [
    "DeepMimicCharacter",
    "DeepMimicMotion",
    "deepmimic_to_h36m17",
    "find_character",
    "load_character",
    "load_deepmimic",
    "quaternion_to_matrix",
]

MAX_DEEPMIMIC_SECONDS = 3600.0
"""Longest DeepMimic motion read (an hour: resampled at 240 fps, 864,000 frames), checked before
anything is resampled."""
MAX_DEEPMIMIC_BYTES = 16 << 20
"""Largest DeepMimic motion or character file read (16 MiB, some 30 times the largest CMU motion:
parsing JSON numbers into Python objects takes some 30 bytes of memory per byte of file)."""

DOFS = {"none": 0, "spherical": 4, "revolute": 1, "fixed": 0}
"""Numbers per frame of each joint type (the root, type ``none``, has its own 7)."""


@dataclass(frozen=True)
class DeepMimicCharacter:
    """A DeepMimic character: ``names``, ``parents`` (-1: root), ``types`` (``none``,
    ``spherical``, ``revolute``, ``fixed``) and ``offsets (J, 3)`` metres in the parent's
    frame."""

    path: str
    names: tuple[str, ...]
    parents: tuple[int, ...]
    types: tuple[str, ...]
    offsets: np.ndarray

    @property
    def skeleton(self) -> Skeleton:
        return Skeleton(list(self.names), list(self.parents), name=Path(self.path).stem)

    @property
    def frame_size(self) -> int:
        """Numbers per motion frame: dt, root position (3) and quaternion (4), the joints'."""
        return 1 + 7 + sum(DOFS[t] for t in self.types[1:])


@dataclass
class DeepMimicMotion:
    """A motion: ``times (T,)`` seconds from the first frame, ``root (T, 3)`` metres,
    ``root_rotation (T, 4)`` w x y z, ``joints (T, C)`` the per-joint numbers as in the file."""

    path: str
    character: DeepMimicCharacter
    times: np.ndarray
    root: np.ndarray
    root_rotation: np.ndarray
    joints: np.ndarray

    @property
    def num_frames(self) -> int:
        return len(self.times)

    @property
    def fps(self) -> float:
        """The mean frame rate (frames - 1 over the duration)."""
        span = float(self.times[-1] - self.times[0])
        return (self.num_frames - 1) / span if span > 0 else float("nan")

    def local_rotations(self, dtype=torch.float64) -> torch.Tensor:
        """``(T, J, 3, 3)`` rotation of every joint relative to its parent's frame."""
        ch = self.character
        T, J = self.num_frames, len(ch.names)
        R = torch.eye(3, dtype=dtype).expand(T, J, 3, 3).clone()
        R[:, 0] = quaternion_to_matrix(torch.as_tensor(self.root_rotation, dtype=dtype))
        data = torch.as_tensor(self.joints, dtype=dtype)
        col, sph, sph_cols, rev, rev_cols = 0, [], [], [], []
        for j, t in enumerate(ch.types[1:], start=1):  # column bookkeeping over ~15 joints
            if t == "spherical":
                sph.append(j)
                sph_cols.append(list(range(col, col + 4)))
            elif t == "revolute":
                rev.append(j)
                rev_cols.append(col)
            col += DOFS[t]
        if sph:
            R[:, sph] = quaternion_to_matrix(data[:, torch.tensor(sph_cols)])
        if rev:
            a = data[:, rev_cols]  # (T, n) about Z
            c, s, z, o = torch.cos(a), torch.sin(a), torch.zeros_like(a), torch.ones_like(a)
            R[:, rev] = torch.stack([c, -s, z, s, c, z, z, z, o], -1).reshape(T, len(rev), 3, 3)
        return R

    def positions(self, dtype=torch.float64, extra: dict[str, tuple[str, tuple]] | None = None):
        """Global positions ``(T, J, 3)`` metres, Y up, of every joint (then of ``extra``
        points ``name: (joint, offset in its frame)``, appended in order) for all frames."""
        ch = self.character
        names, parents = list(ch.names), list(ch.parents)
        offsets = [torch.as_tensor(ch.offsets, dtype=dtype)]
        for _, (joint, off) in (extra or {}).items():
            parents.append(names.index(joint))
            offsets.append(torch.tensor([off], dtype=dtype))
        names += list(extra or {})
        R = self.local_rotations(dtype)
        n_extra = len(names) - R.shape[1]
        R = torch.cat([R, torch.eye(3, dtype=dtype).expand(R.shape[0], n_extra, 3, 3)], 1)
        off = torch.cat(offsets).expand(R.shape[0], -1, -1).clone()
        off[:, 0] = torch.as_tensor(self.root, dtype=dtype)
        return forward_kinematics(R, off, None, Skeleton(names, parents, name="deepmimic"))


def quaternion_to_matrix(q: torch.Tensor) -> torch.Tensor:
    """Unit quaternions ``(..., 4)`` in DeepMimic's order w, x, y, z -> ``(..., 3, 3)``
    (normalised first: file values carry round-off)."""
    q = q / torch.linalg.vector_norm(q, dim=-1, keepdim=True)
    w, x, y, z = q.unbind(-1)
    m = [
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ]  # fmt: skip
    return torch.stack(m, -1).reshape(*q.shape[:-1], 3, 3)


def _read_json(path: str | os.PathLike, what: str) -> dict:
    path = check_regular_file(path, MAX_DEEPMIMIC_BYTES, what)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: not a DeepMimic {what} (JSON): {e}") from None
    except RecursionError:
        raise InputError(f"{path}: not a DeepMimic {what}: its JSON is nested too deeply") from None
    except ValueError as e:  # e.g. a number of thousands of digits
        raise InputError(f"{path}: not a DeepMimic {what} (JSON): {e}") from None
    except OSError as e:  # no permission, an I/O error of the disk
        raise InputError(f"{path}: cannot read the DeepMimic {what}: {e.strerror or e}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: not a DeepMimic {what}: expected a JSON object")
    return data


def load_character(path: str | os.PathLike) -> DeepMimicCharacter:
    """Read a DeepMimic character file (its ``Skeleton.Joints``)."""
    data = _read_json(path, "character file")
    try:
        joints = data["Skeleton"]["Joints"]
        rows = [
            (str(j["Name"]), int(j["Parent"]), str(j["Type"]),
             [float(j[f"Attach{a}"]) for a in "XYZ"],
             [float(j.get(f"AttachTheta{a}", 0.0)) for a in "XYZ"])
            for j in joints
        ]  # fmt: skip
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(f"{path}: Skeleton.Joints entry lacks or mistypes {e}") from None
    for i, (name, parent, kind, _, theta) in enumerate(rows):
        if kind not in DOFS or (kind == "none") != (i == 0):
            raise InputError(
                f"{path}: joint {name!r} has type {kind!r}; read: root 'none' first, then "
                "'spherical', 'revolute', 'fixed'"
            )
        if not (-1 <= parent < i) or (parent == -1) != (i == 0):
            raise InputError(f"{path}: joint {name!r} has parent {parent}, not an earlier joint")
        if any(theta):
            raise InputError(f"{path}: joint {name!r} has a non-zero AttachTheta (not read)")
    return DeepMimicCharacter(
        str(path), tuple(r[0] for r in rows), tuple(r[1] for r in rows),
        tuple(r[2] for r in rows), np.array([r[3] for r in rows], np.float64),
    )  # fmt: skip


def find_character(motion_path: str | os.PathLike) -> Path:
    """``characters/humanoid3d.txt`` in the motion file's folder or one of its 3 parents."""
    p = Path(motion_path).resolve().parent
    for folder in [p, *p.parents][:4]:
        c = folder / "characters" / "humanoid3d.txt"
        if c.is_file():
            return c
    raise InputError(
        f"{motion_path}: no characters/humanoid3d.txt found next to it or above: give the "
        "character file (data.character)"
    )


def load_deepmimic(
    path: str | os.PathLike, character: str | os.PathLike | DeepMimicCharacter | None = None
) -> DeepMimicMotion:
    """Read a DeepMimic motion file with its character (default: :func:`find_character`)."""
    if not isinstance(character, DeepMimicCharacter):
        character = load_character(character or find_character(path))
    frames = _read_json(path, "motion file").get("Frames")
    n = character.frame_size
    try:
        arr = np.asarray(frames, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{path}: Frames must be rows of {n} numbers") from None
    if arr.ndim != 2 or arr.shape[1] != n or len(arr) < 1:
        raise InputError(
            f"{path}: Frames must be rows of {n} numbers for {Path(character.path).name}, got "
            f"shape {arr.shape}"
        )
    if not np.isfinite(arr).all():
        raise InputError(f"{path}: Frames hold a non-finite number")
    dt = arr[:, 0]
    if (dt[:-1] <= 0).any() or dt[-1] < 0:
        raise InputError(f"{path}: every frame duration but the last must be positive")
    times = np.concatenate([[0.0], np.cumsum(dt[:-1])])
    if times[-1] > MAX_DEEPMIMIC_SECONDS:
        raise InputError(
            f"{path}: the frames last {times[-1]:.4g} s, over the limit of "
            f"{MAX_DEEPMIMIC_SECONDS:g} s (a frame duration is in seconds)"
        )
    return DeepMimicMotion(str(path), character, times, arr[:, 1:4], arr[:, 4:8], arr[:, 8:])


H36M17_FROM_DEEPMIMIC = {
    "pelvis": "root", "r_hip": "right_hip", "r_knee": "right_knee", "r_ankle": "right_ankle",
    "l_hip": "left_hip", "l_knee": "left_knee", "l_ankle": "left_ankle", "spine": "chest",
    "thorax": "thorax", "neck": "head_base", "head": "head_top",
    "l_shoulder": "left_shoulder", "l_elbow": "left_elbow", "l_wrist": "left_wrist",
    "r_shoulder": "right_shoulder", "r_elbow": "right_elbow", "r_wrist": "right_wrist",
}  # fmt: skip
"""h36m17 joint -> humanoid3d joint (or one of :data:`EXTRA_POINTS`)."""

EXTRA_POINTS = {
    "thorax": ("chest", (0.0, 0.254, 0.0)),
    "head_base": ("neck", (0.0, 0.12, 0.0)),
    "head_top": ("neck", (0.0, 0.21, 0.0)),
}
"""Points (joint, offset in its frame, metres) standing for CMU's Neck (the thorax: 3 cm above
humanoid3d's neck joint, 0.224 m above the chest), Head joint and Head_End. Rest-pose heights
above the pelvis as a fraction of the shoulders': thorax 1.02, head joint 1.21, head top 1.40
(CMU subject 131: 1.03, 1.26, 1.49; the Daz skeleton 1.03, 1.25, 1.44)."""


def deepmimic_to_h36m17(motion: DeepMimicMotion) -> tuple[torch.Tensor, Skeleton]:
    """``(T, 17, 3)`` float64 metres, Y up, of ``motion`` (a humanoid3d character) as
    ``h36m17``, and that skeleton."""
    names = list(motion.character.names) + list(EXTRA_POINTS)
    missing = sorted(set(H36M17_FROM_DEEPMIMIC.values()) - set(names))
    if missing:
        raise InputError(f"{motion.character.path}: no joints {missing} (need humanoid3d's)")
    pos = motion.positions(extra=EXTRA_POINTS)
    sk = get_skeleton("h36m17")
    idx = torch.tensor([names.index(H36M17_FROM_DEEPMIMIC[n]) for n in sk.names])
    return pos[:, idx], sk
