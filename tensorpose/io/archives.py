"""One file out of a package archive (an npm ``.tgz``, a wheel or ``.zip``), read into memory.

:func:`read_member` finds a member by its file name (in any folder of the archive: an npm
package keeps its files under ``package/``), checks it is a regular file no larger than the
limit, and returns its bytes. Nothing is extracted to disk and no path from the archive is
used as a path here, so a hostile archive (``../`` names, links, devices, a member larger
than it says) cannot write anywhere or read past the limit.

Example::

    data = read_member("mediapipe-pose-0.5.1675469404.tgz", "pose_landmark_heavy.tflite",
                       64 << 20)
"""

from __future__ import annotations

import os
import tarfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from ..errors import InputError
from .files import check_regular_file

__all__ = ["ARCHIVE_SUFFIXES", "is_archive", "read_member"]

ARCHIVE_SUFFIXES = (".tgz", ".tar.gz", ".tar", ".whl", ".zip")
"""File names read as archives (npm packs ``.tgz``, pip wheels are zip files)."""

MAX_ARCHIVE_BYTES = 1 << 30
"""Largest archive opened (1 GiB; the member limit is the caller's)."""


def is_archive(path: str | os.PathLike) -> bool:
    """Whether ``path``'s name ends in one of :data:`ARCHIVE_SUFFIXES`."""
    return str(path).lower().endswith(ARCHIVE_SUFFIXES)


def read_member(archive: str | os.PathLike, name: str, max_bytes: int) -> bytes:
    """The bytes of the one member of ``archive`` whose file name is ``name``.

    Args:
        archive: an npm ``.tgz`` / ``.tar.gz`` / ``.tar``, or a ``.whl`` / ``.zip`` file.
        name: the member's file name (its folder inside the archive does not matter).
        max_bytes: the largest member read.

    Raises:
        InputError: not a readable archive, no such member or more than one, a member that
            is not a regular file or over ``max_bytes`` (one line naming the archive).
    """
    path = check_regular_file(archive, MAX_ARCHIVE_BYTES, "archive")
    try:
        if str(path).lower().endswith((".whl", ".zip")):
            return _zip_member(path, name, max_bytes)
        return _tar_member(path, name, max_bytes)
    except (tarfile.TarError, zipfile.BadZipFile, zlib.error, EOFError, OSError) as e:
        if isinstance(e, OSError) and e.errno is not None:  # the disk's, not the format's
            raise InputError(f"{path}: cannot read the archive: {e.strerror or e}") from None
        raise InputError(f"{path}: not a readable archive ({type(e).__name__})") from None


def _one(path: Path, name: str, found: list) -> object:
    if not found:
        raise InputError(f"{path}: no {name} in the archive")
    if len(found) > 1:
        raise InputError(f"{path}: {len(found)} members named {name} in the archive")
    return found[0]


def _too_large(path: Path, name: str, size: int, max_bytes: int) -> InputError:
    return InputError(f"{path}: {name} is {size} bytes, over the {max_bytes}-byte limit")


def _tar_member(path: Path, name: str, max_bytes: int) -> bytes:
    with tarfile.open(path, "r:*") as tar:
        found = [m for m in tar.getmembers() if PurePosixPath(m.name).name == name]
        member = _one(path, name, found)
        if not member.isfile():
            raise InputError(f"{path}: {member.name} is not a regular file")
        if member.size > max_bytes:
            raise _too_large(path, member.name, member.size, max_bytes)
        f = tar.extractfile(member)
        data = f.read(max_bytes + 1) if f is not None else b""
    if len(data) != member.size:
        raise InputError(f"{path}: {member.name} is truncated ({len(data)} of {member.size})")
    return data


def _zip_member(path: Path, name: str, max_bytes: int) -> bytes:
    with zipfile.ZipFile(path) as z:
        found = [i for i in z.infolist() if PurePosixPath(i.filename).name == name]
        info = _one(path, name, found)
        if info.is_dir():
            raise InputError(f"{path}: {info.filename} is not a regular file")
        if info.file_size > max_bytes:
            raise _too_large(path, info.filename, info.file_size, max_bytes)
        with z.open(info) as f:
            data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise _too_large(path, info.filename, len(data), max_bytes)
    return data
