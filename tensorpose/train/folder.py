"""Run folders: a fresh run never touches an existing run folder, a run name cannot leave
``train.out_dir``, and a lock file (holding the process id) keeps a second process out of a
folder in use. A lock left by a process that no longer runs is taken over, saying so.
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

__all__ = ["LOCK_NAME", "RunFolderError", "RunLock", "check_run_name", "fresh_name"]

LOCK_NAME = ".lock"


class RunFolderError(ValueError):
    """The run folder cannot be used; the message names it and the way out."""


def check_run_name(name: str, key: str = "train.name") -> str:
    """``name`` if it is one folder name (no separators, not ``.``/``..``, not absolute).

    Raises:
        ValueError: naming ``key`` and the value.
    """
    bad = (
        not isinstance(name, str)
        or name in (".", "..")
        or "/" in name
        or "\\" in name
        or "\0" in name
        or Path(name).is_absolute()
        or any(ord(c) < 32 for c in name)
    )
    if bad:
        raise ValueError(
            f"{key} must be a single folder name inside the output folder (no '/', '..' or "
            f"absolute path), got {name!r}"
        )
    return name


def fresh_name(parent: Path, name: str) -> str:
    """``name`` if ``parent/name`` does not exist, else the first free ``name_2``, ``name_3``..."""
    if not (parent / name).exists():
        return name
    k = 2
    while (parent / f"{name}_{k}").exists():
        k += 1
    return f"{name}_{k}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, another user's
        return True
    return True


class RunLock:
    """``run_dir/.lock`` with ``pid host``, created atomically; released by :meth:`release`."""

    def __init__(self, run_dir: Path, say=print) -> None:
        self.path = Path(run_dir) / LOCK_NAME
        self.held = False
        self.say = say

    def acquire(self) -> RunLock:
        me = f"{os.getpid()} {socket.gethostname()}\n"
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                self._check_stale()
                continue
            with os.fdopen(fd, "w") as f:
                f.write(me)
            self.held = True
            return self
        raise RunFolderError(f"{self.path}: could not take the run folder's lock")

    def _check_stale(self) -> None:
        try:
            text = self.path.read_text().split()
        except FileNotFoundError:
            return
        pid = int(text[0]) if text and text[0].isdigit() else None
        host = text[1] if len(text) > 1 else socket.gethostname()
        if pid is not None and (host != socket.gethostname() or _alive(pid)):
            raise RunFolderError(
                f"run folder {self.path.parent} is in use by process {pid} on {host} (lock file "
                f"{self.path}); wait for it to finish, or remove the lock file if that process "
                "is gone"
            )
        self.say(
            f"run folder {self.path.parent}: taking over the stale lock of process "
            f"{pid if pid is not None else '?'} (no longer running)"
        )
        try:
            self.path.unlink()
        except OSError as e:
            if e.errno != errno.ENOENT:
                raise

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False
