"""The ranges of the top-down augmentation as plain dataclasses (no torch, no OpenCV), shared by
:mod:`tensorpose.augment.crops` (which draws and applies them) and the 2D tasks' ``data`` config
section (which exposes the same names and defaults as config keys)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

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

    scale: float = field(default=0.3, metadata={"range": (0, 1, "right-open")})
    rotation: float = field(default=30.0, metadata={"range": (0, 180, "closed")})
    rotation_prob: float = field(default=0.6, metadata={"range": (0, 1, "closed")})
    shift: float = field(default=0.0, metadata={"range": (0, 1, "closed")})
    flip_prob: float = field(default=0.5, metadata={"range": (0, 1, "closed")})
    brightness: float = field(default=0.2, metadata={"range": (0, 1, "closed")})
    contrast: float = field(default=0.2, metadata={"range": (0, 1, "closed")})
    saturation: float = field(default=0.2, metadata={"range": (0, 1, "closed")})
    hue: float = field(default=0.02, metadata={"range": (0, 0.5, "closed")})
    noise: float = field(default=5.0, metadata={"range": (0, 255, "closed")})
    noise_prob: float = field(default=0.3, metadata={"range": (0, 1, "closed")})
    shadow_prob: float = field(default=0.3, metadata={"range": (0, 1, "closed")})

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
