"""OpenSim storage files: ``.mot`` (joint angles) and ``.sto`` (e.g. IK marker errors), read.

The layout OpenSim's ``Storage`` and ``STOFileAdapter`` write, tab or space separated::

    <title>
    version=1
    nRows=<T>
    nColumns=<C>
    inDegrees=yes|no
    <free text>
    endheader
    time  <column 2> ...
    <T rows of C numbers>
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError
from .files import read_text

__all__ = ["Storage", "StorageError", "read_storage"]


class StorageError(InputError):
    """A ``.mot`` / ``.sto`` file could not be read; the message names the file and the line."""


@dataclass
class Storage:
    """An OpenSim storage file: ``data (T, C)`` float64 whose first column is ``time``,
    ``columns`` (``C`` labels), ``in_degrees`` (angles in degrees), ``title`` and the header's
    ``key=value`` lines."""

    data: np.ndarray
    columns: list[str]
    in_degrees: bool
    title: str
    header: dict[str, str]

    def column(self, name: str) -> np.ndarray:
        """One column ``(T,)`` by its label."""
        return self.data[:, self.columns.index(name)]


def read_storage(path: str | os.PathLike) -> Storage:
    """Read a ``.mot`` or ``.sto`` file.

    Raises:
        FileNotFoundError: no such file.
        StorageError: no ``endheader``, a row of the wrong length or a bad number (naming the
            file and the line).
    """
    path = Path(path)
    lines = read_text(path, 1 << 30, "storage file").splitlines()
    try:
        end = next(i for i, ln in enumerate(lines) if ln.strip().lower() == "endheader")
    except StopIteration:
        raise StorageError(f"{path}: no 'endheader' line (not an OpenSim .mot/.sto)") from None
    header = {}
    for ln in lines[1:end]:
        if "=" in ln:
            k, v = ln.split("=", 1)
            header[k.strip()] = v.strip()
    if end + 1 >= len(lines):
        raise StorageError(f"{path}:{end + 2}: no column labels after 'endheader'")
    columns = lines[end + 1].split()
    rows = []
    for i, ln in enumerate(lines[end + 2 :], start=end + 3):
        if not ln.strip():
            continue
        fields = ln.split()
        if len(fields) != len(columns):
            raise StorageError(f"{path}:{i}: {len(fields)} values, expected {len(columns)}")
        try:
            rows.append([float(v) for v in fields])
        except ValueError as e:
            raise StorageError(f"{path}:{i}: bad number: {e}") from None
    data = np.array(rows, dtype=np.float64).reshape(len(rows), len(columns))
    return Storage(data, columns, header.get("inDegrees", "no").lower() == "yes",
                   lines[0].strip() if lines else "", header)  # fmt: skip
