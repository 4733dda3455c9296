"""Mocap takes of a recipe: entries -> files, each file's kind and true frame rate, and its
motion resampled to the recipe's frame rate.

A recipe (``data.train`` / ``data.val``) lists bundled BVH names (``131_01``), files, or glob
patterns (``../shared/data/mocap_extra/cmu_dance_martial_bvh/salsa/*.bvh``). ``.bvh`` files are
read by :mod:`tensorpose.io.bvh` (joint naming and length unit detected, or ``mapping`` /
``units``), ``.txt`` / ``.json`` files as DeepMimic motions (:mod:`tensorpose.io.deepmimic`).

Rules are strings matched in order against a take as the recipe lists it (POSIX form: a
bundled stem, or the path a pattern expanded to); the first match wins:

- kinds (``data.kinds``, written ``"kind=glob"``): ``"salsa=*/salsa/*"`` -> the motion kind
  windows are balanced over; files no rule matches are of kind ``other``;
- frame rates (``data.frame_rates``, written ``"glob=fps"``): ``"*/salsa/*=60"`` -> the
  file's true frame rate where its header is wrong (the CMU salsa BVH headers say 120 fps,
  the takes are 60 fps).
- ignored joints (``data.ignore_joints``, written ``"glob=joint joint ..."``):
  ``"*/cmu_deepmimic/*=neck head"`` -> joints whose 3D the training loss ignores for the
  file (its skeleton does not place them like the others').

Every take is resampled to the recipe's ``fps`` on its own time axis (frame ``i`` at ``i /
true_fps``, DeepMimic frames at their summed durations), by linear interpolation between the
two nearest frames; uniform frames at an integer ratio (120 -> 30) keep exactly every 4th.
"""

from __future__ import annotations

import fnmatch
import glob
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..errors import InputError, MissingFileError

__all__ = [
    "Take",
    "expand_entries",
    "joint_weights",
    "kind_of",
    "parse_rules",
    "read_take",
    "resample",
    "true_fps",
]


@dataclass(frozen=True)
class Take:
    """One motion file of a recipe: ``path`` (or bundled name) and its ``kind``."""

    path: str
    kind: str


def parse_rules(rules: Sequence[str], key: str, form: str = "glob=value",
                last: bool = True) -> list[tuple[str, str]]:  # fmt: skip
    """``"left=right"`` strings -> ``(left, right)`` pairs, split at the last ``=`` (``last``,
    a glob may hold one) or the first; ``key`` and ``form`` name the config key and the expected
    form in errors."""
    out = []
    for r in rules:  # a handful of rules
        left, sep, right = str(r).rpartition("=") if last else str(r).partition("=")
        if not sep or not left or not right:
            raise InputError(f"{key}: expected {form!r}, got {r!r}")
        out.append((left, right))
    return out


def _match(path: str, rules: list[tuple[str, str]]) -> str | None:
    p = Path(path).as_posix()
    for pattern, value in rules:  # a handful of rules
        if fnmatch.fnmatch(p, pattern):
            return value
    return None


def kind_of(path: str, kinds: Sequence[str]) -> str:
    """The motion kind of ``path`` by the ``data.kinds`` rules, written ``"kind=glob"``
    (``other`` if none matches)."""
    rules = parse_rules(kinds, "data.kinds", "kind=glob", last=False)
    return _match(path, [(pattern, kind) for kind, pattern in rules]) or "other"


def true_fps(path: str, frame_rates: Sequence[str], header_fps: float) -> float:
    """The frame rate of ``path``: a ``data.frame_rates`` rule's, else the file's own."""
    v = _match(path, parse_rules(frame_rates, "data.frame_rates"))
    if v is None:
        return header_fps
    try:
        fps = float(v)
    except ValueError:
        raise InputError(f"data.frame_rates: frame rate {v!r} is not a number") from None
    if not 0 < fps <= 10_000:
        raise InputError(f"data.frame_rates: frame rate must be in (0, 10000], got {fps}")
    return fps


def joint_weights(takes: Sequence[str], rules: Sequence[str], names: Sequence[str]) -> torch.Tensor:
    """``(N, J)`` loss weights of the joints ``names`` of each take: 0 for the joints the
    first ``data.ignore_joints`` rule matching the take names (``"glob=joint joint ..."``),
    1 elsewhere.

    Raises:
        ValueError: a malformed rule or an unknown joint name (``data.ignore_joints``).
    """
    parsed = parse_rules(rules, "data.ignore_joints", "glob=joint joint ...")
    index = {n: i for i, n in enumerate(names)}
    for _, joints in parsed:  # a handful of rules
        unknown = [j for j in joints.split() if j not in index]
        if unknown:
            raise InputError(f"data.ignore_joints: unknown joints {unknown}; the skeleton's: "
                             f"{' '.join(names)}")  # fmt: skip
    w = torch.ones(len(takes), len(names))
    for i, take in enumerate(takes):  # a loop over the takes
        joints = _match(take, parsed)
        if joints:
            w[i, [index[j] for j in joints.split()]] = 0.0
    return w


def expand_entries(entries: Sequence[str | Path], kinds: Sequence[str] = ()) -> list[Take]:
    """Entries -> takes in order, glob patterns expanded (sorted), duplicates dropped.

    Raises:
        FileNotFoundError: a pattern matches no file (named).
    """
    out, seen = [], set()
    for e in entries:
        s = str(e)
        if glob.has_magic(s):
            paths = sorted(glob.glob(s, recursive=True))
            if not paths:
                raise MissingFileError(f"no file matches the pattern {s!r}")
        else:
            paths = [s]
        for p in paths:
            if p not in seen:
                seen.add(p)
                out.append(Take(p, kind_of(p, kinds)))
    return out


def resample(positions: torch.Tensor, times: np.ndarray, fps: float) -> torch.Tensor:
    """``positions (T, J, 3)`` at ``times (T,)`` seconds (increasing) -> frames at ``t0 + k /
    fps`` up to the last time, linearly interpolated between the two nearest frames."""
    times = np.asarray(times, np.float64)
    n = int(np.floor((times[-1] - times[0]) * fps + 1e-3)) + 1  # headers round the frame time
    t = times[0] + np.arange(n) / fps
    hi = np.clip(np.searchsorted(times, t, side="right"), 1, len(times) - 1)
    lo = hi - 1
    span = times[hi] - times[lo]
    w = np.clip((t - times[lo]) / np.where(span > 0, span, 1.0), 0.0, 1.0)
    if len(times) == 1:
        lo = hi = np.zeros(n, dtype=np.int64)
    w_t = torch.as_tensor(w, dtype=positions.dtype)[:, None, None]
    a = positions[torch.as_tensor(lo)]
    b = positions[torch.as_tensor(hi)]
    return a + w_t * (b - a)


def read_take(
    path: Path,
    fps: float,
    mapping: str | None = None,
    units: str = "",
    frame_rates: Sequence[str] = (),
    character: str = "",
    listed: str = "",
) -> tuple[torch.Tensor, float, object]:
    """One motion file -> ``(positions (T', J, 3) float64 metres Y up at fps, its true frame
    rate, skeleton)``: BVH, or a DeepMimic motion (``.txt`` / ``.json``). ``frame_rates``
    rules match ``listed`` (the entry as the recipe lists it) or else the path."""
    name = listed or str(path)
    from ..io.bvh import load_bvh
    from ..io.deepmimic import deepmimic_to_h36m17, load_deepmimic

    if path.suffix.lower() in (".txt", ".json"):
        motion = load_deepmimic(path, character or None)
        pos, sk = deepmimic_to_h36m17(motion)
        times = motion.times
        rate = true_fps(name, frame_rates, motion.fps)
        if rate != motion.fps:  # a rule overrides the file's durations
            times = np.arange(motion.num_frames) / rate
    else:
        motion = load_bvh(path)
        pos, sk = motion.to_skeleton(mapping or None, units=units)
        rate = true_fps(name, frame_rates, motion.fps)
        times = np.arange(motion.num_frames) / rate
    step = rate / fps
    uniform = len(times) < 2 or np.allclose(np.diff(times), 1 / rate, rtol=1e-3)
    if uniform and abs(step - round(step)) < 1e-3 * step:  # an integer ratio: every k-th
        return pos[:: round(step)], rate, sk
    return resample(pos, times, fps), rate, sk
