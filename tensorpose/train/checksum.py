"""Checkpoint checksums: SHA-256 digests of a state dict (names, dtypes, shapes, raw bytes) and
of every other checkpoint entry, independent of the device, memory layout and byte order."""

from __future__ import annotations

import hashlib
import struct
import sys
from collections import Counter, OrderedDict
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from .checkpoint_checks import _show

__all__ = ["weights_checksum"]


_BIG_ENDIAN = sys.byteorder == "big"


def weights_checksum(state: Mapping[str, torch.Tensor]) -> str:
    """SHA-256 hex digest of a state dict: for each entry in sorted name order, its name, dtype,
    shape and raw bytes (CPU, contiguous, little-endian). Independent of the device, the memory
    layout, the insertion order and ``requires_grad``; any changed bit changes it.

    Args:
        state: ``{name: tensor}`` (names as stored, e.g. prefix-free).

    Raises:
        TypeError: a name is not a string or a value not a tensor (named).

    Example:
        >>> a = {"w": torch.ones(2, 3), "b": torch.zeros(3)}
        >>> weights_checksum(a) == weights_checksum(dict(reversed(a.items())))
        True
        >>> a["w"][1, 2] = 1.0000001
        >>> weights_checksum(a) == weights_checksum({"w": torch.ones(2, 3), "b": torch.zeros(3)})
        False
    """
    h = hashlib.sha256()
    names = list(state)
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise TypeError(f"weights_checksum: state names must be strings, got {bad[0]!r}")
    for name in sorted(names):
        value = state[name]
        if not isinstance(value, torch.Tensor):
            raise TypeError(
                f"weights_checksum: state[{name!r}] must be a tensor, got {_show(value)}"
            )
        _feed(h, name, "model")
        _feed(h, value, f"model[{name!r}]")
    return h.hexdigest()


def _state_checksum(payload: Mapping[str, Any]) -> str:
    """Digest of every entry but ``model`` and ``checksum``, in stored order (pickling keeps
    dict order)."""
    h = hashlib.sha256()
    for key, value in payload.items():
        if key in ("model", "checksum"):  # "checksummed" is covered
            continue
        _feed(h, key, "checkpoint")
        _feed(h, value, str(key))
    return h.hexdigest()


def _frame(h: Any, tag: bytes, data: bytes) -> None:
    h.update(b"%s%d:" % (tag, len(data)))
    h.update(data)


def _feed(h: Any, obj: Any, where: str) -> None:
    """Feed ``obj`` to the hash unambiguously (type tag, length, content). Accepts exactly the
    types ``weights_only`` loading reads back; anything else (a numpy scalar or array, a custom
    class) is a TypeError naming ``where``."""
    kind = type(obj)
    if obj is None:
        h.update(b"N")
    elif kind is bool:
        h.update(b"T" if obj else b"F")
    elif kind is int:
        _frame(h, b"i", str(obj).encode())
    elif kind is float:
        h.update(b"f" + struct.pack("<d", obj))
    elif kind is complex:
        h.update(b"c" + struct.pack("<dd", obj.real, obj.imag))
    elif kind is str:
        _frame(h, b"s", obj.encode("utf-8", "surrogatepass"))
    elif kind in (bytes, bytearray):
        _frame(h, b"y", bytes(obj))
    elif kind in (torch.Tensor, nn.Parameter):
        _feed_tensor(h, obj, where)
    elif kind in (torch.dtype, torch.device, torch.layout):
        _frame(h, b"o", str(obj).encode())
    elif kind in (dict, OrderedDict, Counter):
        h.update(b"d%d:" % len(obj))
        for k, v in obj.items():
            _feed(h, k, where)
            _feed(h, v, f"{where}[{k!r}]")
    elif kind in (list, tuple, torch.Size):
        h.update(b"%s%d:" % ({list: b"l", tuple: b"t"}.get(kind, b"S"), len(obj)))
        for i, v in enumerate(obj):
            _feed(h, v, f"{where}[{i}]")
    elif kind is set:  # iteration order varies between processes: sort the item digests
        parts = []
        for v in obj:
            sub = hashlib.sha256()
            _feed(sub, v, f"{where}{{...}}")
            parts.append(sub.digest())
        h.update(b"e%d:" % len(parts) + b"".join(sorted(parts)))
    else:
        raise TypeError(
            f"{where}: a {kind.__module__}.{kind.__qualname__} cannot be stored in a checkpoint "
            "(plain dicts, lists, tuples, strings, numbers and tensors only)"
        )


def _feed_tensor(h: Any, t: torch.Tensor, where: str) -> None:
    t = t.detach()
    _frame(h, b"t", f"{t.dtype}|{tuple(t.shape)}|{t.layout}".encode())
    if t.is_quantized:
        t = t.dequantize()
    if t.layout != torch.strided:
        t = t.to_dense()
    t = t.cpu().resolve_conj().resolve_neg().contiguous().reshape(-1)
    raw = t.view(torch.uint8)
    if _BIG_ENDIAN and t.element_size() > 1:  # hash the little-endian bytes on every machine
        width = t.element_size() // (2 if t.is_complex() else 1)
        raw = raw.reshape(-1, width).flip(-1).reshape(-1)
    h.update(raw.numpy())
