"""Checkpoint files: the format, save (checked, checksummed, written atomically by
:mod:`tensorpose.train.atomic_save`), safe load (``weights_only=True``, entries validated,
checksums verified), and loading the weights into a model. RNG state:
:mod:`tensorpose.train.rng`; prefix-free state dicts and freezing:
:mod:`tensorpose.train.state_dict`.

Layout (plain dicts, tensors, numbers and strings only, so ``torch.load(weights_only=True)``
reads it and a checkpoint cannot run code)::

    {"format": 2, "model": state_dict, "config": resolved config dict, "extra": {...},
     "epoch": completed epochs, "step": optimiser steps,
     "optimizer", "scheduler", "scaler": state dicts (or None),
     "rng": {"python", "numpy", "torch", "cuda", "sampler"}, "history": [...], "best": {...},
     "checksummed": True, "checksum": {"algorithm": "sha256", "model": hex, "state": hex}}

Integrity: ``checksum["model"]`` is :func:`~tensorpose.train.checksum.weights_checksum` of the
state dict (names, dtypes, shapes and raw bytes), ``checksum["state"]`` the same kind of digest
over every other entry (``checksummed`` included, so a file that lost its ``checksum`` entry is
caught as well). :func:`load_checkpoint` verifies both on every load: a flipped byte in the
weights, the training state or the pickled values is a :class:`CheckpointError`, not silently
different numbers. The digests detect corruption, not tampering: whoever can rewrite the file can
rewrite them too (``weights_only`` loading is what keeps a hostile file from running code).
Files written without checksums (weights-only format 1 files, and format 2 files with neither
``checksummed`` nor ``checksum``) still load, unverified.

Validation (:mod:`tensorpose.train.checkpoint_checks`): every entry :func:`load_checkpoint`
finds is checked (types, RNG state sizes, the ``best`` record), and the entries the caller needs
must be present (:data:`EVAL_KEYS` to rebuild a model, :data:`RESUME_KEYS` to resume
training): a damaged or foreign file is one :class:`CheckpointError` naming the file and the
entry, never a ``KeyError`` later.

The best record ``best = {"metric", "mode", "value", "epoch"}`` (empty before the first
validation) is kept in every checkpoint the trainer writes, and ``load_checkpoint(path)["best"]``
is the source of truth: it is the run's best as of that file's ``epoch``, and a ``best.pt``
holds the best weights when its ``epoch`` equals its ``best["epoch"]``. Of two files of a run,
the one with the larger ``epoch`` has the newer record.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..errors import InputError, MissingFileError
from ..io.torch_file import refuse_torchscript
from .atomic_save import save_atomic
from .checkpoint_checks import _check_entries, _Invalid, _is_int
from .checksum import _state_checksum, weights_checksum
from .state_dict import clean_state_dict, strip_prefixes

__all__ = [
    "EVAL_KEYS",
    "RESUME_KEYS",
    "CheckpointError",
    "load_checkpoint",
    "load_weights",
    "model_config_mismatch",
    "save_checkpoint",
]


FORMAT = 2
READABLE = (1, 2)
EVAL_KEYS = ("model", "config")
"""Entries needed to rebuild and evaluate a model (the default of :func:`load_checkpoint`)."""
RESUME_KEYS = ("model", "config", "epoch", "step", "optimizer", "scheduler", "rng")
"""Entries needed to resume training (``scaler``, ``history``, ``best`` are optional)."""


class CheckpointError(InputError):
    """A checkpoint cannot be read or does not fit the requested model or run."""


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
    mid-write can leave one behind, which
    :func:`~tensorpose.train.atomic_save.clean_temp_files` removes.

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
    save_atomic(path, _checked_payload(model, config, extra, state))
    return path


def _checked_payload(model: nn.Module, config: dict, extra: dict | None, state: dict) -> dict:
    """The payload :func:`save_checkpoint` writes: entries checked, checksums added."""
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
    return payload


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
        raise MissingFileError(f"checkpoint {str(path)!r} not found")
    if not path.is_file():
        kind = "a directory" if path.is_dir() else "not a regular file"
        raise CheckpointError(f"{path}: is {kind}, not a checkpoint file")
    if path.stat().st_size == 0:
        raise CheckpointError(f"{path}: the file is empty, not a checkpoint")
    refuse_torchscript(path)
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
