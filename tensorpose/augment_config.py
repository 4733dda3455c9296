"""The ranges of the top-down augmentation as plain dataclasses (no torch, no OpenCV), shared by
:mod:`tensorpose.augment` (which draws and applies them) and the 2D tasks' ``data`` config
section (which exposes the same names and defaults as config keys)."""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["AugmentConfig", "AugmentRanges"]


@dataclass
class AugmentRanges:
    """Ranges of the random augmentation (defaults: the usual COCO top-down recipe).

    Attributes:
        scale: window scale factor ``clip(1 + scale * N(0, 1), 1 - scale, 1 + scale)``.
        rotation: degrees; angle ``clip(rotation * N(0, 1), -2 rotation, 2 rotation)`` with
            probability ``rotation_prob``, else 0.
        shift: window shift, fraction of its size, ``clip(shift * N(0, 1), -2 shift, 2 shift)``.
        flip_prob: probability of a left-right flip (joint identities swap).
        brightness, contrast, saturation: factors ``1 + U(-v, v)``.
        hue: hue rotation ``U(-hue, hue)`` turns.
        noise: gaussian noise standard deviation ``U(0, noise)`` grey levels, with probability
            ``noise_prob``.
        shadow_prob: probability of a half-plane shadow.
    """

    scale: float = 0.3
    rotation: float = 30.0
    rotation_prob: float = 0.6
    shift: float = 0.0
    flip_prob: float = 0.5
    brightness: float = 0.2
    contrast: float = 0.2
    saturation: float = 0.2
    hue: float = 0.02
    noise: float = 5.0
    noise_prob: float = 0.3
    shadow_prob: float = 0.3

    PROBABILITIES = ("flip_prob", "rotation_prob", "noise_prob", "shadow_prob")
    """The fields that are probabilities (in ``[0, 1]``)."""

    def ranges(self) -> dict[str, float]:
        """The :class:`AugmentRanges` fields of this object (of a subclass too) by name."""
        return {f.name: getattr(self, f.name) for f in fields(AugmentRanges)}


@dataclass
class AugmentConfig(AugmentRanges):
    """:class:`AugmentRanges` plus the crop size and the shadow's strength range.

    Attributes:
        output_size: ``(H, W)`` of the crops.
        shadow_strength: a shadow's brightness factor is ``1 - U(*shadow_strength)``.
    """

    output_size: tuple[int, int] = (256, 192)
    shadow_strength: tuple[float, float] = (0.3, 0.6)

    @classmethod
    def identity(cls, output_size: tuple[int, int] = (256, 192)) -> AugmentConfig:
        """No randomness: the plain crop (evaluation)."""
        zero = dict.fromkeys(AugmentRanges().ranges(), 0.0)
        return cls(output_size=tuple(output_size), **zero)
