"""State dicts by parameter name: wrapper prefixes (DDP ``module.``, torch.compile
``_orig_mod.``) removed, freezing by name pattern, and ``.safetensors`` export."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import torch
from torch import nn

from ..errors import InputError

__all__ = ["clean_state_dict", "export_safetensors", "freeze", "strip_prefixes"]


PREFIXES = ("module.", "_orig_mod.")


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
            raise InputError(
                f"train.freeze pattern {pat!r} matches no parameter (names: {sample}, ...)"
            )
        for n, p in hits:
            p.requires_grad_(False)
            frozen.append(n)
    return sorted(set(frozen))
