"""Tasks: the one place where a batch meets the model and the loss.

Each task is a :class:`~.base.Task` subclass in its own module (:mod:`.lifting`,
:mod:`.deeppose`, :mod:`.heatmap`; :mod:`.topdown` holds what the 2D tasks share), registered
by name in :mod:`.registry`. Importing this package imports neither task modules nor OpenCV.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import CAPABILITIES, Field, Task, check_batch, eval_mode, unwrap
from .registry import (
    UnknownTaskError,
    get_task,
    register_task,
    require_capability,
    task_names,
    tasks_with,
)

if TYPE_CHECKING:
    from torch import nn

    from ..config import Config

__all__ = [
    "CAPABILITIES",
    "Field",
    "Task",
    "UnknownTaskError",
    "build_model",
    "build_task",
    "check_batch",
    "eval_mode",
    "get_task",
    "register_task",
    "require_capability",
    "task_names",
    "tasks_with",
    "unwrap",
]


def build_model(cfg: Config) -> nn.Module:
    """The model of ``cfg.task`` from the ``model`` section."""
    return get_task(cfg.task).build_model(cfg)


def build_task(cfg: Config, model: nn.Module | None = None) -> Task:
    """The task of ``cfg.task`` around ``model`` (default: a fresh :func:`build_model`)."""
    cls = get_task(cfg.task)
    return cls(model if model is not None else cls.build_model(cfg), cfg)
