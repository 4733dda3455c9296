"""TensorFlow Lite model files (``.tflite`` flatbuffers) -> a graph that runs in PyTorch.

:func:`read_tflite` parses the flatbuffer with the ``tflite`` package (an optional dependency,
only needed to convert a file: ``pip install tflite``), folds the constant ``DENSIFY`` (sparse
weights made dense) and ``DEQUANTIZE`` (float16 -> float32) operators into float32 constants,
converts every weight to PyTorch's layout and returns a plain-data description of the operator
graph with its state dict. :class:`tensorpose.blazepose.graph.TFLiteNet` runs it, on any
device and any batch size. Nothing in the file is executed: it is data (tensors, operator codes
and their options), and an operator outside :data:`SUPPORTED_OPS` is refused in one line.

:func:`save_converted` / :func:`load_converted` write and read such a conversion as a torch
file of tensors and plain data only (readable with ``torch.load(weights_only=True)``); that is
how the BlazePose networks ship (``scripts/convert_blazepose.py``).

Example::

    net = load_tflite("pose_detection.tflite")  # needs the tflite package
    boxes, scores = net(torch.rand(1, 3, 224, 224) * 2 - 1)  # NCHW in; (1, 2254, 12), (1, 2254, 1)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import InputError
from ..io.files import read_bytes
from ..io.torch_file import torch_load
from .graph import FORMAT, SUPPORTED_OPS, TFLiteNet, check_description

__all__ = [
    "MAX_TFLITE_BYTES",
    "SUPPORTED_OPS",
    "load_converted",
    "load_tflite",
    "read_tflite",
    "save_converted",
]

MAX_TFLITE_BYTES = 256 << 20
"""Largest .tflite file read (256 MiB)."""

_ACTIVATIONS = {0: "NONE", 1: "RELU", 3: "RELU6"}
_PADDING = {0: "SAME", 1: "VALID"}
_NUMPY = {0: np.float32, 1: np.float16, 2: np.int32, 4: np.int64}
_NHWC_TO_NCHW_AXIS = (0, 2, 3, 1)


class _Model:
    """The parsed flatbuffer of one subgraph: tensors, constants and operator names."""

    def __init__(self, path: str, data: bytes) -> None:
        import tflite  # optional: only converting a file needs it

        self.path, self.data, self.tfl = path, data, tflite
        if data[4:8] != b"TFL3":
            raise InputError(f"{path}: not a TensorFlow Lite model (no TFL3 identifier)")
        self.model = tflite.Model.GetRootAsModel(data, 0)
        if self.model.SubgraphsLength() != 1:
            raise InputError(f"{path}: {self.model.SubgraphsLength()} subgraphs, expected 1")
        self.graph = self.model.Subgraphs(0)
        self.op_names = {
            v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")
        }

    def fail(self, what: str) -> InputError:
        return InputError(f"{self.path}: {what}")

    def shape(self, t: int) -> list[int]:
        return [int(s) for s in self.graph.Tensors(t).ShapeAsNumpy()]

    def name(self, t: int) -> str:
        return self.graph.Tensors(t).Name().decode("utf-8", "replace")

    def op_name(self, op: Any) -> str:
        code = self.model.OperatorCodes(op.OpcodeIndex())
        n = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        return self.op_names.get(n, f"builtin operator {n}") if n != 32 else "CUSTOM"

    def constant(self, t: int) -> np.ndarray | None:
        """The stored value of tensor ``t`` (sparse values still in traversal order), or None."""
        tensor = self.graph.Tensors(t)
        buffer = self.model.Buffers(tensor.Buffer())
        if buffer.Offset() > 1:  # stored after the flatbuffer (models over 2 GiB)
            raw = self.data[buffer.Offset() : buffer.Offset() + buffer.Size()]
        elif buffer.DataLength() > 0:
            raw = buffer.DataAsNumpy().tobytes()
        else:
            return None
        dtype = _NUMPY.get(tensor.Type())
        q = tensor.Quantization()
        if dtype is None or (q is not None and q.ScaleLength() > 0):
            raise self.fail(
                f"tensor {self.name(t)!r}: quantized or type-{tensor.Type()} tensors unsupported"
            )
        values = np.frombuffer(raw, dtype=dtype)
        if tensor.Sparsity() is not None:
            return _densify(self, t, values)
        if values.size != int(np.prod(self.shape(t))):
            raise self.fail(f"tensor {self.name(t)!r}: {values.size} values, shape {self.shape(t)}")
        return values.reshape(self.shape(t))

    def options(self, op: Any, name: str) -> Any:
        cls = getattr(self.tfl, name)
        table = op.BuiltinOptions()
        if table is None:
            raise self.fail(f"operator without its {name}")
        opts = cls()
        opts.Init(table.Bytes, table.Pos)
        return opts


def _densify(m: _Model, t: int, values: np.ndarray) -> np.ndarray:
    """The dense array of sparse tensor ``t`` (TFLite's ``SparsityParameters``, without blocks:
    dense dims and CSR dims in the tensor's own order), vectorised over every stored value."""
    shape = m.shape(t)
    sp = m.graph.Tensors(t).Sparsity()
    order = [int(i) for i in sp.TraversalOrderAsNumpy()]
    if order != list(range(len(shape))) or sp.BlockMapLength() > 0:
        raise m.fail(f"tensor {m.name(t)!r}: block-sparse or reordered sparsity is not supported")
    flat, pos = np.zeros(1, np.int64), np.zeros(1, np.int64)  # dense prefix, storage position
    for d in range(sp.DimMetadataLength()):
        dim, n = sp.DimMetadata(d), shape[d]
        if dim.Format() == 0:  # DENSE
            step = np.arange(n)
            flat = (flat[:, None] * n + step).ravel()
            pos = (pos[:, None] * n + step).ravel()
            continue
        segments = _index_vector(m, dim.ArraySegments(), dim.ArraySegmentsType())
        indices = _index_vector(m, dim.ArrayIndices(), dim.ArrayIndicesType())
        if pos.max(initial=0) + 1 >= len(segments) or segments[-1] > len(indices):
            raise m.fail(f"tensor {m.name(t)!r}: sparse segments out of range")
        counts = segments[pos + 1] - segments[pos]
        if (counts < 0).any():
            raise m.fail(f"tensor {m.name(t)!r}: sparse segments not increasing")
        start = np.repeat(segments[pos], counts)
        k = start + np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        if len(indices[k]) and (indices[k].max() >= n or indices[k].min() < 0):
            raise m.fail(f"tensor {m.name(t)!r}: sparse index out of range")
        flat = np.repeat(flat, counts) * n + indices[k]
        pos = k
    if len(pos) != len(values):
        raise m.fail(f"tensor {m.name(t)!r}: {len(values)} sparse values, expected {len(pos)}")
    dense = np.zeros(int(np.prod(shape)), values.dtype)
    dense[flat] = values[pos]
    return dense.reshape(shape)


def _index_vector(m: _Model, table: Any, kind: int) -> np.ndarray:
    cls = {1: "Int32Vector", 2: "Uint16Vector", 3: "Uint8Vector"}.get(kind)
    if cls is None or table is None:
        raise m.fail(f"sparse index vector of type {kind} is not supported")
    vec = getattr(m.tfl, cls)()
    vec.Init(table.Bytes, table.Pos)
    return vec.ValuesAsNumpy().astype(np.int64) if vec.ValuesLength() else np.zeros(0, np.int64)


def read_tflite(
    path: str | os.PathLike, data: bytes | None = None
) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """The operator graph of a ``.tflite`` file and its float32 weights in PyTorch's layout.

    ``data``: the file's bytes when they were read already (a member of an archive,
    :func:`tensorpose.io.archives.read_member`); ``path`` then only names them.

    Returns:
        ``(description, state_dict)``: the description is plain data (see
        :mod:`tensorpose.blazepose.graph`), the state dict maps each constant's name to a
        float32 tensor; ``TFLiteNet(description).load_state_dict(state_dict)`` runs it.

    Raises:
        ValueError: not a regular file or over :data:`MAX_TFLITE_BYTES`, not a TFLite model,
            or an unsupported operator, tensor type or option (one line naming the file).
        ModuleNotFoundError: the ``tflite`` package is not installed.
    """
    if data is None:
        data = read_bytes(path, MAX_TFLITE_BYTES, "TFLite model")
    try:
        return _read(str(path), data)
    except (IndexError, TypeError, KeyError, AttributeError, OverflowError) as e:
        raise InputError(f"{path}: not a readable TFLite model ({type(e).__name__})") from None
    except Exception as e:  # flatbuffers' struct errors on a truncated file
        if type(e).__module__ == "struct":
            raise InputError(f"{path}: truncated TFLite model") from None
        raise


def _read(path: str, data: bytes) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    m = _Model(path, data)
    g = m.graph
    consts: dict[int, np.ndarray] = {}
    for t in range(g.TensorsLength()):
        value = m.constant(t)
        if value is not None:
            consts[t] = value
    ops, state = [], {}
    for i in range(g.OperatorsLength()):
        op = g.Operators(i)
        name = m.op_name(op)
        if name not in SUPPORTED_OPS and name not in ("DEQUANTIZE", "DENSIFY"):
            raise m.fail(
                f"operator {name} is not supported (supported: {', '.join(SUPPORTED_OPS)})"
            )
        ins = [int(t) for t in op.InputsAsNumpy()]
        out = [int(t) for t in op.OutputsAsNumpy()]
        if name in ("DEQUANTIZE", "DENSIFY"):  # constants folded; a variable one is refused
            if ins[0] not in consts:
                raise m.fail(f"operator {name} on a computed tensor is not supported")
            value = consts[ins[0]]
            consts[out[0]] = value.astype(np.float32) if name == "DEQUANTIZE" else value
            continue
        ops.append(_describe(m, op, name, ins, out[0], consts, state))
    inputs = [int(t) for t in g.InputsAsNumpy()]
    outputs = [int(t) for t in g.OutputsAsNumpy()]
    desc = {
        "format": FORMAT,
        "source": Path(path).name,
        "inputs": [{"name": m.name(t), "id": t, "shape": m.shape(t)} for t in inputs],
        "outputs": [{"name": m.name(t), "id": t, "shape": m.shape(t)} for t in outputs],
        "constants": {k: list(v.shape) for k, v in state.items()},
        "ops": ops,
    }
    check_description(desc, path)
    return desc, state


def _describe(
    m: _Model, op: Any, name: str, ins: list[int], out: int, consts: dict, state: dict
) -> dict[str, Any]:
    """One operator as plain data; its weights (converted to PyTorch's layout) go to ``state``."""

    def weight(t: int, layout: tuple[int, ...] | None = None) -> str:
        if t not in consts:
            raise m.fail(f"operator {name}: computed weights are not supported")
        w = torch.from_numpy(np.ascontiguousarray(consts[t], np.float32))
        state[f"c{t}"] = w.permute(*layout).contiguous() if layout else w
        return f"c{t}"

    def ints(t: int) -> list[int]:
        if t not in consts:
            raise m.fail(f"operator {name}: a computed {m.name(t)!r} is not supported")
        return [int(v) for v in np.asarray(consts[t]).ravel()]

    def activation(opts: Any) -> str:
        act = opts.FusedActivationFunction()
        if act not in _ACTIVATIONS:
            raise m.fail(f"operator {name}: fused activation {act} is not supported")
        return _ACTIVATIONS[act]

    variables = [t for t in ins if t >= 0 and t not in consts]
    d: dict[str, Any] = {"op": name, "in": variables[:1], "out": out}
    if name in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        kind = "Conv2DOptions" if name == "CONV_2D" else "DepthwiseConv2DOptions"
        o = m.options(op, kind)
        w = consts.get(ins[1])
        if w is None or w.ndim != 4:
            raise m.fail(f"operator {name}: computed or non-4D weights are not supported")
        layout = (0, 3, 1, 2) if name == "CONV_2D" else (3, 0, 1, 2)  # OHWI / 1HWC -> OIHW
        cin = m.shape(ins[0])[3]
        d.update(
            weight=weight(ins[1], layout),
            bias=weight(ins[2]) if len(ins) > 2 and ins[2] >= 0 else "",
            stride=[o.StrideH(), o.StrideW()],
            dilation=[o.DilationHFactor(), o.DilationWFactor()],
            padding=_PADDING[o.Padding()],
            act=activation(o),
            groups=1 if name == "CONV_2D" else cin,
        )
    elif name == "MAX_POOL_2D":
        o = m.options(op, "Pool2DOptions")
        d.update(
            kernel=[o.FilterHeight(), o.FilterWidth()],
            stride=[o.StrideH(), o.StrideW()],
            padding=_PADDING[o.Padding()],
            act=activation(o),
        )
    elif name in ("ADD", "CONCATENATION"):
        d["in"] = variables
        if len(variables) != len([t for t in ins if t >= 0]):
            raise m.fail(f"operator {name} with a constant operand is not supported")
        o = m.options(op, "AddOptions" if name == "ADD" else "ConcatenationOptions")
        d["act"] = activation(o)
        if name == "CONCATENATION":
            rank = len(m.shape(ins[0]))
            axis = o.Axis() % rank
            d["axis"] = _NHWC_TO_NCHW_AXIS[axis] if rank == 4 else axis
    elif name == "PAD":
        d["pads"] = ints(ins[1])
    elif name == "RESHAPE":
        d["shape"] = m.shape(out)
    elif name == "RESIZE_BILINEAR":
        o = m.options(op, "ResizeBilinearOptions")
        if not (o.HalfPixelCenters() or o.AlignCorners()):
            raise m.fail("RESIZE_BILINEAR without half_pixel_centers or align_corners")
        d.update(size=ints(ins[1]), align_corners=int(o.AlignCorners()))
    elif name == "DEPTH_TO_SPACE":
        d["block"] = m.options(op, "DepthToSpaceOptions").BlockSize()
    return d


def load_tflite(path: str | os.PathLike, device: str | torch.device = "cpu") -> TFLiteNet:
    """:func:`read_tflite` as a ready module (eval mode, float32, on ``device``)."""
    desc, state = read_tflite(path)
    return _build(desc, state, device, str(path))


def _build(desc: dict, state: dict, device: str | torch.device, source: str) -> TFLiteNet:
    net = TFLiteNet(desc, source=source)
    try:
        net.load_state_dict({k: v.float() for k, v in state.items()})
    except RuntimeError as e:
        first = str(e).strip().splitlines()[-1].strip()
        raise InputError(f"{source}: weights do not fit the graph ({first})") from None
    return net.to(device).eval()


def save_converted(
    desc: dict[str, Any], state: dict[str, torch.Tensor], path: str | os.PathLike
) -> None:
    """Write a conversion as ``{"graph": desc, "state_dict": ...}``, atomically: float16 where
    that is lossless (these networks' weights were float16), float32 otherwise; a weight that is
    mostly zeros (the detector's sparse ones) as ``{"shape", "mask", "values"}`` (the non-zero
    pattern as packed bits, then the non-zero values in order)."""
    packed: dict[str, Any] = {}
    for k, v in state.items():
        h = v.half()
        v = h if torch.equal(h.float(), v) else v.float()
        nonzero = v.flatten() != 0
        if nonzero.numel() >= 64 and nonzero.float().mean() < 0.75:
            pad = torch.zeros(-nonzero.numel() % 8, dtype=torch.bool)
            bits = torch.cat([nonzero, pad]).view(-1, 8).to(torch.uint8)
            mask = (bits << torch.arange(7, -1, -1, dtype=torch.uint8)).sum(1, dtype=torch.uint8)
            v = {"shape": list(v.shape), "mask": mask, "values": v.flatten()[nonzero]}
        packed[k] = v
    tmp = Path(f"{path}.tmp")
    torch.save({"graph": desc, "state_dict": packed}, tmp)
    os.replace(tmp, path)


def _unpack(key: str, v: Any, source: str) -> torch.Tensor:
    """A weight of :func:`save_converted`'s file as a dense tensor (shapes checked)."""
    if isinstance(v, torch.Tensor):
        return v
    if not (isinstance(v, dict) and {"shape", "mask", "values"} <= set(v)):
        raise InputError(f"{source}: weight {key!r} is neither a tensor nor a packed tensor")
    n = 1
    for s in v["shape"]:
        n *= int(s)
    mask, values = v["mask"], v["values"]
    if mask.dtype != torch.uint8 or mask.numel() != -(-n // 8):
        raise InputError(f"{source}: weight {key!r}: mask of {mask.numel()} bytes for {n} values")
    bits = (mask[:, None] >> torch.arange(7, -1, -1, dtype=torch.uint8)) & 1
    nonzero = bits.flatten()[:n].bool()
    if int(nonzero.sum()) != values.numel():
        raise InputError(f"{source}: weight {key!r}: {values.numel()} values for its mask")
    dense = torch.zeros(n, dtype=values.dtype)
    dense[nonzero] = values
    return dense.view(v["shape"])


def load_converted(path: str | os.PathLike, device: str | torch.device = "cpu") -> TFLiteNet:
    """A module from a file of :func:`save_converted` (read without running code from it).

    Raises:
        ValueError: not such a file (naming it and what is wrong).
    """
    blob = torch_load(path)
    if not isinstance(blob, dict) or not {"graph", "state_dict"} <= set(blob):
        raise InputError(f"{path}: not a converted TFLite graph (no 'graph' and 'state_dict')")
    check_description(blob["graph"], str(path))
    state = {k: _unpack(k, v, str(path)) for k, v in blob["state_dict"].items()}
    return _build(blob["graph"], state, device, str(path))
