"""Real file formats -> tensors and records."""

from .bvh import BVHError, Motion, bundled_bvh, load_bvh

__all__ = ["BVHError", "Motion", "bundled_bvh", "load_bvh"]
