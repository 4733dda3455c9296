"""``tensorpose export``: a 2D training checkpoint -> an ONNX file, checked with onnxruntime.

Check the checkpoint (a task that can be exported) and the output (never the checkpoint), write
the file (:func:`tensorpose.models.onnx.export_onnx`) into a staging folder, run it next to
PyTorch (:func:`tensorpose.models.onnx.check_onnx`), then move it into place.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..inference import load_model
from ..io.atomic import OutputFolder, check_output_file, check_outside_inputs
from ..models.onnx import MIN_OPSET, ExportModule, check_onnx, check_opset, export_onnx
from ..tasks import tasks_with

__all__ = ["export_checkpoint", "summary"]


def export_checkpoint(
    checkpoint: str | Path,
    out: str | Path | None = None,
    with_decoding: bool = False,
    opset: int = MIN_OPSET,
    overwrite: bool = False,
) -> dict:
    """Export a training checkpoint of a 2D task to ONNX and check it against PyTorch.

    Args:
        checkpoint: a ``checkpoint.pt``/``best.pt`` of a ``heatmap``, ``deeppose`` or
            ``centernet`` run (loaded with :func:`tensorpose.inference.load_model`, on the CPU).
        out: the ``.onnx`` file (default: next to the checkpoint, same stem).
        with_decoding: put the task's decoding in the graph (keypoints in input pixels).
        opset: ONNX opset (at least 18).
        overwrite: replace an existing ``out`` file (never the checkpoint itself, never a
            folder, device, FIFO or socket: those are refused).

    Returns:
        ``path``, ``task``, ``decoding``, ``input_shape`` ``(C, H, W)``, ``outputs`` (names),
        ``max_error`` (largest absolute difference of onnxruntime vs PyTorch, batches 1 and 3).

    Raises:
        ValueError: a checkpoint of a task that is not exported (lifting), naming the file.
    """
    check_opset(opset)
    path = Path(out) if out is not None else Path(checkpoint).with_suffix(".onnx")
    check_outside_inputs(path, [checkpoint])  # the output is one file, beside the checkpoint
    check_output_file(out if out is not None else path, overwrite)  # a file, nothing else
    task, model, cfg, _ = load_model(checkpoint, "cpu")
    if "export" not in task.capabilities:
        raise InputError(
            f"{checkpoint}: export supports {', '.join(sorted(tasks_with('export')))} checkpoints, "
            f"not {cfg.task!r}"
        )
    H, W = (int(v) for v in cfg.data.input_size)
    shape = (3, H, W)
    decoding = task.export_decoding if with_decoding else None
    kwargs: dict = {}
    if decoding == "heatmap":
        kwargs["method"] = cfg.model.decode
    elif decoding == "centernet":
        kwargs.update(k=cfg.model.top_k, joint_threshold=cfg.model.joint_threshold)
    with OutputFolder(path.parent, [path.name], overwrite=overwrite) as outputs:
        export_onnx(model, outputs.path(path.name), shape, decoding, opset, **kwargs)
        error = check_onnx(outputs.path(path.name), model, shape, (1, 3), decoding, **kwargs)
        outputs.commit()
    names = ExportModule(model, shape, decoding, **kwargs).output_names
    return {"path": path, "task": cfg.task, "decoding": decoding, "input_shape": shape,
            "outputs": list(names), "max_error": error}  # fmt: skip


def summary(r: dict) -> list[str]:
    """The lines ``tensorpose export`` prints."""
    C, H, W = r["input_shape"]
    return [
        f"wrote {r['path']}: {r['task']} model, decoding {r['decoding'] or 'none'}, input "
        f"images (B, {C}, {H}, {W}) with a dynamic batch B, outputs {', '.join(r['outputs'])}",
        f"onnxruntime vs PyTorch (batches 1 and 3): max abs error {r['max_error']:.2e}",
    ]
