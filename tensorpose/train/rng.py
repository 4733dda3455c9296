"""Random number generator states (Python, numpy, torch CPU and CUDA, a sampler generator) as
checkpoint entries, for exact resumption."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

__all__ = ["rng_state", "set_rng_state"]


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
