"""Multi-camera calibrations: Qualisys ``.qca.txt`` and Pose2Sim-style ``.toml`` -> tensors.

Every camera follows OpenCV's pinhole model with radial-tangential distortion: world points
``x`` (metres) go to camera coordinates ``R @ x + t`` (``x`` right, ``y`` down, ``z`` forward),
then to pixels with ``K`` and ``dist = [k1, k2, p1, p2, k3]`` (see
:func:`tensorpose.ops.camera.project_points`).

Qualisys (``.qca.txt``, XML) stores per camera: the camera *pose in the world* (``transform``:
position ``x, y, z`` in millimetres and a rotation ``r11..r33``), intrinsics in sensor units
(64 subpixels per pixel: ``focalLengthU/V``, ``centerPointU/V``), the image window on the sensor
(``fov_video``: ``left, top, right, bottom`` inclusive pixel bounds) and distortion
coefficients. The conversion follows Pose2Sim's converter (the reference for these files):

- ``size = (right - left + 1, bottom - top + 1) / binning * scale``;
- ``fx, fy = focalLengthU, focalLengthV / 64 / binning * scale``;
- ``cx = (centerPointU / 64 / binning - left) * scale`` (``cy`` from ``top``);
- ``k1, k2, k3, p1, p2 = radialDistortion1..3, tangentalDistortion1..2 / 64 / binning``;
- ``R = diag(1, -1, -1) @ [[r11, r12, r13], [r21, ...], ...]`` (Qualisys cameras look along
  ``-z`` with ``y`` up: the flip gives OpenCV axes), ``t = -R @ position / 1000``,

where ``scale = resolution / 1080`` when the camera has a ``video_resolution`` attribute
(e.g. ``"540p"``), else 1. Only video cameras are kept (``model`` ``"none"`` or containing
``"Video"``), in natural name order.

Pose2Sim's ``.toml`` has one table per camera with ``name``, ``size = [w, h]``,
``matrix`` (3 x 3), ``distortions = [k1, k2, p1, p2]`` (``k3`` optional), ``rotation``
(Rodrigues vector), ``translation`` (metres) and ``fisheye = false``, plus a ``[metadata]``
table. :func:`write_toml` writes the same layout (a round trip gives the same tensors).

Hostile files are refused with one line naming the file (and the camera and key): anything but
a regular file of at most 16 MiB (:data:`MAX_CALIBRATION_BYTES`), XML with a ``<!DOCTYPE>`` or
``<!ENTITY>`` declaration (checked before the tree is built: no entity is ever expanded), TOML
nested too deeply or with integers too large for a float, and every camera is checked by
:func:`tensorpose.io.calibration_checks.check_cameras` (focal lengths, ``K``'s form, principal
point, distortion, rotation, translation, image size, duplicated cameras: the bounds are listed
there) in ``Calibration.__post_init__``, so no ``Calibration`` holds nonsense.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from xml.parsers import expat

import torch

from ..errors import InputError, MissingFileError
from ..ops.rotations import axis_angle_to_matrix, matrix_to_axis_angle
from .calibration_checks import DIST_NAMES, check_cameras
from .files import check_regular_file, read_bytes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = [
    "MAX_CALIBRATION_BYTES",
    "Calibration",
    "CalibrationError",
    "load_calibration",
    "read_qca",
    "read_toml",
    "write_toml",
]


MAX_CALIBRATION_BYTES = 16 << 20
"""Largest calibration file read (16 MiB; real ones are a few KiB)."""


class CalibrationError(InputError):
    """A calibration file could not be read; the message names the file and the camera/key."""


# How the checked quantities are called in each file format (see check_cameras).
_QCA_KEYS = {
    "size": "<fov_video>",
    "K": "<intrinsic>",
    "focal": "<intrinsic> focalLengthU, focalLengthV",
    "skew": "<intrinsic>",
    "principal": "<intrinsic> centerPointU, centerPointV",
    "dist": tuple(f"<intrinsic> {k}" for k in (
        "radialDistortion1", "radialDistortion2", "tangentalDistortion1",
        "tangentalDistortion2", "radialDistortion3")),
    "R": "<transform> r11..r33",
    "t": "<transform> x, y, z",
}  # fmt: skip
_TOML_KEYS = {
    "size": "size",
    "K": "matrix",
    "focal": "matrix",
    "skew": "matrix",
    "principal": "matrix",
    "dist": tuple(f"distortions ({k})" for k in DIST_NAMES),
    "R": "rotation",
    "t": "translation",
}


@dataclass
class Calibration:
    """Calibration of ``C`` cameras (float64 tensors, OpenCV conventions, metres and pixels).

    Attributes:
        names: the ``C`` camera names.
        K: ``(C, 3, 3)`` intrinsics in pixels.
        dist: ``(C, 5)`` distortion ``k1, k2, p1, p2, k3``.
        R: ``(C, 3, 3)`` world -> camera rotations.
        t: ``(C, 3)`` world -> camera translations in metres (``x_cam = R @ x + t``).
        size: ``(C, 2)`` image ``[width, height]`` in pixels.
        source: the file it was read from, if any.
        metadata: the ``[metadata]`` table of a ``.toml`` file (scalars), written back by
            :func:`write_toml`.
    """

    names: list[str]
    K: torch.Tensor
    dist: torch.Tensor
    R: torch.Tensor
    t: torch.Tensor
    size: torch.Tensor
    source: Path | None = None
    metadata: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        C = len(self.names)
        expected = {"K": (C, 3, 3), "dist": (C, 5), "R": (C, 3, 3), "t": (C, 3), "size": (C, 2)}
        # Argument checks over the five fields (not a data loop).
        for key, shape in expected.items():
            value = getattr(self, key)
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"Calibration.{key} must be a torch.Tensor, got {type(value)}")
            if tuple(value.shape) != shape:
                raise ValueError(
                    f"Calibration.{key} must have shape {shape} for {C} cameras, "
                    f"got {tuple(value.shape)}"
                )
        if len(set(self.names)) != C:
            raise ValueError(f"Calibration.names must be unique, got {self.names}")
        where = str(self.source) if self.source is not None else "Calibration"
        check_cameras(self.names, self.K, self.dist, self.R, self.t, self.size, where)

    @property
    def num_cameras(self) -> int:
        return len(self.names)

    @property
    def rvec(self) -> torch.Tensor:
        """``(C, 3)`` Rodrigues vectors of :attr:`R` (OpenCV's ``rvec``)."""
        return matrix_to_axis_angle(self.R)

    @property
    def centers(self) -> torch.Tensor:
        """``(C, 3)`` camera centres in world coordinates (``-R^T t``)."""
        return -(self.R.transpose(-1, -2) @ self.t.unsqueeze(-1)).squeeze(-1)

    def select(self, names: Sequence[str]) -> Calibration:
        """The cameras ``names``, in that order."""
        missing = [n for n in names if n not in self.names]
        if missing:
            raise KeyError(f"cameras {missing} not in calibration {self.names}")
        idx = torch.tensor([self.names.index(n) for n in names], dtype=torch.long)
        picked = {k: getattr(self, k)[idx] for k in ("K", "dist", "R", "t", "size")}
        if not names or len(set(names)) != len(names):  # refused by the checks
            return replace(self, names=list(names), **picked)
        # Cameras of a checked calibration: each passes the checks as before, and no two of
        # them are duplicates, so the copy is not checked again.
        out = copy.copy(self)
        out.names = list(names)
        for k, v in picked.items():  # the five tensors
            setattr(out, k, v)
        return out

    def to(self, *args, **kwargs) -> Calibration:
        """A copy with every tensor moved/cast by ``Tensor.to(*args, **kwargs)`` (``self``
        when that changes none of them)."""
        conv = {k: getattr(self, k).to(*args, **kwargs) for k in ("K", "dist", "R", "t", "size")}
        if all(v is getattr(self, k) for k, v in conv.items()):
            return self
        return replace(self, **conv)


def _natural_key(name: str) -> tuple:
    return tuple(int(s) if s.isdigit() else s.lower() for s in re.split(r"(\d+)", name))


def _float(path: Path, camera: str, element: ET.Element, key: str) -> float:
    raw = element.get(key)
    if raw is None:
        raise CalibrationError(f"{path}: camera {camera!r}: <{element.tag}> has no {key!r}")
    try:
        value = float(raw)
    except ValueError:
        raise CalibrationError(
            f"{path}: camera {camera!r}: <{element.tag}> {key}={raw!r} is not a number"
        ) from None
    if not math.isfinite(value):
        raise CalibrationError(
            f"{path}: camera {camera!r}: <{element.tag}> {key}={raw!r} is not finite"
        )
    return value


def _child(path: Path, camera: str, element: ET.Element, tag: str) -> ET.Element:
    child = element.find(tag)
    if child is None:
        raise CalibrationError(f"{path}: camera {camera!r} has no <{tag}> element")
    return child


def read_qca(path: str | os.PathLike, binning_factor: int = 1) -> Calibration:
    """Read a Qualisys ``.qca.txt`` calibration (see the module docstring for the conversion).

    Args:
        path: the file.
        binning_factor: sensor binning used while filming (1 = none, 2 for binned 540p).

    Raises:
        FileNotFoundError: no such file.
        CalibrationError: not a regular file of at most 16 MiB, malformed XML or XML with a
            ``<!DOCTYPE>``/``<!ENTITY>`` declaration, no video camera, a missing or
            non-numeric attribute, a camera out of the bounds of
            :mod:`tensorpose.io.calibration_checks` (the message names the file, the camera
            and the attribute).
    """
    path = Path(path)
    if binning_factor < 1:
        raise ValueError(f"binning_factor must be >= 1, got {binning_factor}")
    cameras = _qca_cameras(path)
    records = [_qca_record(path, i, cam, binning_factor) for i, cam in enumerate(cameras)]
    return _qca_calibration(path, records)


def _read(path: Path) -> bytes:
    """The bytes of a calibration file (a regular file of at most 16 MiB)."""
    try:
        return read_bytes(path, MAX_CALIBRATION_BYTES, "calibration file")
    except FileNotFoundError:
        raise
    except ValueError as e:
        raise CalibrationError(str(e)) from None


def _refuse_declarations(path: Path, data: bytes) -> None:
    """Refuse XML with a ``<!DOCTYPE>`` or ``<!ENTITY>`` declaration before anything is expanded
    (an entity-expansion bomb): expat stops at the declaration's start, in any encoding."""

    def refuse(*_args) -> None:
        raise CalibrationError(
            f"{path}: XML with a <!DOCTYPE> or <!ENTITY> declaration: entity declarations are "
            "not accepted in a calibration file"
        )

    if re.search(rb"<!\s*(DOCTYPE|ENTITY)", data, re.IGNORECASE):
        refuse()
    parser = expat.ParserCreate()
    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    try:
        parser.Parse(data, True)
    except expat.ExpatError as e:
        raise CalibrationError(
            f"{path}: malformed XML at line {e.lineno}, column {e.offset}"
        ) from None


def _qca_cameras(path: Path) -> list[ET.Element]:
    """The video ``<camera>`` elements of a ``.qca.txt`` file."""
    data = _read(path)
    _refuse_declarations(path, data)
    try:
        root = ET.fromstring(data)
    except ET.ParseError as e:
        line, col = e.position
        raise CalibrationError(f"{path}: malformed XML at line {line}, column {col}") from None
    cameras = [
        c
        for c in root.findall("cameras/camera")
        if c.get("model", "none") == "none" or "video" in c.get("model", "").lower()
    ]
    if not cameras:
        raise CalibrationError(f"{path}: no video <camera> under <cameras>")
    return cameras


def _qca_record(path: Path, i: int, cam: ET.Element, binning_factor: int) -> dict:
    """One camera (parsing, not a hot path): name, ``K``, ``dist``, Qualisys rotation ``Rq``,
    position ``pos`` (metres) and image ``size``, as plain lists."""
    name = cam.get("serial") or cam.get("name") or f"camera_{i}"
    fov = _child(path, name, cam, "fov_video")
    intr = _child(path, name, cam, "intrinsic")
    tr = _child(path, name, cam, "transform")
    scale = 1.0
    res = cam.get("video_resolution")
    if res is not None:
        m = re.fullmatch(r"\s*([0-9]{1,6})\s*p?\s*", res)
        if m is None or int(m.group(1)) == 0:
            raise CalibrationError(
                f"{path}: camera {name!r}: video_resolution={_short(res, 40)} is not like '1080p'"
            )
        scale = int(m.group(1)) / 1080
    left, top = _float(path, name, fov, "left"), _float(path, name, fov, "top")
    right, bottom = _float(path, name, fov, "right"), _float(path, name, fov, "bottom")
    if right < left or bottom < top:
        raise CalibrationError(f"{path}: camera {name!r}: empty <fov_video> window")
    sub = 64.0 * binning_factor  # sensor units: 64 subpixels per pixel
    fu = _float(path, name, intr, "focalLengthU") / sub * scale
    if intr.get("focalLengthV") is not None:
        fv = _float(path, name, intr, "focalLengthV") / sub * scale
    else:
        aspect = _float(path, name, intr, "pixelAspectRatio")
        if not aspect > 0:
            raise CalibrationError(
                f"{path}: camera {name!r}: <intrinsic> pixelAspectRatio={aspect:g} must be > 0"
            )
        fv = fu / aspect
    cu = (_float(path, name, intr, "centerPointU") / sub - left) * scale
    cv = (_float(path, name, intr, "centerPointV") / sub - top) * scale
    keys = ("radialDistortion1", "radialDistortion2", "tangentalDistortion1")
    k1, k2, p1 = (_float(path, name, intr, k) / sub for k in keys)
    p2 = _float(path, name, intr, "tangentalDistortion2") / sub
    k3 = 0.0
    if intr.get("radialDistortion3") is not None:
        k3 = _float(path, name, intr, "radialDistortion3") / sub
    rq = [[_float(path, name, tr, f"r{i}{j}") for j in (1, 2, 3)] for i in (1, 2, 3)]
    pos = [_float(path, name, tr, k) / 1000.0 for k in ("x", "y", "z")]
    return {
        "name": name,
        "K": [[fu, 0.0, cu], [0.0, fv, cv], [0.0, 0.0, 1.0]],
        "dist": [k1, k2, p1, p2, k3],
        "Rq": rq,
        "pos": pos,
        "size": [(right - left + 1) / binning_factor * scale,
                 (bottom - top + 1) / binning_factor * scale],
    }  # fmt: skip


def _qca_calibration(path: Path, records: list[dict]) -> Calibration:
    """The cameras' records (sorted by name) as a :class:`Calibration` in OpenCV's convention."""
    names = [r["name"] for r in records]
    if len(set(names)) != len(names):
        raise CalibrationError(f"{path}: duplicate camera serials {names}")
    records.sort(key=lambda r: _natural_key(r["name"]))
    f64 = torch.float64
    Rq = torch.tensor([r["Rq"] for r in records], dtype=f64)
    R = torch.diag(torch.tensor([1.0, -1.0, -1.0], dtype=f64)) @ Rq  # a rotation iff Rq is one
    pos = torch.tensor([r["pos"] for r in records], dtype=f64)
    t = -(R @ pos.unsqueeze(-1)).squeeze(-1)
    fields = {
        "names": [r["name"] for r in records],
        "K": torch.tensor([r["K"] for r in records], dtype=f64),
        "dist": torch.tensor([r["dist"] for r in records], dtype=f64),
        "R": R,
        "t": t,
        "size": torch.tensor([r["size"] for r in records], dtype=f64),
    }
    _check(path, fields, [f"camera {n!r}:" for n in fields["names"]], _QCA_KEYS)
    return Calibration(**fields, source=path)


def _check(path: Path, fields: dict, labels: list[str], keys: Mapping[str, object]) -> None:
    """:func:`check_cameras` with the file's names for cameras and keys."""
    try:
        check_cameras(**fields, where=str(path), labels=labels, keys=keys)
    except ValueError as e:
        raise CalibrationError(str(e)) from None


def _short(value: object, limit: int = 200) -> str:
    """``repr(value)``, cut to ``limit`` characters (a message stays one readable line)."""
    try:
        text = repr(value)
    except ValueError:  # an int beyond the digit limit of str()
        return f"an integer of more than {sys.get_int_max_str_digits()} digits"
    return text if len(text) <= limit else text[:limit] + "..."


def _numbers(path: Path, table: str, key: str, value: object, shape: tuple) -> list:
    """``value`` as nested lists of floats of ``shape``; errors name the file, table and key."""

    def fail(why: str):
        want = " x ".join(str(s) for s in shape)
        return CalibrationError(f"{path}: [{table}] {key}: expected {want} numbers, {why}")

    def walk(v: object, dims: tuple) -> object:
        if not dims:
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise fail(f"got {_short(v)}")
            try:
                x = float(v)
            except OverflowError:  # an integer beyond the float range (e.g. 10**400)
                digits = int(v.bit_length() * 0.30103) + 1
                raise fail(f"got an integer of about {digits} digits, too large") from None
            if not math.isfinite(x):
                raise fail(f"got {v!r}")
            return x
        if not isinstance(v, list) or len(v) != dims[0]:
            raise fail(f"got {_short(value)}")
        return [walk(x, dims[1:]) for x in v]

    return walk(value, shape)


def read_toml(path: str | os.PathLike) -> Calibration:
    """Read a Pose2Sim-style ``.toml`` calibration (one table per camera + ``[metadata]``).

    Per camera: ``name`` (string; defaults to the table name), ``size`` ``[w, h]``,
    ``matrix`` 3 x 3, ``distortions`` 4 or 5 numbers, ``rotation`` Rodrigues vector,
    ``translation`` (metres), optional ``fisheye`` (must be false: the fisheye model is not
    supported). Other keys are ignored.

    Raises:
        FileNotFoundError: no such file.
        CalibrationError: not a regular file of at most 16 MiB, malformed or too deeply nested
            TOML (with its line), no camera table, a missing or malformed key (integers too
            large for a float included), a fisheye camera, a camera out of the bounds of
            :mod:`tensorpose.io.calibration_checks` (the message names the file, table and key).
    """
    path = Path(path)
    data = _read(path)
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise CalibrationError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except RecursionError:
        raise CalibrationError(
            f"{path}: malformed TOML: arrays or tables nested too deeply"
        ) from None
    except ValueError as e:  # TOMLDecodeError, an integer over Python's digit limit
        raise CalibrationError(f"{path}: malformed TOML: {e}") from None
    metadata = doc.get("metadata", {})
    if not isinstance(metadata, dict):
        raise CalibrationError(f"{path}: 'metadata' must be a table")
    tables = {k: v for k, v in doc.items() if k != "metadata"}
    if not tables:
        raise CalibrationError(f"{path}: no camera table (expected e.g. [cam_01] with matrix=...)")
    names, labels, K, dist, rvec, t, size = [], [], [], [], [], [], []
    for table, cam in tables.items():  # one camera per table (parsing, not a hot path)
        if not isinstance(cam, dict):
            raise CalibrationError(f"{path}: {table!r} must be a camera table, got {_short(cam)}")
        required = ("size", "matrix", "distortions", "rotation", "translation")
        missing = [k for k in required if k not in cam]
        if missing:
            raise CalibrationError(f"{path}: [{table}] is missing {missing}")
        name = cam.get("name", table)
        if not isinstance(name, str) or not name:
            raise CalibrationError(f"{path}: [{table}] name: expected a string, got {_short(name)}")
        fisheye = cam.get("fisheye", False)
        if not isinstance(fisheye, bool):
            raise CalibrationError(f"{path}: [{table}] fisheye: expected true/false")
        if fisheye:
            raise CalibrationError(
                f"{path}: [{table}] fisheye = true: the fisheye lens model is not supported"
            )
        d = cam["distortions"]
        n = len(d) if isinstance(d, list) and len(d) in (4, 5) else 5
        d = _numbers(path, table, "distortions", d, (n,))
        names.append(name)
        labels.append(f"[{table}]")
        size.append(_numbers(path, table, "size", cam["size"], (2,)))
        K.append(_numbers(path, table, "matrix", cam["matrix"], (3, 3)))
        dist.append(d + [0.0] * (5 - n))
        rvec.append(_numbers(path, table, "rotation", cam["rotation"], (3,)))
        t.append(_numbers(path, table, "translation", cam["translation"], (3,)))
    if len(set(names)) != len(names):
        raise CalibrationError(f"{path}: duplicate camera names {names}")
    f64 = torch.float64
    fields = {
        "names": names,
        "K": torch.tensor(K, dtype=f64),
        "dist": torch.tensor(dist, dtype=f64),
        "R": axis_angle_to_matrix(torch.tensor(rvec, dtype=f64)),
        "t": torch.tensor(t, dtype=f64),
        "size": torch.tensor(size, dtype=f64),
    }
    _check(path, fields, labels, _TOML_KEYS)
    return Calibration(**fields, source=path, metadata=dict(metadata))


def load_calibration(path: str | os.PathLike, binning_factor: int = 1) -> Calibration:
    """Read ``path`` by its suffix: ``.qca.txt`` (Qualisys, see :func:`read_qca`) or ``.toml``."""
    path = Path(path)
    try:  # a folder, FIFO or device is refused before its name is looked at
        check_regular_file(path, MAX_CALIBRATION_BYTES, "calibration file")
    except FileNotFoundError:
        raise MissingFileError(f"calibration file not found: {path}") from None
    except ValueError as e:
        raise CalibrationError(str(e)) from None
    name = path.name.lower()
    if name.endswith(".qca.txt"):
        return read_qca(path, binning_factor)
    if name.endswith(".toml"):
        return read_toml(path)
    raise CalibrationError(f"{path}: unknown calibration format (expected .qca.txt or .toml)")


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key, ensure_ascii=False)


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)  # shortest repr: reads back bit-identical
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON escapes are TOML basic-string escapes
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} {value!r} to TOML")


def write_toml(calibration: Calibration, path: str | os.PathLike) -> Path:
    """Write ``calibration`` in Pose2Sim's ``.toml`` layout (one table per camera, named after
    it, then ``[metadata]``); floats are written with their shortest exact representation, so
    :func:`read_toml` gives back the same tensors (rotations to within 1e-15 after the Rodrigues
    round trip).
    """
    path = Path(path)
    if "metadata" in calibration.names:
        raise InputError("a camera named 'metadata' collides with the [metadata] table")
    cal = calibration.to("cpu", torch.float64)
    rvec = cal.rvec.tolist()
    lines = []
    for c, name in enumerate(cal.names):  # one table per camera (writing, not a hot path)
        d = cal.dist[c].tolist()
        if d[4] == 0.0:
            d = d[:4]
        lines += [
            f"[{_toml_key(name)}]",
            f"name = {_toml_value(name)}",
            f"size = {_toml_value(cal.size[c].tolist())}",
            f"matrix = {_toml_value(cal.K[c].tolist())}",
            f"distortions = {_toml_value(d)}",
            f"rotation = {_toml_value(rvec[c])}",
            f"translation = {_toml_value(cal.t[c].tolist())}",
            "fisheye = false",
            "",
        ]
    meta = {"adjusted": False, "error": 0.0, **cal.metadata}
    lines.append("[metadata]")
    for key, value in meta.items():
        lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
