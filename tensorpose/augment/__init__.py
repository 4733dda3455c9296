"""Image + keypoint augmentation: ranges (:mod:`.config`, plain dataclasses, no torch) and
crops warped on the device (:class:`DeviceAugment`) or in CPU workers (:class:`CpuAugment`,
:mod:`.crops`). The package is light: the names of :mod:`.crops` load on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .config import AugmentConfig, AugmentRanges

if TYPE_CHECKING:
    from .crops import CpuAugment, DeviceAugment, sample_params

__all__ = ["AugmentConfig", "AugmentRanges", "CpuAugment", "DeviceAugment", "sample_params"]


def __getattr__(name: str) -> Any:
    """The names of :mod:`.crops`, imported (with torch and OpenCV) on first use."""
    if name in ("CpuAugment", "DeviceAugment", "sample_params"):
        from . import crops

        return getattr(crops, name)
    raise AttributeError(f"module 'tensorpose.augment' has no attribute {name!r}")
