"""BVH motion capture: parse the hierarchy and frames, compute global positions with
:func:`tensorpose.ops.kinematics.forward_kinematics` for all frames at once, and map to a target
skeleton (e.g. ``h36m17``) in metres.

Conventions: rotation channels are intrinsic Euler angles in degrees in the listed order
(``Zrotation Xrotation Yrotation`` -> ``R = Rz @ Rx @ Ry``), each joint may list its own order;
position channels add to the joint's OFFSET. End sites become extra leaf joints named
``<parent>_End`` (``positions(end_sites=True)``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..errors import InputError
from ..ops.kinematics import forward_kinematics
from ..ops.rotations import euler_to_matrix
from ..skeleton import Skeleton
from .bvh_mappings import (
    CMU_UNIT_M,
    MAPPINGS,
    UNITS,
    Mapping,
    detect_mapping,
    get_mapping,
    resolve_units,
)
from .files import check_regular_file

__all__ = [
    "CMU_UNIT_M",
    "MAPPINGS",
    "UNITS",
    "BVHError",
    "Mapping",
    "Motion",
    "bundled_bvh",
    "detect_mapping",
    "get_mapping",
    "load_bvh",
    "resolve_units",
]

MAX_BVH_BYTES = 1 << 30
"""Largest BVH file read (1 GiB)."""


class BVHError(InputError):
    """A BVH file could not be parsed; the message names the file and the line."""


@dataclass
class Motion:
    """A parsed BVH file.

    Attributes:
        path: the file it came from.
        joint_names: ``J`` joint names in file order (end sites excluded).
        parents: ``J`` parent indices (-1 for the root).
        offsets: ``(J, 3)`` rest offsets in file units.
        channels: per joint, the channel names in file order.
        end_sites: ``(parent index, offset (3,))`` per end site, in file order.
        frame_time: seconds per frame.
        motion: ``(T, C)`` float64 channel values as in the file (degrees for rotations).
    """

    path: str
    joint_names: list[str]
    parents: list[int]
    offsets: np.ndarray
    channels: list[list[str]]
    end_sites: list[tuple[int, np.ndarray]]
    frame_time: float
    motion: np.ndarray
    _skeletons: dict = field(default_factory=dict, repr=False)

    @property
    def fps(self) -> float:
        return 1.0 / self.frame_time

    @property
    def num_frames(self) -> int:
        return self.motion.shape[0]

    @property
    def end_site_names(self) -> list[str]:
        return [f"{self.joint_names[p]}_End" for p, _ in self.end_sites]

    def skeleton(self, end_sites: bool = False) -> Skeleton:
        """The file's joint tree (with end sites appended as leaves if asked)."""
        if end_sites not in self._skeletons:
            names, parents = list(self.joint_names), list(self.parents)
            if end_sites:
                names += self.end_site_names
                parents += [p for p, _ in self.end_sites]
            self._skeletons[end_sites] = Skeleton(names, parents, name=Path(self.path).stem)
        return self._skeletons[end_sites]

    def local_rotations(self, dtype=torch.float64, device=None) -> torch.Tensor:
        """``(T, J, 3, 3)`` local rotation matrices of every joint (identity without channels)."""
        data = torch.as_tensor(self.motion, dtype=dtype, device=device)
        T, J = self.num_frames, len(self.joint_names)
        R = torch.eye(3, dtype=dtype, device=device).expand(T, J, 3, 3).clone()
        col = 0
        groups: dict[str, tuple[list[int], list[list[int]]]] = {}
        for j, chans in enumerate(self.channels):
            rot = [(c[0].upper(), col + i) for i, c in enumerate(chans) if c.endswith("rotation")]
            col += len(chans)
            if rot:
                order = "".join(a for a, _ in rot)
                joints, cols = groups.setdefault(order, ([], []))
                joints.append(j)
                cols.append([i for _, i in rot])
        # One batched conversion per distinct channel order (a handful), not per joint.
        for order, (joints, cols) in groups.items():
            idx = torch.tensor(cols, device=device)  # (n, 3)
            angles = torch.deg2rad(data[:, idx])  # (T, n, 3)
            R[:, joints] = euler_to_matrix(angles, order)
        return R

    def _translations(self, dtype, device) -> torch.Tensor:
        """``(T, J, 3)`` position-channel values (zero where a joint has none)."""
        data = torch.as_tensor(self.motion, dtype=dtype, device=device)
        T, J = self.num_frames, len(self.joint_names)
        out = torch.zeros(T, J, 3, dtype=dtype, device=device)
        col = 0
        joints, axes, cols = [], [], []
        for j, chans in enumerate(self.channels):
            for i, c in enumerate(chans):
                if c.endswith("position"):
                    joints.append(j)
                    axes.append("XYZ".index(c[0].upper()))
                    cols.append(col + i)
            col += len(chans)
        if cols:
            out[:, joints, axes] = data[:, cols]
        return out

    def positions(self, end_sites: bool = False, dtype=torch.float64, device=None) -> torch.Tensor:
        """Global positions ``(T, J, 3)`` in file units for all frames at once
        (``J`` includes end sites if asked)."""
        R = self.local_rotations(dtype, device)
        offsets = torch.as_tensor(self.offsets, dtype=dtype, device=device)
        offsets = offsets + self._translations(dtype, device)  # (T, J, 3)
        if end_sites and self.end_sites:
            n = len(self.end_sites)
            eye = torch.eye(3, dtype=dtype, device=device).expand(R.shape[0], n, 3, 3)
            R = torch.cat([R, eye], 1)
            ends = torch.as_tensor(np.stack([o for _, o in self.end_sites]), dtype=dtype)
            offsets = torch.cat([offsets, ends.to(device).expand(R.shape[0], n, 3)], 1)
        return forward_kinematics(R, offsets, None, self.skeleton(end_sites))

    def mapping(self, mapping: str | Mapping | None = None) -> Mapping:
        """``mapping`` as a :class:`Mapping`: a shipped one by name, or detected from the joint
        names when ``None``."""
        if mapping is None:
            mapping = detect_mapping(self.joint_names + self.end_site_names, self.path)
        return get_mapping(mapping) if isinstance(mapping, str) else mapping

    def to_skeleton(
        self,
        mapping: str | Mapping | None = None,
        dtype=torch.float64,
        device=None,
        units: str = "",
    ) -> tuple[torch.Tensor, Skeleton]:
        """Positions mapped to a target skeleton, in metres.

        Args:
            mapping: a :class:`Mapping`, the name of a shipped one (see ``MAPPINGS``), or
                ``None`` to detect it from the joint names.
            units: the file's length unit (a key of ``UNITS``); empty: from the skeleton's
                standing height (:func:`~tensorpose.io.bvh_mappings.resolve_units`).

        Returns:
            ``(positions (T, J_target, 3) metres, target skeleton)``.
        """
        m = self.mapping(mapping)
        return m.apply(self, dtype=dtype, device=device, units=units), m.target()


# ---------------------------------------------------------------------- parsing
MAX_FRAME_TIME = 60.0
"""Largest accepted ``Frame Time`` in seconds (one frame a minute); the smallest is 1e-6."""


class _Lines:
    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()
        self.i = 0

    def error(self, msg: str, line: int | None = None) -> BVHError:
        n = self.i if line is None else line
        return BVHError(f"{self.path}:{n}: {msg}")

    def next(self, what: str) -> list[str]:
        """The next non-empty line's tokens (``self.i`` is then its 1-based number)."""
        while self.i < len(self.lines):
            self.i += 1
            toks = self.lines[self.i - 1].split()
            if toks:
                return toks
        raise self.error(f"unexpected end of file, expected {what}")


MAX_VALUE = 1e7
"""The largest magnitude of a BVH number (an offset, a position or an angle): beyond it a
position would overflow the forward kinematics (a root at 1e308 gives an infinite pose)."""


def _floats(lines: _Lines, toks: list[str], n: int, what: str, bounded: bool = True) -> np.ndarray:
    if len(toks) != n:
        raise lines.error(f"{what} needs {n} numbers, got {len(toks)}: {_shown(toks)}")
    try:
        vals = np.array([float(t) for t in toks])
    except ValueError:
        raise lines.error(f"{what} has a value that is not a number: {_shown(toks)}") from None
    if not np.isfinite(vals).all():
        raise lines.error(f"{what} has a non-finite value: {_shown(toks)}")
    if bounded and (np.abs(vals) > MAX_VALUE).any():
        raise lines.error(f"{what} has a value beyond +-1e7 (no length or angle of a "
                          f"motion is that large): {_shown(toks)}")  # fmt: skip
    return vals


def _shown(toks: list[str], limit: int = 80) -> str:
    """The tokens as a quoted string, shortened for messages."""
    s = " ".join(toks)
    return repr(s if len(s) <= limit else s[:limit] + "...")


_CHANNELS = {f"{a}{k}" for a in "XYZ" for k in ("position", "rotation")}


class _Hierarchy:
    """The joint tree as it is read: names, parents, offsets, channels, end sites."""

    def __init__(self, lines: _Lines) -> None:
        self.lines = lines
        self.names: list[str] = []
        self.parents: list[int] = []
        self.offsets: list[np.ndarray] = []
        self.channels: list[list[str]] = []
        self.end_sites: list[tuple[int, np.ndarray]] = []
        self.taken: set[str] = set()  # joint names and end-site names (<parent>_End)

    def claim(self, name: str) -> None:
        if name in self.taken:
            raise self.lines.error(
                f"joint name {name!r} is used twice (or clashes with an end site, named "
                "<parent>_End)"
            )
        self.taken.add(name)

    def joint(self, name: str, parent: int) -> int:
        """Read a joint's ``{``, OFFSET and CHANNELS (the line after its JOINT/ROOT line)."""
        lines = self.lines
        self.claim(name)
        j = len(self.names)
        self.names.append(name)
        self.parents.append(parent)
        toks = lines.next("'{'")
        if toks != ["{"]:
            raise lines.error(f"expected '{{' after joint {name!r}, got {_shown(toks)}")
        toks = lines.next("OFFSET")
        if toks[0] != "OFFSET":
            raise lines.error(f"expected OFFSET for joint {name!r}, got {toks[0][:40]!r}")
        self.offsets.append(_floats(lines, toks[1:], 3, f"OFFSET of {name!r}"))
        toks = lines.next("CHANNELS")
        if toks[0] != "CHANNELS" or len(toks) < 2:
            raise lines.error(f"expected CHANNELS for joint {name!r}, got {_shown(toks)}")
        if not (toks[1].isascii() and toks[1].isdigit()):
            raise lines.error(f"CHANNELS count of {name!r} is not an integer: {toks[1][:40]!r}")
        n, chans = int(toks[1]), toks[2:]
        if len(chans) != n:
            raise lines.error(f"joint {name!r} declares {n} channels but lists {len(chans)}")
        bad = [c for c in chans if c not in _CHANNELS]
        if bad:
            raise lines.error(f"joint {name!r} has unknown channels {_shown(bad)}")
        twice = sorted({c for c in chans if chans.count(c) > 1})
        if twice:
            raise lines.error(f"joint {name!r} lists channel(s) {twice} more than once")
        rot = [c for c in chans if c.endswith("rotation")]
        if rot and len(rot) != 3:
            raise lines.error(f"joint {name!r} has {len(rot)} rotation channels, expected 0 or 3")
        self.channels.append(chans)
        return j

    def end_site(self, parent: int) -> None:
        lines = self.lines
        self.claim(f"{self.names[parent]}_End")
        if lines.next("'{'") != ["{"]:
            raise lines.error("expected '{' after End Site")
        toks = lines.next("OFFSET")
        if toks[0] != "OFFSET":
            raise lines.error(f"expected OFFSET in End Site, got {toks[0][:40]!r}")
        self.end_sites.append((parent, _floats(lines, toks[1:], 3, "End Site OFFSET")))
        if lines.next("'}'") != ["}"]:
            raise lines.error("expected '}' closing End Site")

    def read(self, root: str) -> None:
        """Read the tree below ``ROOT root`` up to its closing ``}``, without recursion: the
        stack holds the open joints, so any depth parses (one loop step per line)."""
        lines = self.lines
        stack = [self.joint(root, -1)]
        while stack:
            toks = lines.next("JOINT, End Site or '}'")
            if toks[0] == "}":
                stack.pop()
            elif toks[0] == "JOINT":
                if len(toks) < 2:
                    raise lines.error("JOINT without a name")
                stack.append(self.joint(" ".join(toks[1:]), stack[-1]))
            elif toks[0] == "End" and toks[1:] == ["Site"]:
                self.end_site(stack[-1])
            else:
                raise lines.error(f"expected JOINT, End Site or '}}', got {_shown(toks)}")


def _frame_time(lines: _Lines) -> float:
    toks = lines.next("Frame Time:")
    if toks[:2] != ["Frame", "Time:"] or len(toks) != 3:
        raise lines.error(f"expected 'Frame Time: <seconds>', got {_shown(toks)}")
    frame_time = float(_floats(lines, toks[2:], 1, "Frame Time", bounded=False)[0])
    if not 1e-6 <= frame_time <= MAX_FRAME_TIME:
        raise lines.error(
            f"Frame Time must be positive, between 1e-6 and {MAX_FRAME_TIME:g} seconds, "
            f"got {frame_time:g}"
        )
    return frame_time


def _motion(lines: _Lines, n_ch: int) -> tuple[float, np.ndarray]:
    """The ``Frames:`` and ``Frame Time:`` lines and the frame rows: ``(frame time, (T, n_ch))``."""
    toks = lines.next("Frames:")
    if toks[0] != "Frames:" or len(toks) != 2 or not (toks[1].isascii() and toks[1].isdigit()):
        raise lines.error(f"expected 'Frames: <count>', got {_shown(toks)}")
    frames = int(toks[1])
    frame_time = _frame_time(lines)
    first = lines.i
    rows = lines.lines[first:]
    # Trailing blank lines are fine; anything else must be a full frame.
    while rows and not rows[-1].strip():
        rows.pop()
    if len(rows) != frames:
        raise lines.error(
            f"header says {frames} frames but {len(rows)} frame lines follow", first + 1
        )
    data = np.empty((frames, n_ch))
    for t, row in enumerate(rows):  # one line per frame
        lines.i = first + t + 1
        data[t] = _floats(lines, row.split(), n_ch, f"frame {t}")
    return frame_time, data


def parse_bvh(text: str, path: str = "<string>") -> Motion:
    """Parse BVH text; errors (:class:`BVHError`) name ``path`` and the line.

    Besides syntax, rejected: a channel listed twice by one joint, a joint name used twice
    (or equal to an end site's ``<parent>_End``), a ``Frame Time`` outside 1e-6 to 60 seconds,
    non-finite numbers and numbers beyond :data:`MAX_VALUE` (each naming the line and the
    frame). Hierarchies of any depth parse (no recursion).
    """
    lines = _Lines(path, text)
    if lines.next("HIERARCHY") != ["HIERARCHY"]:
        raise lines.error("file must start with HIERARCHY")
    toks = lines.next("ROOT")
    if toks[0] != "ROOT" or len(toks) < 2:
        raise lines.error(f"expected 'ROOT <name>', got {_shown(toks)}")
    h = _Hierarchy(lines)
    h.read(" ".join(toks[1:]))
    if lines.next("MOTION") != ["MOTION"]:
        raise lines.error("expected MOTION after the hierarchy (only one ROOT is supported)")
    frame_time, data = _motion(lines, sum(len(c) for c in h.channels))
    return Motion(
        path=path,
        joint_names=h.names,
        parents=h.parents,
        offsets=np.stack(h.offsets),
        channels=h.channels,
        end_sites=h.end_sites,
        frame_time=frame_time,
        motion=data,
    )


def load_bvh(path: str | os.PathLike) -> Motion:
    """Read a BVH file.

    Raises:
        FileNotFoundError: no such file.
        BVHError: (a ``ValueError``) the path is a folder, the file is not UTF-8 text, or it
            does not parse (the message names the file and the line).
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise BVHError(f"{path}: is a folder, expected a BVH file")
    check_regular_file(path, MAX_BVH_BYTES, "BVH file")
    try:
        with open(path, encoding="utf-8", errors="strict") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        line = _line_of(path, e.start)
        raise BVHError(f"{path}:{line}: not UTF-8 text (byte {e.start})") from None
    except OSError as e:  # no permission, an I/O error of the disk
        raise BVHError(f"{path}: cannot read the BVH file: {e.strerror or e}") from None
    return parse_bvh(text, path)


def _line_of(path: str, offset: int) -> int:
    """The 1-based line number of byte ``offset`` in the file ``path``."""
    with open(path, "rb") as f:
        return f.read(offset).count(b"\n") + 1


def bundled_bvh() -> list[Path]:
    """The real CMU recordings shipped with the package (subject 131: two walks, one hop)."""
    root = Path(__file__).resolve().parent.parent / "assets" / "mocap"
    return sorted(root.glob("*.bvh"))
