"""Atomic checkpoint writes: the byte count before writing (a full disk is refused up front), a
temporary file fsynced and moved over the target, and the clean-up of temporary files that an
interrupted save left behind."""

from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

__all__ = ["clean_temp_files", "save_atomic", "write_text_atomic"]


_NO_SPACE = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


def save_atomic(path: Path, payload: dict) -> None:
    """``torch.save(payload)`` to ``path`` atomically: the bytes are counted first (nothing is
    written when the folder has less free space), then a temporary file ``.NAME.XXXXXXXX.tmp``
    in the same folder is written, fsynced and moved over ``path``; on any failure the previous
    file is left intact and the temporary file removed (see
    :func:`~tensorpose.train.checkpoint.save_checkpoint`)."""
    size = _Sink()
    torch.save(payload, size)  # serialised once to count the bytes (tensor data is not copied)
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free
    if free < size.bytes:
        raise _no_space(path, size.bytes, free)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
        try:
            _Sink(fd).save(payload)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            _remove_quietly(Path(tmp))
        if isinstance(e, OSError) and e.errno in _NO_SPACE:
            raise _no_space(path, size.bytes, None) from None
        raise
    _fsync_dir(folder)


def write_text_atomic(path: Path, text: str) -> None:
    """``path.write_text(text)`` atomically: a temporary file ``.NAME.XXXXXXXX.tmp`` in the same
    folder, fsynced and moved over ``path`` (a reader sees the old file or the new one, never a
    part); on any failure the previous file is left intact and the temporary file removed."""
    path = Path(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if tmp is not None:
            _remove_quietly(Path(tmp))
        raise
    _fsync_dir(path.parent)


class _Sink:
    """A file for ``torch.save``: counts the bytes, and writes them to ``fd`` when given. An
    error while writing (e.g. ENOSPC) is re-raised as itself, not as the zip writer's cryptic
    RuntimeError."""

    def __init__(self, fd: int | None = None) -> None:
        self.fd, self.bytes, self.error = fd, 0, None

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        try:
            done = 0
            while self.fd is not None and done < len(view):
                done += os.write(self.fd, view[done:])
        except BaseException as e:
            self.error = e
            raise
        self.bytes += len(view)
        return len(view)

    def flush(self) -> None:
        pass

    def save(self, payload: dict) -> None:
        try:
            torch.save(payload, self)
        except BaseException:
            if self.error is not None:
                raise self.error from None
            raise


def _remove_quietly(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:  # pragma: no cover - the original error matters more
        pass


def _no_space(path: Path, needed: int, free: int | None) -> OSError:
    if free is None:
        try:
            free = shutil.disk_usage(path.parent).free
        except OSError:  # pragma: no cover
            free = -1
    kept = f"; the previous {path.name} is unchanged" if path.exists() else ""
    return OSError(
        errno.ENOSPC,
        f"no space to save {path.name} in {path.parent}: needs {needed} bytes "
        f"({needed / 2**20:.1f} MiB), {free} free{kept}",
    )


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


_TEMP_NAME = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp")


def clean_temp_files(folder: str | Path, *, min_age_s: float = 0.0) -> list[Path]:
    """Remove the temporary files of interrupted :func:`save_checkpoint` calls from ``folder``
    (not its subfolders): files named ``.NAME.XXXXXXXX.tmp`` (8 random characters from
    ``a-z0-9_``). Call it when a run starts, from the one process that writes checkpoints.

    Args:
        folder: a run folder; a missing one holds nothing to remove.
        min_age_s: keep files modified less than this many seconds ago (a save still running
            in another process).

    Returns:
        the removed files, sorted.

    Raises:
        ValueError: ``folder`` exists but is not a directory.
    """
    folder = Path(folder)
    if not folder.exists():
        return []
    if not folder.is_dir():
        raise ValueError(f"clean_temp_files: folder {str(folder)!r} is not a directory")
    now, removed = time.time(), []
    for entry in folder.iterdir():
        if not _TEMP_NAME.fullmatch(entry.name):
            continue
        try:
            st = entry.lstat()
            if not (os.path.isfile(entry) or os.path.islink(entry)):
                continue
            if min_age_s > 0 and now - st.st_mtime < min_age_s:
                continue
            entry.unlink()
        except FileNotFoundError:  # removed meanwhile
            continue
        removed.append(entry)
    return sorted(removed)
