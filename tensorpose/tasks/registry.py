"""The one place that maps a task name to its code.

A task is registered by name with the ``"module:Class"`` path of its :class:`~.base.Task`
subclass; the module is imported only when the task is used, so importing the registry (and
:mod:`tensorpose.config`, which it tells how to find a task's config sections through
:func:`tensorpose.config.set_task_lookup`) stays light. Adding a
task is one module and one line in :data:`TASKS` (or, from outside the package, one call to
:func:`register_task`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..config import ConfigError, set_task_lookup
from ..errors import InputError
from .base import CAPABILITIES

if TYPE_CHECKING:
    from .base import Task

__all__ = [
    "TASKS",
    "UnknownTaskError",
    "get_task",
    "register_task",
    "require_capability",
    "task_names",
    "tasks_with",
]

TASKS: dict[str, str | type] = {
    "lift": "tensorpose.tasks.lifting:LiftingTask",
    "heatmap": "tensorpose.tasks.heatmap:HeatmapTask",
    "deeppose": "tensorpose.tasks.deeppose:DeepPoseTask",
    "centernet": "tensorpose.tasks.centernet:CenterNetTask",
}
"""Task name -> ``"module:Class"`` (imported on first use) or the class itself. The order is
the order in which :func:`require_capability` messages list tasks."""


class UnknownTaskError(InputError):
    """A task name that is not registered; the message lists the known ones."""


def task_names() -> list[str]:
    """The registered task names, sorted."""
    return sorted(TASKS)


def register_task(name: str, task: str | type[Task]) -> None:
    """Register ``task`` (a :class:`~.base.Task` subclass or its ``"module:Class"`` path) as
    ``name``; a name already taken by another task raises ``ValueError``."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"task name must be an identifier, got {name!r}")
    if not isinstance(task, (str, type)):
        raise TypeError(f"task must be a Task subclass or 'module:Class', got {task!r}")
    if isinstance(task, str) and task.count(":") != 1:
        raise ValueError(f"task path must look like 'package.module:Class', got {task!r}")
    if TASKS.get(name, task) != task:
        raise ValueError(f"task {name!r} is already registered as {TASKS[name]!r}")
    TASKS[name] = task


def get_task(name: str) -> type[Task]:
    """The :class:`~.base.Task` subclass registered as ``name`` (imports its module).

    Raises:
        UnknownTaskError: ``name`` is not registered (one line naming the known tasks).
    """
    entry = TASKS.get(name) if isinstance(name, str) else None
    if entry is None:
        raise UnknownTaskError(f"unknown task {name!r}; known tasks: {', '.join(task_names())}")
    if isinstance(entry, str):
        module, _, cls = entry.partition(":")
        entry = getattr(importlib.import_module(module), cls)
    return entry


def tasks_with(capability: str) -> list[str]:
    """The registered task names whose class declares ``capability`` (registry order; imports
    every registered task's module)."""
    _check_capability(capability)
    return [name for name in TASKS if capability in get_task(name).capabilities]


def require_capability(
    task: str | type[Task], capability: str, what: str, noun: str = "config"
) -> type[Task]:
    """The task class of ``task`` (a registered name or a :class:`~.base.Task` subclass) when
    it declares ``capability`` (one of :data:`~.base.CAPABILITIES`); otherwise raise.

    Args:
        task: a task name (e.g. ``cfg.task``) or class.
        capability: ``"lift"``, ``"predict"``, ``"export"`` or ``"profile_data"``.
        what: who asks, the start of the message (e.g. ``"profile_config"`` or
            ``"runs/x/checkpoint.pt: predict"``).
        noun: what ``task`` came from, for the message (``config``, ``checkpoint``).

    Raises:
        ValueError: one line, ``"{what} needs a heatmap or deeppose {noun}, got 'lift'"``
            (the tasks that declare ``capability``, in registry order).
        UnknownTaskError: ``task`` is a name that is not registered.
    """
    _check_capability(capability)
    cls = get_task(task) if isinstance(task, str) else task
    if capability in cls.capabilities:
        return cls
    names = tasks_with(capability)
    able = " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
    got = task if isinstance(task, str) else cls.__name__
    raise InputError(f"{what} needs a {able or 'no'} {noun}, got {got!r}")


def _check_capability(capability: str) -> None:
    if capability not in CAPABILITIES:
        raise ValueError(
            f"capability must be one of {', '.join(sorted(CAPABILITIES))}, got {capability!r}"
        )


def config_lookup(name: str) -> type[Task]:
    """:func:`get_task` for :mod:`tensorpose.config`: an unknown name is a ``ConfigError``."""
    try:
        return get_task(name)
    except UnknownTaskError as e:
        raise ConfigError(str(e)) from None


set_task_lookup(config_lookup, task_names)
