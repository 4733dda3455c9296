"""Checkpoints: atomic save, safe load (``weights_only=True``), the configuration kept with the
weights, full training state for exact resumption, prefix-free state dicts, partial loading and
freezing by name.

Layout (plain dicts, tensors, numbers and strings only, so ``torch.load(weights_only=True)``
reads it and a checkpoint cannot run code)::

    {"format": 2, "model": state_dict, "config": resolved config dict, "extra": {...},
     "epoch": completed epochs, "step": optimiser steps,
     "optimizer", "scheduler", "scaler": state dicts (or None),
     "rng": {"python", "numpy", "torch", "cuda", "sampler"}, "history": [...], "best": {...}}

Weights-only files (format 1, from before the full trainer) still load for evaluation.
"""

from __future__ import annotations

import fnmatch
import os
import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

__all__ = [
    "CheckpointError",
    "clean_state_dict",
    "export_safetensors",
    "freeze",
    "load_checkpoint",
    "load_weights",
    "model_config_mismatch",
    "rng_state",
    "save_checkpoint",
    "set_rng_state",
]

FORMAT = 2
READABLE = (1, 2)
PREFIXES = ("module.", "_orig_mod.")


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


# ---------------------------------------------------------------------- save / load
def save_checkpoint(
    path: str | Path,
    model: nn.Module,
    config: dict,
    extra: dict | None = None,
    **state: Any,
) -> Path:
    """Write ``model``'s weights (prefixes stripped), ``config`` and any training ``state``
    (``epoch``, ``step``, ``optimizer``, ``scheduler``, ``scaler``, ``rng``, ``history``,
    ``best``) atomically: a temporary file in the same folder, flushed and fsynced, then
    ``os.replace``. A crash or SIGKILL at any moment leaves the previous file intact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": FORMAT,
        "model": clean_state_dict(model.state_dict()),
        "config": config,
        "extra": extra or {},
        **state,
    }
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


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


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint with ``torch.load(weights_only=True)`` (no code execution).

    Raises:
        FileNotFoundError: no such file (named).
        CheckpointError: unreadable, truncated or not a tensorpose checkpoint (named).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {str(path)!r} not found")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise CheckpointError(f"{path}: not a readable tensorpose checkpoint ({e})") from None
    if (
        not isinstance(payload, dict)
        or payload.get("format") not in READABLE
        or "model" not in payload
    ):
        raise CheckpointError(f"{path}: not a tensorpose checkpoint (format {FORMAT} expected)")
    payload["model"] = {strip_prefixes(k): v for k, v in payload["model"].items()}
    return payload


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
