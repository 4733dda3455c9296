"""Trained models back from checkpoints: :func:`load_model` rebuilds the task and its model,
:func:`evaluate` scores a checkpoint through the task's own data code."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .config import Config, config_from_dict, config_to_dict
from .errors import InputError
from .tasks import Task, get_task
from .train.checkpoint import CheckpointError, load_checkpoint, load_weights, model_config_mismatch
from .train.distributed import resolve_device

__all__ = ["evaluate", "load_model"]


def load_model(
    checkpoint: str | Path, device: str | torch.device = "auto", model_config: dict | None = None
) -> tuple[Task, nn.Module, Config, dict]:
    """Rebuild the task and model stored in a checkpoint.

    Args:
        checkpoint: a ``checkpoint.pt``/``best.pt`` written by training.
        device: ``auto`` (CUDA when available), ``cpu``, ``cuda``, ...
        model_config: if given (a ``model`` section dict), it must equal the checkpoint's;
            otherwise :class:`~tensorpose.train.checkpoint.CheckpointError` lists the
            differing keys.

    Returns:
        ``(task, model in eval mode on device, the run's Config, extra dict)``; the task holds
        the model and what the checkpoint stored for it (e.g. the lifting mean pose).
    """
    payload = load_checkpoint(checkpoint)
    try:
        cfg = config_from_dict(payload["config"])
    except ValueError as e:
        raise CheckpointError(f"{checkpoint}: stored config is not valid here: {e}") from None
    stored = config_to_dict(cfg)["model"]
    if model_config is not None:
        diff = model_config_mismatch(stored, model_config)
        if diff:
            raise CheckpointError(
                f"{checkpoint}: checkpoint was trained with another model config: "
                + "; ".join(diff)
            )
    cls = get_task(cfg.task)
    model = cls.build_model(cfg)
    try:
        load_weights(model, payload["model"])
    except CheckpointError as e:
        raise CheckpointError(
            f"{checkpoint}: weights do not fit model config {stored}: {e}"
        ) from None
    model = model.to(resolve_device(device)).eval()
    task = cls(model, cfg)
    extra = payload.get("extra", {})
    task.restore(extra)
    return task, model, cfg, extra


def evaluate(
    checkpoint: str | Path,
    device: str | torch.device = "auto",
    model_config: dict | None = None,
    return_predictions: bool = False,
    flip: bool = False,
    **options: Any,
) -> dict[str, Any]:
    """Evaluate a checkpoint of any task on the data of :meth:`Task.eval_data`.

    Args:
        options: the task's evaluation options (lifting: ``bvh`` files and their ``mapping``;
            2D: ``annotations``); default: the run's validation data.
        return_predictions: add ``predictions`` (:meth:`Task.predict`) and the evaluated
            ``data``.
        flip: test-time flip averaging, for tasks whose ``evaluate``/``predict`` take
            ``flip`` (lifting); ``flip`` is then reported as evaluated.

    Returns:
        ``task`` (its name), the metrics of :meth:`Task.evaluate` and what they cover
        (:meth:`Task.eval_info`).

    Raises:
        ValueError: an option the task does not take (named, with the ones it takes).
    """
    dev = resolve_device(device)
    task, _, cfg, _ = load_model(checkpoint, dev, model_config)
    known = [p for p in inspect.signature(task.eval_data).parameters if p != "device"]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise InputError(
            f"task {cfg.task!r} takes the evaluation options {known or 'none'}, got {unknown}"
        )
    kw = {}
    if flip:
        if "flip" not in inspect.signature(task.evaluate).parameters:
            raise InputError(f"task {cfg.task!r} has no test-time flip evaluation")
        kw["flip"] = True
    data = task.eval_data(dev, **options)
    out: dict[str, Any] = {"task": cfg.task, **task.evaluate(data, **kw), **task.eval_info(data)}
    if flip:
        out["flip"] = True
    if return_predictions:
        out["predictions"] = task.predict(data, **kw)
        out["data"] = data
    return out
