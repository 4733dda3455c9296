"""Pictures: skeletons on images and grids of augmented crops (OpenCV drawing), and curves
(matplotlib, optional: ``pip install tensorpose[viz]``, imported only when such a picture is
drawn).

Colours of skeleton drawings: the person's LEFT side is drawn green, the RIGHT side orange, the
middle blue. On a correctly flipped crop the colours stay on the person's anatomical sides: for a
person facing the camera, green (left) stays on the image's right in every crop, flipped or not.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import cv2
import numpy as np
import torch

from .skeleton import Skeleton

__all__ = ["augment_grid", "draw_skeleton", "plot_joint_xy"]

LEFT, RIGHT, MIDDLE = (40, 200, 40), (255, 140, 0), (60, 120, 255)  # RGB


def _side(name: str) -> int:
    return 1 if name.startswith("l_") else (2 if name.startswith("r_") else 0)


def draw_skeleton(
    image: np.ndarray,
    keypoints,
    visibility,
    skeleton: Skeleton,
    links: Sequence[tuple[int, int]] | None = None,
    thickness: int = 2,
) -> np.ndarray:
    """Draw one person's visible joints and links on a copy of ``image``.

    Args:
        image: ``(H, W, 3)`` uint8 RGB.
        keypoints: ``(K, 2)`` pixels.
        visibility: ``(K,)``; joints with ``visibility > 0`` are drawn.
        skeleton: joint names give the side colours.
        links: ``(a, b)`` joint pairs; default the skeleton's bones.
        thickness: line width.

    Returns:
        the picture, ``(H, W, 3)`` uint8 RGB. Left/right wrists get an ``L``/``R`` label.
    """
    out = np.ascontiguousarray(image).copy()
    kp = np.asarray(keypoints.detach().cpu() if hasattr(keypoints, "detach") else keypoints)
    vis = np.asarray(visibility.detach().cpu() if hasattr(visibility, "detach") else visibility)
    names = skeleton.names
    colours = {0: MIDDLE, 1: LEFT, 2: RIGHT}
    for a, b in links if links is not None else skeleton.bones:
        if vis[a] > 0 and vis[b] > 0:
            sa, sb = _side(names[a]), _side(names[b])
            side = sa if sa == sb else (sa or sb if 0 in (sa, sb) else 0)
            pa = tuple(round(float(v)) for v in kp[a])
            pb = tuple(round(float(v)) for v in kp[b])
            cv2.line(out, pa, pb, colours[side], thickness, cv2.LINE_AA)
    for j, name in enumerate(names):
        if vis[j] > 0:
            p = tuple(round(float(v)) for v in kp[j])
            cv2.circle(out, p, thickness + 1, colours[_side(name)], -1, cv2.LINE_AA)
            if name in ("l_wrist", "r_wrist"):
                cv2.putText(
                    out,
                    name[0].upper(),
                    (p[0] + 4, p[1] - 4),
                    cv2.FONT_HERSHEY_SIMPLEX,
                    0.5,
                    (255, 255, 255),
                    2,
                    cv2.LINE_AA,
                )
                cv2.putText(
                    out,
                    name[0].upper(),
                    (p[0] + 4, p[1] - 4),
                    cv2.FONT_HERSHEY_SIMPLEX,
                    0.5,
                    colours[_side(name)],
                    1,
                    cv2.LINE_AA,
                )
    return out


def _caption(img: np.ndarray, text: str) -> None:
    cv2.putText(img, text, (4, 14), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (0, 0, 0), 3, cv2.LINE_AA)
    cv2.putText(img, text, (4, 14), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (255, 255, 255), 1, cv2.LINE_AA)


def augment_grid(
    dataset,
    skeleton: Skeleton,
    cfg,
    people: Sequence[int] = (0, 1, 2, 3),
    augmentations: int = 5,
    seed: int = 0,
    backend: str = "device",
    links: Sequence[tuple[int, int]] | None = None,
) -> np.ndarray:
    """A grid: one row per person, the plain crop first, then ``augmentations`` random ones,
    each captioned with its flip and rotation.

    Args:
        dataset: a :class:`~tensorpose.data.images.TopDownDataset`.
        skeleton: the joints' skeleton.
        cfg: an :class:`~tensorpose.augment.AugmentConfig`.
        people: dataset indices.
        augmentations: random crops per person.
        seed: generator seed.
        backend: ``"device"`` (batched torch) or ``"cpu"`` (per-sample OpenCV).
        links: drawing links (e.g. the COCO file's); default the skeleton's bones.

    Returns:
        ``(rows * H, (augmentations + 1) * W, 3)`` uint8 RGB.
    """
    from .augment import AugmentConfig, CpuAugment, DeviceAugment, sample_params
    from .data.images import collate_topdown

    samples = [dataset[i] for i in people]
    n = augmentations + 1
    items = [s for s in samples for _ in range(n)]
    g = torch.Generator().manual_seed(seed)
    params = sample_params(cfg, len(items), g)
    plain = sample_params(AugmentConfig.identity(cfg.output_size), len(items), g)
    for f in params.__dataclass_fields__:  # column 0 of every row: the plain crop
        getattr(params, f)[::n] = getattr(plain, f)[::n]
    if backend == "cpu":
        out = CpuAugment(cfg, skeleton).apply(items, params)
    elif backend == "device":
        out = DeviceAugment(cfg, skeleton)(collate_topdown(items), params=params)
    else:
        raise ValueError(f"backend must be 'device' or 'cpu', got {backend!r}")
    crops = out["images"].round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).numpy()
    tiles = []
    for i in range(len(items)):
        t = draw_skeleton(crops[i], out["keypoints"][i], out["visibility"][i], skeleton, links)
        flip = bool(params.flip[i])
        deg = float(torch.rad2deg(params.rotation[i]))
        _caption(t, "plain" if i % n == 0 else f"{'FLIP ' if flip else ''}rot {deg:+.0f}")
        tiles.append(t)
    W = cfg.output_size[1]
    rows = [np.concatenate(tiles[r * n : (r + 1) * n], axis=1) for r in range(len(samples))]
    grid = np.concatenate(rows, axis=0)
    grid[:, W - 1 :: W][:, : n - 1] = 255  # thin separators
    return grid


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
