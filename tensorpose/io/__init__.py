"""Real file formats -> tensors and records.

The package itself is light (no torch): ``tensorpose.io.load_bvh`` and the other names of
:mod:`.bvh` are imported on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .bvh import BVHError, Motion, bundled_bvh, load_bvh

__all__ = ["BVHError", "Motion", "bundled_bvh", "load_bvh"]


def __getattr__(name: str) -> Any:
    """The names of :mod:`.bvh`, imported (with torch) on first use."""
    if name in __all__:
        from . import bvh

        return getattr(bvh, name)
    raise AttributeError(f"module 'tensorpose.io' has no attribute {name!r}")
