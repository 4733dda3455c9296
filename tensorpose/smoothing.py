"""Smoothing keypoint tracks: every joint of every track filtered at once
(:mod:`tensorpose.ops.filters`), with the figures that say what changed (jitter, lag,
missing joints). ``tensorpose smooth`` (:mod:`tensorpose.apps.smooth`) reads and writes the
folders."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .errors import InputError
from .io.tracks import Tracks
from .ops.filters import jitter, kalman_filter, kalman_smoother, lag, one_euro_filter

__all__ = ["METHODS", "FilterSettings", "smooth", "smooth_tracks"]

METHODS = ("kalman", "rts", "one-euro")


@dataclass
class FilterSettings:
    """The filter and its parameters.

    Attributes:
        method: ``kalman`` (forward filter), ``rts`` (Rauch-Tung-Striebel smoother) or
            ``one-euro``.
        fps: frame rate of the tracks.
        model: Kalman motion model, ``velocity`` or ``acceleration``.
        process_noise: Kalman q, (px/frame^2)^2.
        measurement_noise: Kalman r, px^2.
        min_cutoff, beta, d_cutoff: One-Euro parameters (Hz, 1/px, Hz).
    """

    method: str = "rts"
    fps: float = 30.0
    model: str = "velocity"
    process_noise: float = 0.5
    measurement_noise: float = 9.0
    min_cutoff: float = 1.0
    beta: float = 0.01
    d_cutoff: float = 1.0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise InputError(f"--method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.model not in ("velocity", "acceleration"):
            raise InputError(f"--model must be velocity or acceleration, got {self.model!r}")
        ranges = {"fps": (0.1, 10_000), "process_noise": (1e-12, 1e12),
                  "measurement_noise": (1e-12, 1e12), "min_cutoff": (1e-6, 1e6),
                  "beta": (0.0, 1e6), "d_cutoff": (1e-6, 1e6)}  # fmt: skip
        for key, (lo, hi) in ranges.items():
            v = getattr(self, key)
            if not (isinstance(v, int | float) and math.isfinite(v) and lo <= v <= hi):
                flag = "--" + key.replace("_", "-")
                raise InputError(f"{flag} must be a number in [{lo:g}, {hi:g}], got {v!r}")


def smooth(x: torch.Tensor, settings: FilterSettings) -> torch.Tensor:
    """Filter ``x (..., T, 2)`` along ``T`` (NaN = missing) with ``settings``."""
    s = settings
    if s.method == "one-euro":
        return one_euro_filter(x, s.fps, s.min_cutoff, s.beta, s.d_cutoff)
    if s.method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {s.method!r}")
    fn = kalman_filter if s.method == "kalman" else kalman_smoother
    return fn(x, model=s.model, process_noise=s.process_noise,
              measurement_noise=s.measurement_noise)  # fmt: skip


def smooth_tracks(
    tracks: Tracks, settings: FilterSettings
) -> tuple[dict, torch.Tensor, torch.Tensor]:
    """Smooth every joint of every track of ``tracks``.

    Returns:
        the figures (``frames``, ``tracks``, ``layout``, ``layout_reason``, ``missing_pct``:
        joints of present people without a usable detection, ``low_confidence``: detections
        dropped for low confidence, ``jitter_raw``/``jitter_smoothed`` in px/frame^2 on the
        same frames, ``lag`` in frames), ``raw (P, K, T, 2)`` and ``smoothed (P, K, T, 2)``.
    """
    kp = tracks.keypoints  # (T, P, K, 3), NaN = missing
    raw = kp[..., :2].permute(1, 2, 0, 3)  # (P, K, T, 2): filters run along T
    sm = smooth(raw, settings)
    T, P, K = kp.shape[:3]
    present = (tracks.raw[..., 2] > 0).any(-1, keepdim=True).expand(T, P, K)
    return (
        {
            "frames": T,
            "tracks": P,
            "layout": tracks.layout,
            "layout_reason": tracks.layout_reason,
            "missing_pct": float(torch.isnan(kp[..., 0])[present].float().mean() * 100),
            "low_confidence": int(tracks.low_confidence.sum()),
            "jitter_raw": float(jitter(raw)),
            "jitter_smoothed": float(jitter(sm.masked_fill(raw.isnan(), float("nan")))),
            "lag": float(lag(raw, sm, max_lag=min(10, T - 1))) if T > 1 else 0.0,
        },
        raw,
        sm,
    )
