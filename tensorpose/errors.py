"""tensorpose's own error type for bad input (imports no torch).

The ``tensorpose`` command (:func:`tensorpose.cli.main`) prints an :class:`InputError` as one
line and exits 2; any other exception is a bug in tensorpose and exits 70. Library callers can
keep catching ``ValueError``.
"""

from __future__ import annotations

__all__ = ["InputError", "MissingFileError"]


class InputError(ValueError):
    """Bad input from the user (a file, a flag, a setting): one line naming the file or flag and
    what was wrong."""


class MissingFileError(InputError, FileNotFoundError):
    """A file or folder the user named does not exist (also a ``FileNotFoundError``, so callers
    that catch that keep working); the message names it."""
