"""Checkpoints: atomic save, safe load (``weights_only=True``), and the model configuration kept
with the weights so a model can be rebuilt and a mismatched one rejected with a clear error.

Layout (plain dicts, tensors and numbers only): ``{"format": 1, "model": state_dict,
"config": resolved config dict, "extra": {...}}``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch

__all__ = ["CheckpointError", "load_checkpoint", "model_config_mismatch", "save_checkpoint"]

FORMAT = 1


class CheckpointError(ValueError):
    """A checkpoint cannot be read or does not fit the requested model."""


def save_checkpoint(
    path: str | Path, model: torch.nn.Module, config: dict, extra: dict | None = None
) -> Path:
    """Write ``model``'s weights with ``config`` atomically: a temporary file in the same folder,
    flushed and fsynced, then ``os.replace`` (a crash never leaves a half-written checkpoint)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    payload = {"format": FORMAT, "model": state, "config": config, "extra": extra or {}}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint with ``torch.load(weights_only=True)`` (no code execution)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {str(path)!r} not found")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise CheckpointError(f"{path}: not a readable tensorpose checkpoint ({e})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT or "model" not in payload:
        raise CheckpointError(f"{path}: not a tensorpose checkpoint (format {FORMAT} expected)")
    return payload


def model_config_mismatch(stored: dict, requested: dict) -> list[str]:
    """Human-readable differences between two model-config dicts (empty when they match)."""
    keys = sorted(set(stored) | set(requested))
    return [
        f"{k}: checkpoint has {stored.get(k, '<missing>')!r}, config has "
        f"{requested.get(k, '<missing>')!r}"
        for k in keys
        if stored.get(k) != requested.get(k)
    ]
