"""A TensorFlow Lite operator graph run by PyTorch, from a plain-data description.

The description (written by :func:`tensorpose.blazepose.tflite.read_tflite`) holds only ints,
strings
and lists: ``inputs``/``outputs`` (``name``, tensor ``id``, TFLite ``shape``), ``constants``
(state-dict name -> shape, in PyTorch's layout) and ``ops``, each ``{"op", "in": [ids],
"out": id, ...options}``. :class:`TFLiteNet` keeps the constants as buffers and runs the ops in
order; a loop over the graph's operators, not over samples.

Layout: TFLite tensors are NHWC; here every 4-D activation is NCHW from the input on (inputs are
taken as ``(B, C, H, W)``), 4-D outputs come out NCHW, and only ``RESHAPE`` (whose element order
is NHWC's) permutes back. TFLite's ``SAME`` padding is exact (the extra pixel of an odd total
padding goes after, as in TensorFlow), and ``MAX_POOL_2D`` ignores its padding.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import InputError
from .onednn import activate as _activate
from .onednn import build_program, use_program
from .onednn import same_pads as _same_pads

__all__ = ["FORMAT", "SUPPORTED_OPS", "TFLiteNet", "check_description"]

FORMAT = "tensorpose-tflite-graph-1"
SUPPORTED_OPS = (
    "ADD",
    "CONCATENATION",
    "CONV_2D",
    "DEPTHWISE_CONV_2D",
    "DEPTH_TO_SPACE",
    "LOGISTIC",
    "MAX_POOL_2D",
    "PAD",
    "RESHAPE",
    "RESIZE_BILINEAR",
)
"""Operators a graph may hold (``DEQUANTIZE`` and ``DENSIFY`` of constants are folded when a
file is read)."""


def check_description(desc: Any, source: str) -> None:
    """Raise a one-line ``ValueError`` naming ``source`` unless ``desc`` is a graph description
    whose operators are supported and whose every input is computed before it is used."""

    def fail(what: str) -> InputError:
        return InputError(f"{source}: {what}")

    if not isinstance(desc, dict) or desc.get("format") != FORMAT:
        raise fail(f"not a TFLite graph description of format {FORMAT!r}")
    known = set()
    for io in desc.get("inputs", []):
        if not (isinstance(io.get("id"), int) and len(io.get("shape", [])) == 4):
            raise fail("graph inputs must be 4-D image tensors")
        known.add(io["id"])
    consts = desc.get("constants")
    if not isinstance(consts, dict):
        raise fail("no constants")
    for i, op in enumerate(desc.get("ops", [])):
        name = op.get("op") if isinstance(op, dict) else None
        if name not in SUPPORTED_OPS:
            raise fail(f"operator {name} is not supported (supported: {', '.join(SUPPORTED_OPS)})")
        missing = [t for t in op["in"] if t not in known]
        if missing or not op["in"]:
            raise fail(f"operator {i} ({name}) reads tensor {missing} before it is computed")
        for key in ("weight", "bias"):
            if op.get(key) and op[key] not in consts:
                raise fail(f"operator {i} ({name}): no constant {op[key]!r}")
        known.add(op["out"])
    for io in desc.get("outputs", []):
        if io.get("id") not in known:
            raise fail(f"output {io.get('name')!r} is never computed")


def _fuse_pads(ops: list[dict], used: list[int], keep: set[int]) -> list[dict | None]:
    """``ops`` with every zero ``PAD`` of the image borders (same amount on both sides, no
    channels) whose only reader is a ``VALID`` convolution folded into that convolution's
    padding (``pre_pad``): no padded copy of the activation. Folded ``PAD`` ops become None."""
    readers: dict[int, list[int]] = {}
    for i in used:
        for t in ops[i]["in"]:
            readers.setdefault(t, []).append(i)
    ops = list(ops)
    for i in used:
        op, r = ops[i], readers.get(ops[i]["out"], [])
        if op["op"] != "PAD" or op["out"] in keep or len(r) != 1:
            continue
        p, conv = op["pads"], ops[r[0]]
        if p[:2] != [0, 0] or p[6:] != [0, 0] or p[2] != p[3] or p[4] != p[5]:
            continue
        if conv["op"] not in ("CONV_2D", "DEPTHWISE_CONV_2D") or conv["padding"] != "VALID":
            continue
        ops[r[0]] = {**conv, "in": [op["in"][0], *conv["in"][1:]], "pre_pad": [p[2], p[4]]}
        ops[i] = None
    return ops


@contextlib.contextmanager
def _full_float32(device: torch.device) -> Iterator[None]:
    """cuDNN convolutions in full float32 on CUDA. PyTorch lets cuDNN use TF32 (10-bit
    mantissas) by default, which moves BlazePose's landmarks by a median of 0.2 px and up to
    17 px from the CPU's (``scripts/blazepose_tf32.py``); the graph must equal the interpreter."""
    if device.type != "cuda":
        yield
        return
    b = torch.backends.cudnn
    with b.flags(enabled=b.enabled, benchmark=b.benchmark, deterministic=b.deterministic,
                 allow_tf32=False):  # fmt: skip
        yield


class TFLiteNet(nn.Module):
    """Runs a TFLite graph description; ``forward(*images)`` -> tuple of the graph's outputs.

    Args:
        desc: the plain-data description (see the module docstring).
        source: named in errors (the file it came from).

    Inputs are ``(B, C, H, W)`` (the TFLite input's ``(1, H, W, C)`` transposed, any ``B``);
    outputs keep TFLite's shapes with ``B`` first, except 4-D ones, which are NCHW.
    """

    def __init__(self, desc: dict[str, Any], source: str = "graph") -> None:
        super().__init__()
        check_description(desc, source)
        self.desc, self.source = desc, source
        for key, shape in desc["constants"].items():
            self.register_buffer(key, torch.zeros(shape))
        self.input_names = [io["name"] for io in desc["inputs"]]
        self.output_names = [io["name"] for io in desc["outputs"]]
        self._plans: dict[tuple[int, ...], list] = {}
        self._programs: dict[tuple, tuple[tuple, list]] = {}

    def _plan(self, outputs: tuple[int, ...]) -> list[tuple[dict, list[int]]]:
        """The ops that compute the graph outputs ``outputs`` (indices), in order, each with
        the tensors last needed by it (freed then, to bound memory)."""
        if outputs not in self._plans:
            ops = self.desc["ops"]
            keep = {self.desc["outputs"][i]["id"] for i in outputs}
            need, used = set(keep), []
            for i in range(len(ops) - 1, -1, -1):  # backwards over the graph: live ops only
                if ops[i]["out"] in need:
                    need.update(ops[i]["in"])
                    used.append(i)
            used.reverse()
            ops = _fuse_pads(ops, used, keep)
            used = [i for i in used if ops[i] is not None]
            last = {t: i for i in used for t in ops[i]["in"]}
            free: dict[int, list[int]] = {i: [] for i in used}
            for t, i in last.items():
                if t not in keep:
                    free[i].append(t)
            self._plans[outputs] = [(ops[i], free[i]) for i in used]
        return self._plans[outputs]

    def _program(self, outputs: tuple[int, ...], values: dict[int, torch.Tensor]) -> list:
        """The oneDNN program (:mod:`~tensorpose.blazepose.onednn`) of the plan for
        ``outputs`` and the shapes of the inputs ``values``; made once per shape and kept while
        no constant changed (they are re-read when one was replaced or written in place). The
        inputs are made channels-last in place in ``values``."""
        for t, x in values.items():
            values[t] = x.contiguous(memory_format=torch.channels_last)
        key = (outputs, *(tuple(x.shape) for x in values.values()))
        stamp = tuple((b.data_ptr(), b._version) for b in self._buffers.values())
        if key not in self._programs or self._programs[key][0] != stamp:
            if len(self._programs) >= 4:  # a few shapes at a time (packed weights each)
                self._programs.pop(next(iter(self._programs)))
            ops = [op for op, _ in self._plan(outputs)]
            keep = {self.desc["outputs"][i]["id"] for i in outputs}
            shapes = {t: tuple(x.shape) for t, x in values.items()}
            self._programs[key] = (stamp, build_program(self, ops, keep, shapes))
        return self._programs[key][1]

    def forward(
        self, *images: torch.Tensor, outputs: tuple[int, ...] | None = None
    ) -> tuple[torch.Tensor | None, ...]:
        """The graph's outputs; with ``outputs`` (indices) only those are computed (the others
        come back as ``None``)."""
        if len(images) != len(self.desc["inputs"]):
            raise ValueError(f"{self.source}: {len(self.desc['inputs'])} inputs, got {len(images)}")
        values = {}
        for io, x in zip(self.desc["inputs"], images, strict=True):
            _, h, w, c = io["shape"]
            if x.dim() != 4 or tuple(x.shape[1:]) != (c, h, w):
                raise ValueError(
                    f"{self.source}: input {io['name']!r} must be (B, {c}, {h}, {w}), "
                    f"got {tuple(x.shape)}"
                )
            values[io["id"]] = x
        n = len(self.desc["outputs"])
        wanted = tuple(range(n)) if outputs is None else tuple(sorted(set(outputs)))
        if not all(0 <= i < n for i in wanted):
            raise ValueError(f"{self.source}: outputs must be indices in [0, {n}), got {outputs}")
        if all(use_program(x) for x in images):  # a CPU without gradient: the program
            for fn, ins, out, free in self._program(wanted, values):
                values[out] = fn(*(values[t] for t in ins))
                for t in free:
                    del values[t]
        else:
            with _full_float32(images[0].device):
                for op, free in self._plan(wanted):
                    values[op["out"]] = getattr(self, "_" + op["op"].lower())(
                        op, *(values[t] for t in op["in"])
                    )
                    for t in free:
                        del values[t]
        ids = [io["id"] if i in wanted else None for i, io in enumerate(self.desc["outputs"])]
        return tuple(None if t is None else values[t] for t in ids)

    def _conv(self, op: dict, x: torch.Tensor) -> torch.Tensor:
        w = getattr(self, op["weight"])
        b = getattr(self, op["bias"]) if op["bias"] else None
        (sh, sw), (dh, dw) = op["stride"], op["dilation"]
        pad: tuple[int, int] | str = tuple(op.get("pre_pad", (0, 0)))
        if op["padding"] == "SAME":
            top, bottom = _same_pads(x.shape[2], w.shape[2], sh, dh)
            left, right = _same_pads(x.shape[3], w.shape[3], sw, dw)
            if (top, left) == (bottom, right):
                pad = (top, left)
            else:
                x = F.pad(x, (left, right, top, bottom))
        y = F.conv2d(x, w, b, (sh, sw), pad, (dh, dw), op["groups"])
        return _activate(y, op["act"])

    _conv_2d = _conv
    _depthwise_conv_2d = _conv

    def _max_pool_2d(self, op: dict, x: torch.Tensor) -> torch.Tensor:
        (kh, kw), (sh, sw) = op["kernel"], op["stride"]
        if op["padding"] == "SAME":
            top, bottom = _same_pads(x.shape[2], kh, sh, 1)
            left, right = _same_pads(x.shape[3], kw, sw, 1)
            x = F.pad(x, (left, right, top, bottom), value=float("-inf"))
        return _activate(F.max_pool2d(x, (kh, kw), (sh, sw)), op["act"])

    def _add(self, op: dict, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _activate(a + b, op["act"])

    def _concatenation(self, op: dict, *xs: torch.Tensor) -> torch.Tensor:
        return _activate(torch.cat(xs, op["axis"]), op["act"])

    def _pad(self, op: dict, x: torch.Tensor) -> torch.Tensor:
        p = op["pads"]  # NHWC (before, after) pairs
        if x.dim() != 4 or p[0] or p[1]:
            raise ValueError(f"{self.source}: PAD of a batch or of a non-image tensor")
        return F.pad(x, (p[4], p[5], p[2], p[3], p[6], p[7]))

    def _reshape(self, op: dict, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 4:
            x = x.permute(0, 2, 3, 1)
        y = x.reshape(x.shape[0], *op["shape"][1:])
        return y.permute(0, 3, 1, 2) if y.dim() == 4 else y

    def _resize_bilinear(self, op: dict, x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(
            x, size=tuple(op["size"]), mode="bilinear", align_corners=bool(op["align_corners"])
        )

    def _depth_to_space(self, op: dict, x: torch.Tensor) -> torch.Tensor:
        r, (b, c, h, w) = op["block"], x.shape  # channel index (i * r + j) * C_out + c
        y = x.reshape(b, r, r, c // (r * r), h, w).permute(0, 3, 4, 1, 5, 2)
        return y.reshape(b, c // (r * r), h * r, w * r)

    def _logistic(self, op: dict, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x)
