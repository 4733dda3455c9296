"""``sync.json``: each camera folder's frame offset (``tensorpose sync`` writes it,
``tensorpose triangulate --sync`` reads it).

``{"reference": FOLDER, "offsets": {FOLDER: frames, ...}, "fractional": {FOLDER: frames, ...},
"delays": {FOLDER: frames, ...}, ...}``: ``offsets`` are the whole frames to drop at the start
of each camera so that frame ``k`` of every camera is the same instant (``>= 0``, at least one
``0``); ``fractional`` the same with the sub-frame part (within half a frame of
``offsets``, so possibly a little below 0); ``delays`` how much later each camera
started than the reference (frames, ``+`` later, ``-`` earlier). Only ``offsets`` is read back.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import InputError
from .files import read_text

__all__ = ["read_sync", "write_sync"]

MAX_SYNC_BYTES = 1 << 20


def write_sync(path: str | os.PathLike, record: dict) -> Path:
    """Write ``record`` (with ``reference`` and ``offsets``) as indented JSON."""
    path = Path(path)
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return path


def read_sync(path: str | os.PathLike) -> dict[str, int]:
    """The ``offsets`` of a ``sync.json``: folder name -> whole frames to drop (``>= 0``).

    Raises:
        InputError: a missing or malformed file, offsets that are not whole frames ``>= 0``
            (the file named).
    """
    text = read_text(path, MAX_SYNC_BYTES, "sync file")
    try:
        record = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not a sync file (JSON: {e})") from None
    offsets = record.get("offsets") if isinstance(record, dict) else None
    if not isinstance(offsets, dict) or not offsets:
        raise InputError(f'{path}: not a sync file (no "offsets": {{folder: frames}})')
    for folder, frames in offsets.items():  # a handful of cameras
        if isinstance(frames, bool) or not isinstance(frames, int) or frames < 0:
            raise InputError(f"{path}: the offset of {folder!r} must be whole frames >= 0, "
                             f"got {frames!r}")  # fmt: skip
    return dict(offsets)
