"""Pictures. matplotlib is optional (``pip install tensorpose[viz]``) and imported only when a
picture is drawn."""

from __future__ import annotations

import os
from collections.abc import Mapping

import torch

__all__ = ["plot_joint_xy"]


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise ImportError(
            "drawing pictures needs matplotlib: pip install 'tensorpose[viz]' "
            "(or pip install matplotlib)"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_joint_xy(
    raw: torch.Tensor,
    smoothed: Mapping[str, torch.Tensor],
    path: str | os.PathLike,
    fps: float | None = None,
    title: str = "",
    dropped: torch.Tensor | None = None,
) -> None:
    """Save a PNG of one joint's ``x(t)`` and ``y(t)``: raw samples as dots (gaps where
    missing) and each smoothed curve as a line.

    Args:
        raw: ``(T, 2)`` pixels, NaN for missing.
        smoothed: label -> ``(T, 2)``.
        path: output PNG.
        fps: label the time axis in seconds (frames if ``None``).
        dropped: optional ``(T, 2)`` detections that were treated as missing (e.g. below the
            confidence threshold), drawn as crosses; NaN elsewhere.
    """
    plt = _pyplot()
    T = raw.shape[0]
    t = torch.arange(T, dtype=torch.float64)
    if fps:
        t = t / fps
    fig, axes = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for d, (ax, name) in enumerate(zip(axes, ("x", "y"), strict=True)):
        ax.plot(t, raw[:, d].cpu(), ".", color="0.45", ms=4, label="raw (missing = gap)")
        if dropped is not None and bool((~torch.isnan(dropped[:, d])).any()):
            ax.plot(t, dropped[:, d].cpu(), "x", color="tab:red", ms=5, label="dropped (low conf.)")
        for label, s in smoothed.items():
            ax.plot(t, s[:, d].detach().cpu(), "-", lw=1.6, label=label)
        ax.set_ylabel(f"{name} [px]")
        ax.grid(alpha=0.3)
    axes[1].invert_yaxis()  # image y points down: up on the plot is up in the image
    axes[1].set_xlabel("time [s]" if fps else "frame")
    axes[0].legend(loc="best", fontsize=8)
    if title:
        axes[0].set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
