"""ONNX files of the 2D models, optionally with the decoding inside the graph.

:func:`export_onnx` writes a model with a dynamic batch axis, either the network alone or the
network followed by its decoder, so that the ONNX graph returns keypoints in input pixels:

- ``"heatmap"``: :func:`tensorpose.ops.heatmap.decode_heatmaps` (arg-max plus the quarter
  offset by default, or ``method="subpixel"``); outputs ``keypoints (B, K, 2)`` and
  ``scores (B, K)``.
- ``"centernet"``: sigmoid of the centre and joint maps, then
  :func:`tensorpose.ops.heatmap.centernet_decode` (3x3 max-pool peaks, top-k, gathers, joint
  snapping); outputs ``scores (B, k)``, ``boxes (B, k, 4)``, ``centers (B, k, 2)``,
  ``keypoints (B, k, K, 2)``, ``keypoint_scores (B, k, K)``.
- ``"regression"``: DeepPose's normalised coordinates mapped back to pixels; outputs
  ``keypoints (B, K, 2)``.

:func:`check_onnx` runs the file with onnxruntime next to the PyTorch model and returns the
largest absolute difference of any output.

The exporter is torch's ``torch.export``-based one (``torch.onnx.export(..., dynamo=True)``):
it traces the decoders as they run under ``torch.compile``, which is what they are written
for (the legacy TorchScript tracer records the CPU arg-max of ``decode_heatmaps``, a numpy
call, as a constant: wrong keypoints for every other input). Its lowest implemented opset is
18; asking torch for 17 makes it down-convert with the ONNX version converter, which fails on
these graphs (reductions whose axes are inputs) and leaves the file at 18, so the opset is
checked and must be at least 18.

Needs the ``onnx`` extra (``onnx``, ``onnxscript``, ``onnxruntime``).
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from pathlib import Path

import torch
from torch import nn

from ..errors import InputError
from ..ops.heatmap import centernet_decode, decode_heatmaps
from .deeppose import denormalize_coords

__all__ = ["DECODINGS", "MIN_OPSET", "ExportModule", "check_onnx", "check_opset", "export_onnx"]

DECODINGS = (None, "heatmap", "centernet", "regression")
MIN_OPSET = 18
CENTERNET_OUTPUTS = ("scores", "boxes", "centers", "keypoints", "keypoint_scores")


def _input_shape(input_shape) -> tuple[int, int, int]:
    try:
        C, H, W = (int(v) for v in input_shape)
    except (TypeError, ValueError):
        raise ValueError(f"input_shape must be (C, H, W), got {input_shape!r}") from None
    if min(C, H, W) < 1:
        raise ValueError(f"input_shape must be positive (C, H, W), got {input_shape!r}")
    return C, H, W


def _example(batch: int, input_shape: tuple[int, int, int], seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(batch, *input_shape, generator=g) * 2 - 1


class ExportModule(nn.Module):
    """``model`` followed by a decoder, returning a tuple of tensors (the exported graph).

    Args:
        model: the network, ``(B, C, H, W) -> heatmaps | dict | coordinates``.
        input_shape: ``(C, H, W)`` of its input (the decoders' strides come from it).
        decoding: one of :data:`DECODINGS`.
        **decode_kwargs: ``method``, ``blur_sigma`` (heatmap); ``k``, ``joint_threshold``
            (centernet); ``stride`` (both: input pixels per map pixel; default the ratio of
            the input to the maps, which must be the same along both axes).
    """

    def __init__(
        self,
        model: nn.Module,
        input_shape: tuple[int, int, int],
        decoding: str | None = None,
        **decode_kwargs,
    ) -> None:
        super().__init__()
        if decoding not in DECODINGS:
            raise ValueError(f"decoding must be one of {DECODINGS}, got {decoding!r}")
        allowed = {
            None: set(),
            "heatmap": {"method", "blur_sigma", "stride"},
            "centernet": {"k", "joint_threshold", "stride"},
            "regression": set(),
        }[decoding]
        unknown = set(decode_kwargs) - allowed
        if unknown:
            raise ValueError(
                f"unknown decode_kwargs {sorted(unknown)} for decoding={decoding!r} "
                f"(allowed: {sorted(allowed)})"
            )
        self.model = model
        self.input_shape = _input_shape(input_shape)
        self.decoding = decoding
        self.decode_kwargs = dict(decode_kwargs)
        with torch.no_grad():
            was = model.training
            model.eval()
            probe = model(_example(1, self.input_shape, 0))
            model.train(was)
        H, W = self.input_shape[1:]
        if decoding == "centernet":
            if not isinstance(probe, dict) or set(probe) != set(_CENTERNET_HEADS):
                raise ValueError(
                    f"decoding='centernet' needs a model returning a dict with "
                    f"{sorted(_CENTERNET_HEADS)}, got {type(probe).__name__}"
                )
            probe = probe["heatmap"]
        if decoding in ("heatmap", "centernet"):
            if not isinstance(probe, torch.Tensor) or probe.dim() != 4:
                raise ValueError(
                    f"decoding={decoding!r} needs (B, K, h, w) maps from the model, got "
                    f"{getattr(probe, 'shape', type(probe).__name__)}"
                )
            h, w = probe.shape[-2:]
            stride = self.decode_kwargs.pop("stride", None)
            if stride is None:
                if W * h != H * w:
                    raise ValueError(
                        f"input_shape {self.input_shape} gives {h}x{w} maps: strides {H / h:g} "
                        f"(y) and {W / w:g} (x) differ; use sides that are multiples of the "
                        f"network's stride or pass stride="
                    )
                stride = W / w
            self.stride = (float(stride), float(stride))  # input pixels per map pixel (x, y)
        if decoding == "regression" and (
            not isinstance(probe, torch.Tensor) or probe.dim() != 3 or probe.shape[-1] != 2
        ):
            raise ValueError(
                f"decoding='regression' needs (B, K, 2) coordinates from the model, got "
                f"{getattr(probe, 'shape', type(probe).__name__)}"
            )
        self.output_names = self._output_names(probe)

    def _output_names(self, probe) -> tuple[str, ...]:
        if self.decoding == "heatmap":
            return ("keypoints", "scores")
        if self.decoding == "centernet":
            return CENTERNET_OUTPUTS
        if self.decoding == "regression":
            return ("keypoints",)
        if isinstance(probe, dict):
            return tuple(probe)
        if isinstance(probe, torch.Tensor):
            return ("output",)
        return tuple(f"output_{i}" for i in range(len(probe)))

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.model(images)
        if self.decoding is None:
            if isinstance(out, dict):
                return tuple(out[name] for name in self.output_names)
            return (out,) if isinstance(out, torch.Tensor) else tuple(out)
        if self.decoding == "heatmap":
            kw = {"method": "quarter", **self.decode_kwargs}
            return decode_heatmaps(out, stride=self.stride, **kw)
        if self.decoding == "regression":
            return (denormalize_coords(out, self.input_shape[1:]),)
        res = centernet_decode(
            out["heatmap"].sigmoid(),
            out["size"],
            out["offset"],
            out["joint_offset"],
            out["joint_heatmaps"].sigmoid(),
            out["joint_sub_offset"],
            **self.decode_kwargs,
        )
        sx, sy = self.stride
        scale = torch.tensor([sx, sy], dtype=res["keypoints"].dtype, device=images.device)
        res["boxes"] = res["boxes"] * scale.repeat(2)
        res["centers"] = res["centers"] * scale
        res["keypoints"] = res["keypoints"] * scale
        return tuple(res[name] for name in CENTERNET_OUTPUTS)


_CENTERNET_HEADS = (
    "heatmap",
    "size",
    "offset",
    "joint_offset",
    "joint_heatmaps",
    "joint_sub_offset",
)


@contextlib.contextmanager
def _quiet():
    """The exporter's progress lines and known warnings, silenced (errors still raise)."""
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch._dynamo", "torch.export")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stdout(io.StringIO()),
        ):
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def check_opset(opset: int) -> None:
    """Raises ValueError naming ``--opset`` unless torch's exporter implements ``opset``."""
    from torch.onnx._constants import ONNX_MAX_OPSET

    if (
        isinstance(opset, bool)
        or not isinstance(opset, int)
        or not (MIN_OPSET <= opset <= ONNX_MAX_OPSET)
    ):
        raise InputError(
            f"--opset must be an integer in {MIN_OPSET}..{ONNX_MAX_OPSET} (the opsets torch's ONNX "
            f"exporter implements), got {opset!r}"
        )


def export_onnx(
    model: nn.Module,
    path: str | Path,
    input_shape: tuple[int, int, int],
    decoding: str | None = None,
    opset: int = MIN_OPSET,
    **decode_kwargs,
) -> Path:
    """Export ``model`` (optionally with its decoder) to an ONNX file with a dynamic batch axis.

    The model is exported in eval mode (its mode is restored afterwards), traced with an
    example batch of 2 (so batch 1 is not specialised). The graph's input is ``images
    (B, C, H, W)`` float32; outputs are named (see the module docstring).

    Args:
        model: a 2D model (``heatmap_pose_net``, ``centernet_pose_net``, a DeepPose regressor,
            or any module with a tensor input).
        path: the ``.onnx`` file to write (parent folders are created).
        input_shape: ``(C, H, W)``; H and W are fixed in the graph.
        decoding: ``None`` (the network alone), ``"heatmap"``, ``"centernet"`` or
            ``"regression"``.
        opset: ONNX opset, at least 18.
        **decode_kwargs: passed to the decoder (``method``, ``blur_sigma``; ``k``,
            ``joint_threshold``; ``stride``, see :class:`ExportModule`).

    Returns:
        the written path.

    Raises:
        ValueError: bad decoding, decode_kwargs, input_shape or opset, or a model whose
            output does not fit the decoding.
        RuntimeError: the exporter failed or wrote another opset (the message says why).
    """
    check_opset(opset)
    try:
        import onnx
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("export_onnx needs the onnx extra: pip install 'tensorpose[onnx]'") from e
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    was = model.training
    model.eval()
    try:
        wrapper = ExportModule(model, input_shape, decoding, **decode_kwargs).eval()
        x = _example(2, wrapper.input_shape, 0)
        with _quiet(), torch.no_grad():
            torch.onnx.export(
                wrapper,
                (x,),
                str(path),
                dynamo=True,
                opset_version=opset,
                input_names=["images"],
                output_names=list(wrapper.output_names),
                dynamic_shapes={"images": {0: torch.export.Dim("batch")}},
                verbose=False,
            )
    finally:
        model.train(was)
    written = {
        o.domain: o.version for o in onnx.load(str(path), load_external_data=False).opset_import
    }
    if written.get("", written.get("ai.onnx")) != opset:
        raise RuntimeError(
            f"{path}: the exporter wrote opset {written.get('', written.get('ai.onnx'))}, "
            f"not the requested {opset}"
        )
    return path


def check_onnx(
    path: str | Path,
    model: nn.Module,
    input_shape: tuple[int, int, int],
    batch_sizes: tuple[int, ...] = (1, 3),
    decoding: str | None = None,
    seed: int = 0,
    **decode_kwargs,
) -> float:
    """Run an exported file with onnxruntime (CPU) next to the PyTorch model.

    Args:
        path: the ``.onnx`` file.
        model: the PyTorch model it was exported from (run in eval mode, restored after).
        input_shape: ``(C, H, W)``.
        batch_sizes: batch sizes to run (include one other than the export's 2).
        decoding, **decode_kwargs: as given to :func:`export_onnx`.
        seed: of the random inputs (uniform in ``[-1, 1]``).

    Returns:
        the largest absolute difference over every output and batch size.

    Raises:
        ValueError: outputs differ in number or shape.
    """
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    was = model.training
    model.eval()
    try:
        wrapper = ExportModule(model, input_shape, decoding, **decode_kwargs).eval()
        worst = 0.0
        for i, b in enumerate(batch_sizes):
            x = _example(int(b), wrapper.input_shape, seed + 1 + i)
            got = sess.run(None, {name: x.numpy()})
            with torch.no_grad():
                ref = wrapper(x)
            if len(got) != len(ref):
                raise ValueError(f"{path}: {len(got)} ONNX outputs, PyTorch has {len(ref)}")
            for out_name, g, r in zip(wrapper.output_names, got, ref, strict=True):
                if tuple(g.shape) != tuple(r.shape):
                    raise ValueError(
                        f"{path}: output {out_name!r} has shape {tuple(g.shape)} in ONNX, "
                        f"{tuple(r.shape)} in PyTorch (batch {b})"
                    )
                if g.size:
                    diff = (torch.from_numpy(g).double() - r.double()).abs().max()
                    worst = max(worst, float(diff))
    finally:
        model.train(was)
    return worst
