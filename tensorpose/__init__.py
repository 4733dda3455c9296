"""tensorpose: human pose estimation whose hot path is tensor code on the device.

Importing the package is light (no torch): :class:`Skeleton`, :func:`get_skeleton` and
:func:`skeleton_names` are imported from :mod:`tensorpose.skeleton` on first use, so that
``tensorpose --help`` and argument errors answer without importing torch. The task lookup is
handed to :mod:`tensorpose.config` here, before any config can be built; the registry itself
(:mod:`tensorpose.tasks.registry`) is imported the first time a task is looked up. Importing
changes nothing process-wide: the thread policy's environment is set by the ``tensorpose``
command, or by an explicit :func:`tensorpose.threads.prepare_environment` call before torch is
loaded.
"""

from __future__ import annotations

import sys as _sys


def _started_as_command() -> bool:
    """Whether this import is the ``tensorpose`` command starting: ``python -m tensorpose`` or
    the ``tensorpose`` console script (a library import is neither)."""
    argv = getattr(_sys, "orig_argv", [])[1:]
    if "-m" in argv:
        return argv[argv.index("-m") + 1 :][:1] == ["tensorpose"]
    return bool(argv) and argv[0].replace("\\", "/").rsplit("/", 1)[-1] == "tensorpose"


try:  # the command's start: a Ctrl-C while the package loads is one line and 130
    from typing import TYPE_CHECKING, Any

    from . import config as _config
except KeyboardInterrupt:
    if not _started_as_command():
        raise
    print("tensorpose: interrupted (Ctrl-C) before the command started; nothing was written",
          file=_sys.stderr)  # fmt: skip
    raise SystemExit(130) from None

if TYPE_CHECKING:
    from .skeleton import Skeleton, get_skeleton, skeleton_names

__version__ = "0.1.0"
__all__ = ["Skeleton", "__version__", "get_skeleton", "skeleton_names"]
_LAZY = {"Skeleton", "get_skeleton", "skeleton_names"}


def __getattr__(name: str) -> Any:
    """``tensorpose.Skeleton`` and friends, imported (with torch) on first use."""
    if name in _LAZY:
        from . import skeleton

        value = getattr(skeleton, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tensorpose' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


def _task_lookup(name: str) -> Any:
    from .tasks.registry import config_lookup

    return config_lookup(name)


def _task_names() -> list[str]:
    from .tasks.registry import task_names

    return task_names()


_config.set_task_lookup(_task_lookup, _task_names)
