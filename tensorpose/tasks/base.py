"""The task protocol: everything problem-specific around a model, so that the trainer is a loop.

A task is an ``nn.Module`` holding ``model`` (the trainer may wrap it in DDP or
``torch.compile``) and, as class attributes, its config sections and batch contract:

- ``data_config`` / ``model_config``: the dataclasses of the ``data:`` and ``model:`` config
  sections (each may define ``validate(cfg)`` raising :class:`~tensorpose.config.ConfigError`);
- :meth:`Task.build_model`: the model from the config;
- :meth:`Task.setup`: the data (``train_batches`` for this rank, validation data);
- :meth:`Task.prepare`: a batch on the device -> model inputs and targets (on-device
  augmentation, normalisation, target generation), checked once against ``contract``;
- ``task(batch) -> {"loss", "pred", ...}``: one training step's outputs, all on the device
  (0-dim detached extras are averaged into the log);
- :meth:`Task.evaluate`: validation metrics as floats (read back once per validation), with
  ``best_metric`` naming the one that selects ``best.pt`` and whether lower or higher is better;
- :meth:`Task.predict`: predictions in eval mode (the previous train/eval mode is restored);
- :meth:`Task.picture_batch`, :meth:`Task.report`: what to picture and a printed summary;
- ``capabilities``: what the task's configs and checkpoints serve beyond training and
  evaluation (:data:`CAPABILITIES`); commands check them with
  :func:`tensorpose.tasks.require_capability`, never by task name.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

if TYPE_CHECKING:
    from ..config import Config

__all__ = ["CAPABILITIES", "Field", "Task", "check_batch", "eval_mode", "unwrap"]

CAPABILITIES = frozenset({"lift", "predict", "export", "profile_data"})
"""What a task may declare in ``Task.capabilities``: ``lift`` (its checkpoints lift 2D to 3D,
``tensorpose lift``), ``predict`` (its checkpoints find poses in images, ``tensorpose predict``),
``export`` (ONNX export of its checkpoints), ``profile_data`` (its configs' input pipeline can
be diagnosed, ``tensorpose profile-data``; the task defines :meth:`Task.profile_targets`)."""


def unwrap(model: nn.Module) -> nn.Module:
    """The module inside DistributedDataParallel (``.module``) and torch.compile
    (``._orig_mod``) wrappers."""
    while True:
        if hasattr(model, "_orig_mod"):
            model = model._orig_mod
        elif isinstance(model, nn.parallel.DistributedDataParallel):
            model = model.module
        else:
            return model


@contextlib.contextmanager
def eval_mode(module: nn.Module) -> Iterator[nn.Module]:
    """Run the enclosed code with ``module`` in eval mode (dropout off, BatchNorm statistics
    used, not updated), then give every submodule back its own previous mode (a partly frozen
    model stays partly frozen)."""
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        yield module
    finally:
        for m, training in modes:
            m.training = training


# ---------------------------------------------------------------------- batch contract
@dataclass(frozen=True)
class Field:
    """One entry of a batch contract: ``shape`` of named (``"B"``) or fixed (``3``) dims, and
    the accepted dtypes."""

    shape: tuple[str | int, ...]
    dtype: torch.dtype | tuple[torch.dtype, ...]


def check_batch(
    batch: Mapping[str, Any], contract: Mapping[str, Field], **sizes: int
) -> Mapping[str, Any]:
    """Check that ``batch`` holds every ``contract`` key as a tensor of the contracted rank,
    dtype and dims, all on one device. Named dims must agree across keys and with ``sizes``
    (e.g. ``J=17``). Reads shapes, dtypes and devices only: no host synchronisation.

    Returns:
        ``batch`` itself.

    Raises:
        ValueError, TypeError: naming the key, the expected and the actual shape or dtype.
    """
    dims: dict[str, int] = dict(sizes)
    device = None
    for key, f in contract.items():
        if key not in batch:
            raise ValueError(f"batch has no {key!r} (keys: {', '.join(sorted(batch))})")
        x = batch[key]
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"batch[{key!r}] must be a tensor, got {type(x).__name__}")
        want = str(tuple(f.shape)).replace("'", "")
        if x.dim() != len(f.shape):
            raise ValueError(f"batch[{key!r}] must have shape {want}, got {tuple(x.shape)}")
        for name, n in zip(f.shape, x.shape, strict=True):
            expected = dims.setdefault(name, n) if isinstance(name, str) else name
            if n != expected:
                shown = f"{name}={expected}" if isinstance(name, str) else str(expected)
                raise ValueError(
                    f"batch[{key!r}] must have shape {want} with {shown}, got {tuple(x.shape)}"
                )
        dtypes = f.dtype if isinstance(f.dtype, tuple) else (f.dtype,)
        if x.dtype not in dtypes:
            raise TypeError(f"batch[{key!r}] must have dtype {f.dtype}, got {x.dtype}")
        device = device or x.device
        if x.device != device:
            raise ValueError(f"batch[{key!r}] is on {x.device}, the batch on {device}")
    return batch


# ---------------------------------------------------------------------- the protocol
class Task(nn.Module):
    """Base class of every task (see the module docstring).

    Attributes set by :meth:`setup`: ``train_batches`` (an iterable of host or device batches
    for this rank with ``len``, and optionally ``set_epoch(epoch)``), ``generator`` (device RNG
    of on-device randomness, saved in checkpoints; ``None`` when the task draws none).
    """

    data_config: ClassVar[type]
    """Dataclass of the ``data:`` config section."""
    model_config: ClassVar[type]
    """Dataclass of the ``model:`` config section."""
    contract: ClassVar[dict[str, Field]] = {}
    """The batch :meth:`prepare` returns (the first key's first dim counts the samples)."""
    best_metric: ClassVar[tuple[str, str]] = ("val_loss", "min")
    """Validation metric for ``best.pt`` and whether lower (``min``) or higher is better."""
    metric_names: ClassVar[tuple[str, ...]] = ("val_loss", "train_loss")
    """The history-row metrics the task reports (what ``train.best_metric`` may name)."""
    capabilities: ClassVar[frozenset[str]] = frozenset()
    """What the task serves beyond training and evaluation, drawn from :data:`CAPABILITIES`."""
    export_decoding: ClassVar[str | None] = None
    """With ``export``: the decoding ``tensorpose export --with-decoding`` puts in the graph
    (one of :data:`tensorpose.models.onnx.DECODINGS`)."""

    def __init__(self, model: nn.Module, cfg: Config) -> None:
        super().__init__()
        self.model = model
        self.cfg = cfg
        self.channels_last = False
        self.generator: torch.Generator | None = None
        self.train_batches: Any = None

    # -- construction
    @classmethod
    def profile_targets(cls, cfg: Config) -> Callable[[dict], object]:
        """The target function the input-pipeline diagnosis times (``profile_data``
        capability): a collated batch of crops on the device -> the task's targets."""
        raise NotImplementedError(f"task {cls.__name__} has no input-pipeline targets")

    @classmethod
    def build_model(cls, cfg: Config) -> nn.Module:
        """The model described by ``cfg.model`` (and what it needs of ``cfg.data``)."""
        raise NotImplementedError

    @classmethod
    def run_name(cls, cfg: Config) -> str:
        """Default run folder name."""
        return cfg.task

    # -- data and step
    def setup(self, device: torch.device, rank: int = 0, world: int = 1) -> None:
        """Build the data: ``train_batches`` (this rank's share) and the validation data."""
        raise NotImplementedError

    def prepare(self, batch: dict) -> dict:
        """On-device work between the host-to-device copy and the forward pass; the result
        satisfies ``contract``."""
        return check_batch(batch, self.contract)

    def count(self, batch: dict) -> int:
        """Samples in a prepared batch (a host int from a shape: no synchronisation)."""
        return batch[next(iter(self.contract))].shape[0]

    # -- evaluation and prediction
    def evaluate(self, data: Any = None) -> dict[str, float]:
        """Metrics on ``data`` (default: the validation data of :meth:`setup`)."""
        raise NotImplementedError

    def eval_data(self, device: torch.device) -> Any:
        """Evaluation data on ``device`` for :func:`tensorpose.inference.evaluate`; subclasses
        may take keyword options (e.g. other files). Default: :meth:`setup`'s validation data
        (``None`` makes :meth:`evaluate` use it)."""
        self.setup(device)
        return None

    def eval_info(self, data: Any = None) -> dict[str, Any]:
        """What an evaluation covered (names, counts): reported next to the metrics."""
        return {}

    def predict(self, data: Any = None) -> Any:
        """Predictions on ``data`` in eval mode; the model's previous mode is restored."""
        raise NotImplementedError

    # -- checkpoints and reporting
    def extra(self) -> dict:
        """Task data kept in checkpoints next to the weights."""
        return {}

    def restore(self, extra: dict) -> None:
        """Take back what :meth:`extra` stored (after loading a checkpoint)."""

    def picture_batch(self) -> dict[str, Any] | None:
        """Training inputs to picture at the start of training (``augment.png``, drawn by the
        trainer with :func:`tensorpose.viz.draw.picture_grid`: a task draws nothing), or
        ``None``: ``images (N, H, W, 3)`` uint8 RGB, ``keypoints (N, P, K, 2)`` pixels,
        ``visibility (N, P, K)``, ``skeleton``; optional ``links``, ``captions``, ``columns``."""
        return None

    @classmethod
    def metrics_json(cls, metrics: dict[str, Any]) -> dict[str, Any]:
        """The JSON-friendly part of an evaluation (``metrics.json``, ``eval --json``)."""
        return {k: v for k, v in metrics.items() if isinstance(v, (int, float, str))}

    @classmethod
    def report(cls, metrics: dict[str, Any]) -> list[str]:
        """Printed lines summarising an evaluation."""
        return [f"  {k:<28s} {v:10.4g}" for k, v in metrics.items() if isinstance(v, float)]
