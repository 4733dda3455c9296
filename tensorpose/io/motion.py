"""3D joint motion files: OpenSim/Motion Analysis ``.trc`` and ``.csv`` writers, a ``.trc``
reader, and the ``.npz`` writer (plain arrays only).

TRC (Track Row Column) as OpenSim's ``TRCFileAdapter`` reads it, tab separated::

    PathFileType  4  (X/Y/Z)  <file name>  [<axes comment>]
    DataRate  CameraRate  NumFrames  NumMarkers  Units  OrigDataRate  OrigDataStartFrame ...
    <values of the line above>
    Frame#  Time  <marker 1>  <tab> <tab> <marker 2> ...
    <tab> <tab> X1  Y1  Z1  X2  Y2  Z2 ...
    <empty line>
    1  0.000000  x  y  z ...

OpenSim keeps the first line as free text (only ``PathFileType`` is checked), so the axes and
units comment goes there, after the file name. Missing coordinates are written as ``nan``, as
OpenSim's own ``TRCFileAdapter.write`` writes them: OpenSim 4.6's reader takes ``nan`` (any
case) anywhere, but an empty field only inside a row; it drops a row's last field when it is
empty and rejects the row ("Unexpected number of columns"). Pose2Sim writes NaN as empty fields
(pandas' ``to_csv``) and reads ``nan`` back as NaN (pandas' ``read_csv``), as does
:func:`read_trc`. The CSV keeps empty fields for missing values.
"""

from __future__ import annotations

import math
import os
import re
import time
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..errors import InputError
from .files import read_text

__all__ = ["TRC", "TRCError", "read_trc", "write_csv", "write_npz", "write_trc"]

_KEYS = ["DataRate", "CameraRate", "NumFrames", "NumMarkers", "Units", "OrigDataRate",
         "OrigDataStartFrame", "OrigNumFrames"]  # fmt: skip


ROWS_PER_BLOCK = 1000
"""Frames formatted and written at a time."""


class TRCError(InputError):
    """A ``.trc`` file could not be read; the message names the file and the line."""


def _points(points, names: Sequence[str]) -> np.ndarray:
    if isinstance(points, torch.Tensor):
        points = points.detach().to("cpu", torch.float64).numpy()
    points = np.asarray(points, dtype=np.float64)
    if points.ndim != 3 or points.shape[-1] != 3:
        raise ValueError(f"points must have shape (T, J, 3), got {points.shape}")
    if len(names) != points.shape[1]:
        raise ValueError(f"names must hold J={points.shape[1]} marker names, got {len(names)}")
    if np.isinf(points).any():
        raise ValueError("points has infinite values (use NaN for missing markers)")
    bad = [n for n in names if not n or re.search(r"\s", n)]
    if bad:
        raise ValueError(f"marker names must be non-empty without whitespace, got {bad}")
    if len(set(names)) != len(names):
        raise ValueError(f"marker names must be unique, got {list(names)}")
    return points


def _check_fps(fps: float) -> None:
    if not (isinstance(fps, int | float) and math.isfinite(fps) and fps > 0):
        raise ValueError(f"fps must be a positive number, got {fps!r}")


def write_trc(
    path: str | os.PathLike,
    points,
    names: Sequence[str],
    fps: float,
    units: str = "m",
    axes: str | None = None,
    decimals: int = 6,
) -> Path:
    """Write marker trajectories as an OpenSim-compatible ``.trc`` file.

    Args:
        path: output file.
        points: ``(T, J, 3)`` tensor or array, NaN for missing markers (written ``nan``).
        names: ``J`` marker names (no whitespace).
        fps: frame rate (``DataRate``, ``CameraRate`` and ``OrigDataRate``).
        units: ``Units`` field (``"m"`` or ``"mm"``).
        axes: free text stating the axes, appended to the first line (e.g. ``"X, Y, Z: world
            frame of Calib.qca.txt, Z up, metres"``); no tabs or newlines.
        decimals: decimals of the coordinates.

    Returns:
        ``path``.
    """
    pts = _points(points, names)
    _check_fps(fps)
    if not units or re.search(r"\s", units):
        raise ValueError(f"units must be a word such as 'm' or 'mm', got {units!r}")
    if axes is not None and re.search(r"[\t\r\n]", axes):
        raise ValueError(f"axes must be one line without tabs, got {axes!r}")
    path = Path(path)
    T, J, _ = pts.shape
    first = ["PathFileType", "4", "(X/Y/Z)", path.name] + ([axes] if axes else [])
    values = [f"{fps:g}", f"{fps:g}", str(T), str(J), units, f"{fps:g}", "1", str(T)]
    lines = [
        "\t".join(first),
        "\t".join(_KEYS),
        "\t".join(values),
        "\t".join(["Frame#", "Time"] + [f"{n}\t\t" for n in names]).rstrip("\t"),
        "\t\t" + "\t".join(f"X{i}\tY{i}\tZ{i}" for i in range(1, J + 1)),
        "",
    ]
    # one text row per frame, written as they are made (an hour of frames is 100s of MB)
    _write_lines(path, lines, _rows(pts, fps, decimals, "\t", 1, "nan"))
    return path


def _rows(pts: np.ndarray, fps: float, decimals: int, sep: str, first: int, missing: str):
    """Text rows ``frame, time, x1, y1, z1, ...`` of ``pts (T, J, 3)`` (frames numbered from
    ``first``; NaN as the field ``missing``), a block of frames at a time: one ``%`` format per
    row."""
    T, width = pts.shape[0], pts.shape[1] * 3
    fmt = sep.join(["%d"] + [f"%.{decimals}f"] * (1 + width))
    for start in range(0, T, ROWS_PER_BLOCK):  # a block of frames at a time
        block = pts[start : start + ROWS_PER_BLOCK]
        block = block.reshape(len(block), width).tolist()
        text = "\n".join(fmt % (t + first, t / fps, *xyz) for t, xyz in enumerate(block, start))
        # "%f" writes NaN (-NaN too) as "nan" and no number as "nan"
        yield text if missing == "nan" else text.replace("nan", missing)


def _write_lines(path: Path, head: list[str], rows) -> None:
    """``head`` then the blocks of ``rows``, each line ending in a newline, streamed to
    ``path``."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in head))
        for block in rows:  # a block of frames at a time
            if block:
                f.write(block + "\n")


def write_csv(
    path: str | os.PathLike,
    points,
    names: Sequence[str],
    fps: float,
    units: str = "m",
    decimals: int = 6,
) -> Path:
    """Write marker trajectories as CSV: ``frame, time_s, <name>_x_<units>, ...`` (one row
    per frame, empty fields for missing markers). Returns ``path``."""
    pts = _points(points, names)
    _check_fps(fps)
    if not re.fullmatch(r"[A-Za-z]+", units):
        raise ValueError(f"units must be a word such as 'm' or 'mm', got {units!r}")
    path = Path(path)
    header = ["frame", "time_s"] + [f"{n}_{a}_{units}" for n in names for a in "xyz"]
    _write_lines(path, [",".join(header)], _rows(pts, fps, decimals, ",", 0, ""))
    return path


@dataclass
class TRC:
    """A ``.trc`` file: ``points (T, J, 3)`` float64 (NaN where a field is ``nan`` or empty), marker
    ``names``, ``frames`` and ``time`` ``(T,)``, ``fps`` (``DataRate``), ``camera_rate``,
    ``units``, the ``header`` metadata (key -> text) and the first line's ``comment`` (text
    after the file name)."""

    points: np.ndarray
    names: list[str]
    frames: np.ndarray
    time: np.ndarray
    fps: float
    camera_rate: float
    units: str
    header: dict
    comment: str


def read_trc(path: str | os.PathLike) -> TRC:
    """Read a ``.trc`` file (the layout :func:`write_trc` and OpenSim write).

    Raises:
        FileNotFoundError: no such file.
        TRCError: a malformed header or data line (the message names the file and line).
    """
    path = Path(path)
    lines = read_text(path, 1 << 30, "TRC file").splitlines()

    def fail(line: int, why: str) -> TRCError:
        return TRCError(f"{path}:{line}: {why}")

    if len(lines) < 5:
        raise fail(len(lines), "too short for a TRC header (5 lines)")
    first = lines[0].split("\t")
    if first[0] != "PathFileType":
        raise fail(1, f"expected 'PathFileType', got {first[0]!r}")
    comment = "\t".join(first[4:])
    keys = [k for k in lines[1].split("\t") if k]
    if keys != _KEYS:
        raise fail(2, f"expected the keys {_KEYS}, got {keys}")
    values = [v for v in lines[2].split("\t") if v]
    if len(values) != len(keys):
        raise fail(3, f"{len(keys)} keys but {len(values)} values")
    header = dict(zip(keys, values, strict=True))
    try:
        fps, camera_rate = float(header["DataRate"]), float(header["CameraRate"])
        n_frames, n_markers = int(header["NumFrames"]), int(header["NumMarkers"])
    except ValueError as e:
        raise fail(3, f"bad number: {e}") from None
    labels = [v for v in lines[3].split("\t") if v]
    if labels[:2] != ["Frame#", "Time"] or len(labels) != n_markers + 2:
        raise fail(4, f"expected Frame#, Time and {n_markers} marker names, got {labels}")
    names = labels[2:]
    xyz = [v for v in lines[4].split("\t") if v]
    want = [f"{a}{i}" for i in range(1, n_markers + 1) for a in "XYZ"]
    if xyz != want:
        raise fail(5, f"expected X1 Y1 Z1 ... Z{n_markers}")
    rows, frames, time = [], [], []
    for i, line in enumerate(lines[5:], start=6):  # data rows
        if not line.strip():
            if rows:  # an empty line after the data ends it (as in OpenSim)
                break
            continue
        fields = line.split("\t")
        if len(fields) == 3 + 3 * n_markers and not fields[-1].strip():
            fields.pop()  # a tab ending the row, as OpenSim's TRCFileAdapter writes them
        if len(fields) != 2 + 3 * n_markers:
            raise fail(i, f"{len(fields)} fields, expected {2 + 3 * n_markers}")
        try:
            frames.append(int(fields[0]))
            time.append(float(fields[1]))
            rows.append([float(v) if v.strip() else math.nan for v in fields[2:]])
        except ValueError as e:
            raise fail(i, f"bad number: {e}") from None
    if len(rows) != n_frames:
        raise fail(3, f"NumFrames is {n_frames} but the file has {len(rows)} data rows")
    points = np.array(rows, dtype=np.float64).reshape(len(rows), n_markers, 3)
    return TRC(points, names, np.array(frames), np.array(time), fps, camera_rate,
               header["Units"], header, comment)  # fmt: skip


def write_npz(path: str | os.PathLike, arrays: dict, compressed: bool = False) -> Path:
    """Write ``arrays`` (name -> array-like) to an ``.npz`` (what ``np.savez`` writes; with
    ``compressed``, each array deflated where that pays: :func:`_deflates`).

    Raises:
        ValueError: an object array (it would need pickle to read back).
    """
    plain = {k: np.asarray(v) for k, v in arrays.items()}
    bad = [k for k, v in plain.items() if v.dtype == object]
    if bad:
        raise ValueError(f"npz arrays must be plain numbers or strings, {bad} are objects")
    if not compressed:
        np.savez(path, **plain)
        return Path(path)
    when = time.localtime(time.time())[:6]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for key, a in plain.items():  # a handful of arrays
            entry = f"{key}.npy"
            if not _deflates(a):
                entry = zipfile.ZipInfo(entry, when)
                entry.compress_type = zipfile.ZIP_STORED
            with zf.open(entry, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, a, allow_pickle=False)
    return Path(path)


def _deflates(a: np.ndarray, sample: int = 1 << 12) -> bool:
    """Whether deflating ``a`` saves a tenth of its bytes, judged on its first ``sample``
    bytes (coordinates in float64 save a few percent at several ms per MB: they are stored)."""
    head = a.reshape(-1)[: max(sample // max(a.itemsize, 1), 1)].tobytes()
    return len(zlib.compress(head, 1)) < 0.9 * len(head)
