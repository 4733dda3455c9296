"""A TFLite graph's operators prepared for a CPU, once per input shape.

:class:`~tensorpose.blazepose.graph.TFLiteNet` runs its plan op by op; on a CPU (float32,
no gradient) it runs a *program* built here from that plan instead, for the input's shape:

- convolutions are oneDNN's with the activation fused and the weights reordered once into the
  layout oneDNN picks for that input shape (``conv2d`` would reorder them on every call, run 1
  x 1 convolutions of one image as im2col + gemm on a copy, and clamp ``RELU6`` in a second
  pass); an uneven ``SAME`` padding (the extra pixel after) is padded first;
- a convolution without activation read only by an ``ADD`` (the residual blocks) runs with the
  add (and a ``RELU``) fused, written into the other summand where that is dead afterwards;
- 1 x 1 convolutions of one image's small maps (:data:`MATMUL_PIXELS`) and those whose
  kernel covers the whole input run as one matrix product (``addmm``), where oneDNN's fixed
  cost per call outweighs its kernels.

Every output is one float32 accumulation per value, bias, then the summand, as the graph's own
ops; only the order of the accumulation differs with the kernel.
tests/blazepose/test_networks.py checks the programs against the ops one by one and both
networks against the TFLite interpreter. Every other operator runs through the module's own
operator methods.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["ACTIVATIONS", "HAS_ONEDNN", "activate", "build_program", "same_pads", "use_program"]

ACTIVATIONS = {"NONE": ("none", []), "RELU": ("relu", []), "RELU6": ("hardtanh", [0.0, 6.0])}
"""TFLite's fused activations as oneDNN post-op names and their scalars."""

_CONV_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D")
_FRESH = (*_CONV_OPS, "ADD", "MAX_POOL_2D", "RESIZE_BILINEAR", "CONV_ADD")
"""Operators whose result is a new tensor, never a view of another (safe to write into)."""


def _has_onednn() -> bool:
    try:
        return torch.backends.mkldnn.is_available() and all(
            bool(getattr(torch.ops.mkldnn, n).default)
            for n in ("_convolution_pointwise", "_reorder_convolution_weight")
        )
    except (AttributeError, RuntimeError):
        return False


HAS_ONEDNN = _has_onednn()


def same_pads(size: int, kernel: int, stride: int, dilation: int) -> tuple[int, int]:
    """TensorFlow's ``SAME`` padding of one dimension: (before, after), after >= before."""
    out = -(-size // stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def activate(x: torch.Tensor, act: str) -> torch.Tensor:
    """The fused activation, in place (``x`` is always an op's fresh result)."""
    if act == "RELU6":
        return F.hardtanh_(x, 0.0, 6.0)
    if act == "RELU":
        return F.relu_(x)
    return x


def use_program(x: torch.Tensor) -> bool:
    """Whether a forward pass on ``x`` runs as a oneDNN program: a float32 4-D CPU tensor, no
    gradient to record, a build with oneDNN's fused convolutions."""
    return (
        HAS_ONEDNN
        and x.device.type == "cpu"
        and x.dtype == torch.float32
        and x.dim() == 4
        and not (x.requires_grad and torch.is_grad_enabled())
    )


def _conv_padding(op: dict, shape: tuple[int, ...], w: torch.Tensor) -> list[int] | None:
    """The convolution's (top, left) padding when it is even on both sides, else None."""
    if op["padding"] != "SAME":
        return list(op.get("pre_pad", (0, 0)))
    (sh, sw), (dh, dw) = op["stride"], op["dilation"]
    top, bottom = same_pads(shape[2], w.shape[2], sh, dh)
    left, right = same_pads(shape[3], w.shape[3], sw, dw)
    return [top, left] if (top, left) == (bottom, right) else None


def _fuse_adds(ops: list[dict], keep: set[int]) -> list[dict]:
    """``ops`` with each convolution without activation whose only reader is an ``ADD`` (and
    which is no graph output) merged into that ``ADD`` as a ``CONV_ADD`` op (``in``: the
    convolution's input, then the other summand), run where the ``ADD`` ran."""
    readers: dict[int, list[int]] = {}
    for i, op in enumerate(ops):
        for t in op["in"]:
            readers.setdefault(t, []).append(i)
    producer = {op["out"]: i for i, op in enumerate(ops)}
    ops, gone = list(ops), set()
    for i, op in enumerate(ops):
        if op["op"] != "ADD" or len(op["in"]) != 2 or op["act"] == "RELU_N1_TO_1":
            continue
        for side in (0, 1):
            j = producer.get(op["in"][side])
            conv = ops[j] if j is not None and j not in gone else None
            if (
                conv is None
                or conv["op"] not in _CONV_OPS
                or conv["act"] != "NONE"
                or conv["out"] in keep
                or readers[conv["out"]] != [i]
                or op["in"][0] == op["in"][1]
            ):
                continue
            ops[i] = {**conv, "op": "CONV_ADD", "in": [conv["in"][0], op["in"][1 - side]],
                      "out": op["out"], "act": op["act"]}  # fmt: skip
            gone.add(j)
            break
    return [op for j, op in enumerate(ops) if j not in gone]


Step = tuple[Callable[..., torch.Tensor], list[int], int, list[int]]


def build_program(
    net: Any, ops: list[dict], keep: set[int], inputs: dict[int, tuple[int, ...]]
) -> list[Step]:
    """The steps ``(fn, input ids, output id, ids freed after it)`` that compute the tensors
    ``keep`` from ``inputs`` (tensor id -> shape) through ``ops`` (a plan's live operators, in
    order) on a CPU. ``net`` supplies the constants (``getattr(net, name)``) and the other
    operators (``net._<op>(op, *xs)``)."""
    ops = _fuse_adds(ops, keep)
    shapes = dict(inputs)
    with torch.no_grad():  # the shapes of every tensor, from a run on zeros of one image
        values = {t: torch.zeros(1, *s[1:]) for t, s in inputs.items()}
        for op in ops:
            if op["op"] == "CONV_ADD":
                y = net._conv({**op, "act": "NONE"}, values[op["in"][0]]) + values[op["in"][1]]
            else:
                y = getattr(net, "_" + op["op"].lower())(op, *(values[t] for t in op["in"]))
            values[op["out"]] = y
            shapes[op["out"]] = (next(iter(inputs.values()))[0], *y.shape[1:])
    last = {t: i for i, op in enumerate(ops) for t in op["in"]}
    producer = {op["out"]: op["op"] for op in ops}
    steps = []
    for i, op in enumerate(ops):
        other = op["in"][-1]  # a CONV_ADD writes into its summand where nothing reads it later
        in_place = last[other] == i and other not in keep and producer.get(other) in _FRESH
        fn = _step(net, op, shapes[op["in"][0]], in_place=in_place)
        free = [t for t in dict.fromkeys(op["in"]) if last[t] == i and t not in keep]
        steps.append((fn, op["in"], op["out"], free))
    return steps


def _step(net: Any, op: dict, shape: tuple[int, ...], in_place: bool = False) -> Callable:
    """One operator as a function of its input tensors."""
    kind = op["op"]
    if kind not in (*_CONV_OPS, "CONV_ADD"):
        method = getattr(net, "_" + kind.lower())
        return lambda *xs: method(op, *xs)
    w = getattr(net, op["weight"])
    b = getattr(net, op["bias"]) if op["bias"] else None
    if _as_matmul(op, shape, w):
        return _step_matmul(op, w, b)
    pad = _conv_padding(op, shape, w)
    if pad is None:  # uneven SAME padding: padded first, then a convolution without padding
        (sh, sw), (dh, dw) = op["stride"], op["dilation"]
        top, bottom = same_pads(shape[2], w.shape[2], sh, dh)
        left, right = same_pads(shape[3], w.shape[3], sw, dw)
        padded = (*shape[:2], shape[2] + top + bottom, shape[3] + left + right)
        inner = _step(net, {**op, "padding": "VALID", "pre_pad": [0, 0]}, padded, in_place)
        return lambda x, *other: inner(F.pad(x, (left, right, top, bottom)), *other)
    args = (pad, list(op["stride"]), list(op["dilation"]), op["groups"])
    packed = torch.ops.mkldnn._reorder_convolution_weight(w, *args, list(shape))
    if kind != "CONV_ADD":
        act, scalars = ACTIVATIONS[op["act"]]
        conv = torch.ops.mkldnn._convolution_pointwise.default
        return lambda x: conv(x, packed, b, *args, act, scalars, "")
    unary = "relu" if op["act"] == "RELU" else None  # RELU6 is clamped after the add
    after = op["act"] if op["act"] == "RELU6" else "NONE"
    binary = torch.ops.mkldnn._convolution_pointwise.binary
    binary_ = torch.ops.mkldnn._convolution_pointwise_.binary
    cl = torch.channels_last

    def conv_add(x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        x, other = x.contiguous(memory_format=cl), other.contiguous(memory_format=cl)
        post = ("add", None, unary, [], None)
        if in_place:
            return activate(binary_(other, x, packed, b, *args, *post), after)
        return activate(binary(x, other, packed, b, *args, *post), after)

    return conv_add


MATMUL_PIXELS = 32 * 32
"""For one image, 1 x 1 convolutions over at most this many pixels run as one matrix product
(``addmm``, MKL's sgemm): there oneDNN's fixed cost per call (some 40 us on one thread)
outweighs its faster kernels, and the results lie closer to the TFLite interpreter's (40 real
landmark crops, mean |landmark - TFLite|: 7.5e-5 px against 8.5e-5 with oneDNN everywhere).
Measured in sequence on the landmark network, one thread, the variants taking turns: one image
as fast as with oneDNN everywhere. Batches keep oneDNN: there its cost per call is shared, and
in batches of 8 the products of 32 x 32 maps are 5% slower."""


def _as_matmul(op: dict, shape: tuple[int, ...], w: torch.Tensor) -> bool:
    """Whether a convolution runs as one matrix product: a 1 x 1 convolution of one image over
    at most :data:`MATMUL_PIXELS` pixels, or one whose kernel covers its whole unpadded input
    (one output pixel, as the landmark network's two last ones)."""
    if op["groups"] != 1 or tuple(op["dilation"]) != (1, 1) or any(op.get("pre_pad", ())):
        return False
    one_by_one = tuple(w.shape[2:]) == (1, 1) and tuple(op["stride"]) == (1, 1)
    whole = op["padding"] == "VALID" and tuple(w.shape[2:]) == tuple(shape[2:])
    return whole or (one_by_one and shape[0] == 1 and shape[2] * shape[3] <= MATMUL_PIXELS)


def _step_matmul(op: dict, w: torch.Tensor, b: torch.Tensor | None) -> Callable:
    """A convolution of :func:`_as_matmul` (and the ``ADD`` after it) as a matrix product: the
    channels-last input windows ``(B H_out W_out, k_h k_w C_in)`` times ``(k_h k_w C_in,
    C_out)``; bias, then the summand, then the activation, in the order of the graph's ops."""
    k = w.shape[2:]
    wt = w.permute(0, 2, 3, 1).reshape(w.shape[0], -1).t().contiguous()
    bias = torch.zeros(w.shape[0]) if b is None else b
    cl = torch.channels_last

    def matmul(x: torch.Tensor, *other: torch.Tensor) -> torch.Tensor:
        n, _, h, wd = x.shape
        ho, wo = h - k[0] + 1, wd - k[1] + 1  # 1 x 1: the input's size; whole: 1 x 1
        rows = x.contiguous(memory_format=cl).permute(0, 2, 3, 1).reshape(n * ho * wo, -1)
        y = torch.addmm(bias, rows, wt).view(n, ho, wo, -1).permute(0, 3, 1, 2)
        if other:
            y += other[0]
        return activate(y, op["act"])

    return matmul
