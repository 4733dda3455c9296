"""Checkpoints: atomic save, safe load (``weights_only=True``), the configuration kept with the
weights, full training state for exact resumption, checksums and entry validation, prefix-free
state dicts, partial loading and freezing by name.

Layout (plain dicts, tensors, numbers and strings only, so ``torch.load(weights_only=True)``
reads it and a checkpoint cannot run code)::

    {"format": 2, "model": state_dict, "config": resolved config dict, "extra": {...},
     "epoch": completed epochs, "step": optimiser steps,
     "optimizer", "scheduler", "scaler": state dicts (or None),
     "rng": {"python", "numpy", "torch", "cuda", "sampler"}, "history": [...], "best": {...},
     "checksummed": True, "checksum": {"algorithm": "sha256", "model": hex, "state": hex}}

Integrity: ``checksum["model"]`` is :func:`weights_checksum` of the state dict (names, dtypes,
shapes and raw bytes), ``checksum["state"]`` the same kind of digest over every other entry
(``checksummed`` included, so a file that lost its ``checksum`` entry is caught as well).
:func:`load_checkpoint` verifies both on every load: a flipped byte in the weights, the
training state or the pickled values is a :class:`CheckpointError`, not silently different
numbers. The digests detect corruption, not tampering: whoever can rewrite the file can rewrite
them too (``weights_only`` loading is what keeps a hostile file from running code). Files
written without checksums (weights-only format 1 files, and format 2 files with neither
``checksummed`` nor ``checksum``) still load, unverified.

Validation: every entry :func:`load_checkpoint` finds is checked (types, RNG state sizes, the
``best`` record), and the entries the caller needs must be present (:data:`EVAL_KEYS` to
rebuild a model, :data:`RESUME_KEYS` to resume training): a damaged or foreign file is one
:class:`CheckpointError` naming the file and the entry, never a ``KeyError`` later.

The best record ``best = {"metric", "mode", "value", "epoch"}`` (empty before the first
validation) is kept in every checkpoint the trainer writes, and ``load_checkpoint(path)["best"]``
is the source of truth: it is the run's best as of that file's ``epoch``, and a ``best.pt``
holds the best weights when its ``epoch`` equals its ``best["epoch"]``. Of two files of a run,
the one with the larger ``epoch`` has the newer record.
"""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import os
import random
import re
import shutil
import struct
import sys
import tempfile
import time
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = [
    "EVAL_KEYS",
    "RESUME_KEYS",
    "CheckpointError",
    "clean_state_dict",
    "clean_temp_files",
    "export_safetensors",
    "freeze",
    "load_checkpoint",
    "load_weights",
    "model_config_mismatch",
    "rng_state",
    "save_checkpoint",
    "set_rng_state",
    "weights_checksum",
]

FORMAT = 2
READABLE = (1, 2)
PREFIXES = ("module.", "_orig_mod.")
EVAL_KEYS = ("model", "config")
"""Entries needed to rebuild and evaluate a model (the default of :func:`load_checkpoint`)."""
RESUME_KEYS = ("model", "config", "epoch", "step", "optimizer", "scheduler", "rng")
"""Entries needed to resume training (``scaler``, ``history``, ``best`` are optional)."""


class CheckpointError(ValueError):
    """A checkpoint cannot be read or does not fit the requested model or run."""


def strip_prefixes(name: str) -> str:
    """``module.`` (DistributedDataParallel) and ``_orig_mod.`` (torch.compile) removed from a
    parameter name, wherever they were stacked."""
    changed = True
    while changed:
        changed = False
        for p in PREFIXES:
            if name.startswith(p):
                name, changed = name[len(p) :], True
    return name


def clean_state_dict(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A state dict on the CPU with wrapper prefixes removed from every key."""
    return {strip_prefixes(k): v.detach().cpu() for k, v in state.items()}


# ---------------------------------------------------------------------- RNG
def rng_state(sampler: torch.Generator | None = None) -> dict[str, Any]:
    """Python, numpy, torch (CPU and every CUDA device) and the sampler generator's states, as
    tensors/ints/strings (loadable with ``weights_only=True``)."""
    np_state = np.random.get_state(legacy=False)  # noqa: NPY002
    return {
        "python": _py_state(random.getstate()),
        "numpy": {
            "bit_generator": np_state["bit_generator"],
            "key": torch.from_numpy(np_state["state"]["key"].astype(np.int64)),
            "pos": int(np_state["state"]["pos"]),
            "has_gauss": int(np_state["has_gauss"]),
            "gauss": float(np_state["gauss"]),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "sampler": sampler.get_state() if sampler is not None else None,
    }


def _py_state(state: tuple) -> list:
    version, internal, gauss = state
    return [version, torch.tensor(internal, dtype=torch.int64), gauss]


def set_rng_state(state: dict[str, Any], sampler: torch.Generator | None = None) -> None:
    """Restore :func:`rng_state`."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(int(v) for v in internal.tolist()), gauss))
    n = state["numpy"]
    np.random.set_state(  # noqa: NPY002
        {
            "bit_generator": n["bit_generator"],
            "state": {"key": n["key"].numpy().astype(np.uint32), "pos": n["pos"]},
            "has_gauss": n["has_gauss"],
            "gauss": n["gauss"],
        }
    )
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if sampler is not None and state.get("sampler") is not None:
        sampler.set_state(state["sampler"].to(sampler.get_state().device))


# ---------------------------------------------------------------------- checksums
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


# ---------------------------------------------------------------------- entry validation
class _Invalid(Exception):
    """A failed check: ``entry KEY MESSAGE`` (or just ``MESSAGE`` when ``key`` is None)."""

    def __init__(self, key: str | None, message: str, kind: type[Exception] = TypeError) -> None:
        super().__init__(message if key is None else f"entry {key} {message}")
        self.kind = kind


def _show(v: Any) -> str:
    if isinstance(v, torch.Tensor):
        return f"a tensor {v.dtype} {tuple(v.shape)}"
    text = repr(v)
    return f"{type(v).__name__} {text[:40] + '...' if len(text) > 40 else text}"


def _need(ok: bool, key: str, expected: str, value: Any, kind: type[Exception] = TypeError) -> None:
    if not ok:
        raise _Invalid(key, f"must be {expected}, got {_show(value)}", kind)


def _is_int(v: Any) -> bool:
    return type(v) is int


def _is_real(v: Any) -> bool:
    return type(v) in (int, float)


def _str_dict(key: str, v: Any) -> None:
    _need(isinstance(v, dict), key, "a dict", v)
    bad = [k for k in v if not isinstance(k, str)]
    _need(not bad, key, "a dict with string keys", bad[:1])


def _count(key: str, v: Any) -> None:
    _need(_is_int(v), key, "an int >= 0", v)
    _need(v >= 0, key, "an int >= 0", v, ValueError)


def _check_model(key: str, v: Any) -> None:
    _need(isinstance(v, dict), key, "a state dict {name: tensor}", v)
    for name, t in v.items():
        _need(isinstance(name, str), key, "a state dict with string names", name)
        _need(isinstance(t, torch.Tensor), f"{key}[{name!r}]", "a tensor", t)


def _check_optimizer(key: str, v: Any) -> None:
    _need(isinstance(v, dict), key, "an optimizer state dict", v)
    for part, kind in (("state", dict), ("param_groups", list)):
        _need(part in v, key, f"an optimizer state dict with {part!r}", sorted(map(str, v)))
        _need(isinstance(v[part], kind), f"{key}[{part!r}]", f"a {kind.__name__}", v[part])
    for i, per_param in v["state"].items():
        _need(_is_int(i), f"{key}['state']", "a dict with int keys", i)
        _str_dict(f"{key}['state'][{i}]", per_param)
    for i, group in enumerate(v["param_groups"]):
        where = f"{key}['param_groups'][{i}]"
        _str_dict(where, group)
        for part in ("params", "lr"):
            _need(part in group, where, f"a parameter group with {part!r}", sorted(group))
        params = group["params"]
        _need(isinstance(params, list) and all(_is_int(p) for p in params),
              f"{where}['params']", "a list of ints", params)  # fmt: skip
        lr = group["lr"]
        _need(_is_real(lr) or isinstance(lr, torch.Tensor), f"{where}['lr']", "a number", lr)


def _check_scheduler(key: str, v: Any) -> None:
    _str_dict(key, v)
    _need("last_epoch" in v, key, "a scheduler state dict with 'last_epoch'", sorted(v))
    _need(_is_int(v["last_epoch"]), f"{key}['last_epoch']", "an int", v["last_epoch"])
    lrs = v.get("base_lrs", [])
    _need(isinstance(lrs, list) and all(_is_real(x) for x in lrs),
          f"{key}['base_lrs']", "a list of numbers", lrs)  # fmt: skip


def _word_tensor(key: str, t: Any, n: int, dtype: torch.dtype, high: int) -> None:
    _need(isinstance(t, torch.Tensor) and t.dtype == dtype and t.shape == (n,),
          key, f"a {dtype} tensor of shape ({n},)", t)  # fmt: skip
    _need(
        bool(((t >= 0) & (t < high)).all()),
        key,
        f"a tensor of values in [0, {high})",
        t,
        ValueError,
    )


def _check_rng(key: str, v: Any) -> None:
    _str_dict(key, v)
    for part in ("python", "numpy", "torch", "cuda"):
        _need(part in v, key, f"a dict with {part!r}", sorted(v))
    py = v["python"]
    where = f"{key}['python']"
    _need(isinstance(py, (list, tuple)) and len(py) == 3, where, "[version, state, gauss]", py)
    version = random.Random.VERSION
    _need(_is_int(py[0]) and py[0] == version, f"{where}[0]", f"version {version}", py[0])
    _word_tensor(f"{where}[1]", py[1], 625, torch.int64, 2**32)
    _need(
        int(py[1][-1]) <= 624, f"{where}[1]", "a state whose position is <= 624", py[1], ValueError
    )
    _need(py[2] is None or _is_real(py[2]), f"{where}[2]", "a float or None", py[2])
    n = v["numpy"]
    where = f"{key}['numpy']"
    _str_dict(where, n)
    for part, test, expected in (
        ("bit_generator", lambda x: isinstance(x, str) and x == "MT19937", "'MT19937'"),
        ("pos", lambda x: _is_int(x) and 0 <= x <= 624, "an int in [0, 624]"),
        ("has_gauss", lambda x: _is_int(x) and x in (0, 1), "0 or 1"),
        ("gauss", _is_real, "a float"),
    ):
        _need(part in n, where, f"a dict with {part!r}", sorted(n))
        _need(test(n[part]), f"{where}[{part!r}]", expected, n[part])
    _need("key" in n, where, "a dict with 'key'", sorted(n))
    _word_tensor(f"{where}['key']", n["key"], 624, torch.int64, 2**32)
    cpu = torch.get_rng_state().numel()
    _need(isinstance(v["torch"], torch.Tensor) and v["torch"].dtype == torch.uint8
          and v["torch"].shape == (cpu,), f"{key}['torch']", f"a uint8 tensor of shape ({cpu},)",
          v["torch"])  # fmt: skip
    for part in ("cuda", "sampler"):
        states = v.get(part)
        if part == "sampler":
            if states is None:
                continue
            states = [states]
        _need(isinstance(states, (list, tuple)) and all(
            isinstance(t, torch.Tensor) and t.dtype == torch.uint8 and t.dim() == 1
            for t in states), f"{key}[{part!r}]", "uint8 generator states", v[part])  # fmt: skip


def _check_best(key: str, v: Any) -> None:
    _str_dict(key, v)
    if not v:
        return
    for part, test, expected in (
        ("metric", lambda x: isinstance(x, str), "a string"),
        ("mode", lambda x: isinstance(x, str) and x in ("min", "max"), "'min' or 'max'"),
        ("value", _is_real, "a number"),
        ("epoch", lambda x: _is_int(x) and x >= 0, "an int >= 0"),
    ):
        _need(part in v, key, f"a record with {part!r} (or empty)", sorted(v))
        _need(test(v[part]), f"{key}[{part!r}]", expected, v[part])


def _check_history(key: str, v: Any) -> None:
    _need(isinstance(v, list), key, "a list of per-epoch dicts", v)
    for i, row in enumerate(v):
        _str_dict(f"{key}[{i}]", row)


def _check_checksum(key: str, v: Any) -> None:
    _str_dict(key, v)
    algorithm = v.get("algorithm")
    _need(isinstance(algorithm, str) and algorithm == "sha256", f"{key}['algorithm']", "'sha256'",
          algorithm)  # fmt: skip
    for part in ("model", "state"):
        d = v.get(part)
        _need(isinstance(d, str) and re.fullmatch(r"[0-9a-f]{64}", d) is not None,
              f"{key}[{part!r}]", "a SHA-256 hex digest", d)  # fmt: skip


_CHECKS = {
    "model": _check_model,
    "config": _str_dict,
    "extra": _str_dict,
    "epoch": _count,
    "step": _count,
    "optimizer": _check_optimizer,
    "scheduler": _check_scheduler,
    "scaler": lambda k, v: v is None or _str_dict(k, v),
    "rng": _check_rng,
    "history": _check_history,
    "best": _check_best,
    "first_loss": lambda k, v: _need(v is None or _is_real(v), k, "a number or None", v),
    "checksum": _check_checksum,
    "checksummed": lambda k, v: _need(v is True, k, "True", v),
}


def _check_entries(payload: dict, require: tuple[str, ...]) -> None:
    missing = [k for k in require if k not in payload]
    if missing:
        raise _Invalid(
            repr(missing[0]), f"is missing (needed here: {', '.join(require)})", ValueError
        )
    for key, check in _CHECKS.items():
        if key in payload:
            check(repr(key), payload[key])


# ---------------------------------------------------------------------- save
_NO_SPACE = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


def save_checkpoint(
    path: str | Path,
    model: nn.Module,
    config: dict,
    extra: dict | None = None,
    **state: Any,
) -> Path:
    """Write ``model``'s weights (prefixes stripped), ``config`` and any training ``state``
    (``epoch``, ``step``, ``optimizer``, ``scheduler``, ``scaler``, ``rng``, ``history``,
    ``best``, ...) with their checksums (see the module notes), atomically.

    The checkpoint is first serialised to count its bytes (without holding them in memory); if
    the folder has less free space than that, nothing is written. Then a temporary file
    ``.NAME.XXXXXXXX.tmp`` in the same folder is written, fsynced and moved over ``path`` with
    ``os.replace``. Whatever fails (a full disk, an I/O error, Ctrl-C), the previous file at
    ``path`` is left intact and the temporary file is removed; only a SIGKILL or a power loss
    mid-write can leave one behind, which :func:`clean_temp_files` removes.

    Args:
        path: the checkpoint file (its folder is created).
        model: any module; DDP / torch.compile wrappers are fine (prefixes are stripped).
        config: the resolved config dict.
        extra: task data kept next to the weights (tensors, numbers, strings, containers).
        **state: training state; among it ``best``, the run's best record
            ``{"metric", "mode": "min"|"max", "value", "epoch"}`` (or ``{}``), which
            ``load_checkpoint(path)["best"]`` reads back (see the module notes).

    Returns:
        ``path``.

    Raises:
        TypeError, ValueError: an entry has the wrong type or value (named); a value that
            ``weights_only`` loading could not read back (e.g. a numpy array) is named too.
        OSError: ``errno.ENOSPC``, one line naming the folder and the bytes needed, when the
            disk is full; other I/O errors as raised.
    """
    path = Path(path)
    reserved = sorted({"format", "checksum", "checksummed"} & set(state))
    if reserved:
        raise TypeError(f"save_checkpoint: {reserved[0]!r} is written by save_checkpoint itself")
    payload = {
        "format": FORMAT,
        "checksummed": True,
        "model": clean_state_dict(model.state_dict()),
        "config": config,
        "extra": {} if extra is None else extra,
        **state,
    }
    try:
        _check_entries(payload, EVAL_KEYS)
    except _Invalid as e:
        raise e.kind(f"save_checkpoint: {e}") from None
    try:
        payload["checksum"] = {
            "algorithm": "sha256",
            "model": weights_checksum(payload["model"]),
            "state": _state_checksum(payload),
        }
    except TypeError as e:
        raise TypeError(f"save_checkpoint: {e}") from None
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
    return path


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


# ---------------------------------------------------------------------- load
def load_checkpoint(path: str | Path, *, require: Iterable[str] = EVAL_KEYS) -> dict[str, Any]:
    """Read a checkpoint with ``torch.load(weights_only=True)`` (no code execution), check its
    entries and verify its checksums.

    Files written without checksums (weights-only format 1 files, format 2 files without
    ``checksummed`` and ``checksum`` entries) load unverified; all others must match them.

    Args:
        path: the file.
        require: entries that must be present: :data:`EVAL_KEYS` (default) to rebuild a model,
            :data:`RESUME_KEYS` to resume training, ``("model",)`` for weights only. Entries
            that are present are type-checked whether required or not.

    Returns:
        the payload dict (``"model"`` with prefix-free names).

    Raises:
        FileNotFoundError: no such file (named).
        CheckpointError: unreadable, truncated, corrupt (checksum mismatch), refused (the
            pickle asks to run code), not a tensorpose checkpoint, a required entry missing or
            an entry of the wrong type: one line naming the file (and the entry).
    """
    path = Path(path)
    if isinstance(require, str):  # ("model") is a string: a classic slip
        raise TypeError(f"load_checkpoint: require must be a tuple of entry names, got {require!r}")
    require = tuple(require)
    if not path.exists():
        raise FileNotFoundError(f"checkpoint {str(path)!r} not found")
    if not path.is_file():
        kind = "a directory" if path.is_dir() else "not a regular file"
        raise CheckpointError(f"{path}: is {kind}, not a checkpoint file")
    if path.stat().st_size == 0:
        raise CheckpointError(f"{path}: the file is empty, not a checkpoint")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise CheckpointError(
            f"{path}: not a readable tensorpose checkpoint ({_reason(e)})"
        ) from None
    if (
        not isinstance(payload, dict)
        or not _is_int(payload.get("format"))
        or payload["format"] not in READABLE
    ):
        raise CheckpointError(f"{path}: not a tensorpose checkpoint (format {FORMAT} expected)")
    try:
        _check_entries(payload, require)
        _verify(payload)
    except _Invalid as e:
        raise CheckpointError(f"{path}: {e}") from None
    except Exception as e:  # a value no check foresaw: still one clear error
        raise CheckpointError(f"{path}: entries cannot be checked ({_reason(e)})") from None
    if "model" in payload:
        model = {strip_prefixes(k): v for k, v in payload["model"].items()}
        if len(model) != len(payload["model"]):
            raise CheckpointError(f"{path}: entry 'model' has names that differ only by prefixes")
        payload["model"] = model
    return payload


def _verify(payload: dict) -> None:
    stored = payload.get("checksum")
    if stored is None:
        if "checksummed" in payload:
            raise _Invalid(
                None, "the checksum entry is missing from a checksummed file: the file is corrupt"
            )
        return
    try:
        actual = weights_checksum(payload.get("model", {}))
        state = _state_checksum(payload)
    except Exception as e:  # a value the digest cannot read: not one save_checkpoint wrote
        raise _Invalid("'checksum'", f"cannot be verified ({_reason(e)})", ValueError) from None
    if actual != stored["model"]:
        raise _Invalid(
            None,
            "weights do not match their checksum: the file is corrupt (sha256 "
            f"{actual[:12]}... computed, {stored['model'][:12]}... stored)",
            ValueError,
        )
    if state != stored["state"]:
        raise _Invalid(
            None,
            "config and training state do not match their checksum: the file is corrupt",
            ValueError,
        )


def _reason(e: Exception) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    if lines and lines[0].startswith("Weights only load failed"):
        detail = next((ln for ln in lines[1:] if "GLOBAL" in ln or "Unsupported" in ln), "")
        detail = detail.split(". ")[0]  # not torch's advice on allowlisting the global
        return f"refused by weights-only loading, no code was run: {detail}".rstrip(": ")
    first = lines[0] if lines else ""
    first = first if len(first) <= 200 else first[:200] + "..."
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


def load_weights(
    model: nn.Module, state: dict[str, torch.Tensor], strict: bool = True
) -> tuple[list[str], list[str]]:
    """Load ``state`` into ``model`` (either may carry ``module.``/``_orig_mod.`` prefixes).

    Args:
        strict: raise :class:`CheckpointError` on missing/unexpected keys; otherwise load what
            fits (fine-tuning) and return them.

    Returns:
        ``(missing, unexpected)`` key lists (prefix-free names).

    Raises:
        CheckpointError: shape mismatches (always), missing/unexpected keys when ``strict``.
    """
    from ..tasks import unwrap

    target = unwrap(model)
    state = {strip_prefixes(k): v for k, v in state.items()}
    own = target.state_dict()
    shapes = [
        f"{k}: checkpoint {tuple(v.shape)} vs model {tuple(own[k].shape)}"
        for k, v in state.items()
        if k in own and own[k].shape != v.shape
    ]
    if shapes:
        raise CheckpointError("weights do not fit the model: " + "; ".join(shapes[:4]))
    result = target.load_state_dict(state, strict=False)
    missing, unexpected = list(result.missing_keys), list(result.unexpected_keys)
    if strict and (missing or unexpected):
        raise CheckpointError(
            f"weights do not fit the model (missing {missing[:4]}, unexpected {unexpected[:4]})"
        )
    return missing, unexpected


def model_config_mismatch(stored: dict, requested: dict) -> list[str]:
    """Human-readable differences between two config-section dicts (empty when they match)."""
    keys = sorted(set(stored) | set(requested))
    return [
        f"{k}: checkpoint has {stored.get(k, '<missing>')!r}, config has "
        f"{requested.get(k, '<missing>')!r}"
        for k in keys
        if stored.get(k) != requested.get(k)
    ]


def export_safetensors(path: str | Path, model: nn.Module) -> Path:
    """The model's weights (prefix-free) as a ``.safetensors`` file.

    Raises:
        ImportError: the optional ``safetensors`` package is not installed.
    """
    try:
        from safetensors.torch import save_file
    except ImportError as e:
        raise ImportError(
            "safetensors export needs the optional package: pip install safetensors"
        ) from e
    state = {k: v.contiguous() for k, v in clean_state_dict(model.state_dict()).items()}
    save_file(state, str(path))
    return Path(path)


# ---------------------------------------------------------------------- freezing
def freeze(model: nn.Module, patterns: list[str] | tuple[str, ...]) -> list[str]:
    """Stop training parameters whose prefix-free name matches any ``fnmatch`` pattern (e.g.
    ``backbone.stem.*``); the same names with or without DDP / torch.compile wrappers. Call it
    before wrapping in DDP (DDP needs to know which parameters get gradients).

    Returns:
        the frozen names.

    Raises:
        ValueError: a pattern matches no parameter (names the pattern and a few real names).
    """
    named = [(strip_prefixes(n), p) for n, p in model.named_parameters()]
    frozen = []
    for pat in patterns:
        hits = [(n, p) for n, p in named if fnmatch.fnmatchcase(n, pat)]
        if not hits:
            sample = ", ".join(n for n, _ in named[:5])
            raise ValueError(
                f"train.freeze pattern {pat!r} matches no parameter (names: {sample}, ...)"
            )
        for n, p in hits:
            p.requires_grad_(False)
            frozen.append(n)
    return sorted(set(frozen))
