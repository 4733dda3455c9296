"""Run folders: a fresh run never touches an existing run folder, and a run name cannot leave
``train.out_dir``. The folder's lock (:class:`tensorpose.io.atomic.FolderLock`, the lock of
every command's output folder) keeps a second process out of a folder in use.
"""

from __future__ import annotations

from pathlib import Path

from ..config import check_run_name
from ..errors import InputError

__all__ = ["RunFolderError", "check_run_name", "fresh_name"]


class RunFolderError(InputError):
    """The run folder cannot be used; the message names it and the way out."""


def fresh_name(parent: Path, name: str) -> str:
    """``name`` if ``parent/name`` does not exist, else the first free ``name_2``, ``name_3``..."""
    if not (parent / name).exists():
        return name
    k = 2
    while (parent / f"{name}_{k}").exists():
        k += 1
    return f"{name}_{k}"
