"""Reading a user's files safely: regular files only (a FIFO, a device such as ``/dev/zero`` or
a folder is refused before it is opened), with a size limit named in the error."""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

from ..errors import InputError, MissingFileError

__all__ = [
    "MAX_FILE_BYTES",
    "check_regular_file",
    "list_files",
    "natural_key",
    "read_bytes",
    "read_regular",
    "read_text",
]

MAX_FILE_BYTES = 2 << 30
"""Default largest input file (2 GiB)."""


def _size(n: int) -> str:
    """``n`` bytes, readable and never hiding a small limit (``0 MiB``)."""
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k and n % (1 << k) == 0:
            return f"{n >> k} {unit}"
    return f"{n / 2**20:.1f} MiB" if n >= 1 << 20 else f"{n} bytes"


def check_regular_file(
    path: str | os.PathLike, max_bytes: int = MAX_FILE_BYTES, what: str = "file"
) -> Path:
    """``path`` if it is a regular file (after following symlinks) of at most ``max_bytes``.

    Raises:
        MissingFileError: no such file (an :class:`~tensorpose.errors.InputError` and a
            ``FileNotFoundError``).
        InputError: a folder, FIFO, socket or device, a file over the limit, or one that cannot
            be read (permission denied...), each named.
    """
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise MissingFileError(f"{path}: no such {what}") from None
    except OSError as e:  # a path through a file, a link loop, no permission to look
        raise InputError(f"{path}: cannot read the {what}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{path}: is a folder, expected a {what}")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(
            f"{path}: not a regular file (a pipe, socket or device), expected a {what}"
        )
    if st.st_size > max_bytes:
        raise InputError(
            f"{path}: {_size(st.st_size)}, over the {_size(max_bytes)} limit for a {what}"
        )
    return path


def read_bytes(
    path: str | os.PathLike, max_bytes: int = MAX_FILE_BYTES, what: str = "file"
) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (see :func:`check_regular_file`)."""
    path = check_regular_file(path, max_bytes, what)
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except FileNotFoundError:
        raise MissingFileError(f"{path}: no such {what}") from None
    except OSError as e:  # no permission, an I/O error of the disk
        raise InputError(f"{path}: cannot read the {what}: {e.strerror or e}") from None
    if len(data) > max_bytes:  # grew while being read
        raise InputError(f"{path}: over the {_size(max_bytes)} limit for a {what}")
    return data


def read_text(path: str | os.PathLike, max_bytes: int = MAX_FILE_BYTES, what: str = "file") -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes``.

    Raises:
        InputError: not UTF-8 text (named), and as :func:`read_bytes`.
    """
    data = read_bytes(path, max_bytes, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (byte {e.start})") from None


def read_regular(path: str | os.PathLike, max_bytes: int = MAX_FILE_BYTES) -> bytes | None:
    """The bytes of a regular file of at most ``max_bytes`` with one stat, open and read (the
    fast path for many small files); ``None`` for anything else, a file that changed size while
    read included (:func:`read_bytes` then names what is wrong). A FIFO is never opened."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except (OSError, ValueError):
        return None
    try:
        data = os.read(fd, st.st_size + 1)
    finally:
        os.close(fd)
    return data if len(data) == st.st_size else None


_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple:
    """Natural sort: numbers in the name compare as numbers (``f9`` before ``f10``)."""
    return tuple(int(s) if s.isdigit() else s for s in _DIGITS.split(name))


def _is_file(entry: os.DirEntry) -> bool:
    """``Path.is_file`` of a folder entry: False for a broken link or a link loop."""
    try:
        return entry.is_file()
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP):
            return False
        raise


def list_files(folder: str | os.PathLike, suffix: str) -> list[str]:
    """The paths (text, as ``str(Path(folder) / name)``) of the regular files (links followed)
    named ``*<suffix>`` in ``folder``, in natural name order (:func:`natural_key`), from one
    listing of the folder (a stat only for links); none when ``folder`` is not a readable
    folder (as ``Path.glob``)."""
    base = str(Path(folder))
    prefix = "" if base == "." else base if base.endswith("/") else base + "/"
    try:
        with os.scandir(base) as entries:
            names = [e.name for e in entries if e.name.endswith(suffix) and _is_file(e)]
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []
    return [prefix + n for n in sorted(names, key=natural_key)]
