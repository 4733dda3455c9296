"""Pictures: skeletons on images and grids of augmented crops (OpenCV drawing); curves and joint
tracks (matplotlib, optional: ``pip install tensorpose[viz]``, imported only when such a picture
is drawn).

- :func:`draw_skeleton`, :func:`draw_people`, :func:`augment_grid`: 2D keypoints and links on
  images; :func:`draw_lift_frame`: a video frame with the 2D input and the 3D panel
  (:mod:`tensorpose.viz.panel3d`) beside.
- The commands' own pictures (reprojection errors, 3D skeletons) are drawn with OpenCV alone in
  :mod:`tensorpose.viz.charts`.
- :func:`plot_joint_xy`: one joint's x(t), y(t), raw vs smoothed.
- :func:`plot_curves`: train/val loss and MPJPE per epoch.

Colours of skeleton drawings: the person's LEFT side is drawn green, the RIGHT side orange, the
middle blue. On a correctly flipped crop the colours stay on the person's anatomical sides: for a
person facing the camera, green (left) stays on the image's right in every crop, flipped or not.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import cv2
import numpy as np
import torch

from ..errors import InputError
from ..skeleton import Skeleton

__all__ = [
    "augment_grid",
    "bone_colours_bgr",
    "draw_lift_frame",
    "draw_people",
    "draw_skeleton",
    "picture_grid",
    "plot_curves",
    "plot_joint_xy",
    "write_picture",
]

LEFT, RIGHT, MIDDLE = (40, 200, 40), (255, 140, 0), (60, 120, 255)  # RGB, every picture


def _hex(rgb: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


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


def draw_people(
    img: np.ndarray,
    people: dict,
    min_kp: float,
    skeleton: Skeleton,
    links: Sequence[tuple[int, int]],
) -> np.ndarray:
    """People on ``img`` (RGB): joints with confidence from ``min_kp`` and their ``links``, and
    box and score for people with at least three such joints. ``people``: ``boxes (n, 4)``
    xywh, ``scores (n,)``, ``keypoints (n, K, 3)``."""

    out = img
    thick = max(1, round(max(img.shape[:2]) / 400))
    for box, score, kp in zip(people["boxes"], people["scores"], people["keypoints"],
                              strict=True):  # fmt: skip
        shown = kp[:, 2] >= min_kp
        out = draw_skeleton(out, kp[:, :2], shown, skeleton, links, thick)
        if int(shown.sum()) < 3:  # e.g. a CenterNet centre without joints: no trained box
            continue
        x, y, w, h = (round(float(v)) for v in box)
        cv2.rectangle(out, (x, y), (x + w, y + h), (255, 255, 0), thick)
        cv2.putText(out, f"{float(score):.2f}", (x, max(y - 3, 10)), cv2.FONT_HERSHEY_SIMPLEX,
                    0.4 * thick, (255, 255, 0), thick, cv2.LINE_AA)  # fmt: skip
    return np.ascontiguousarray(out)


def draw_lift_frame(
    frame: np.ndarray,
    pixels: np.ndarray,
    missing: np.ndarray,
    panel: np.ndarray,
    skeleton_in: Skeleton,
) -> np.ndarray:
    """One frame of ``lift``'s video: the 2D input skeleton over ``frame`` (BGR; joints that
    were bridged dimmed) and the 3D ``panel`` beside it.

    Args:
        frame: ``(H, W, 3)`` uint8 BGR (drawn on in place).
        pixels: ``(J_in, 2)`` integer pixels; ``missing``: ``(J_in,)`` bool.
        panel: ``(H, P, 3)`` uint8 BGR (:meth:`tensorpose.viz.panel3d.Panel3D.draw`).

    Returns:
        ``(H, W + P, 3)`` uint8 BGR.
    """
    th = max(2, round(frame.shape[0] / 360))
    for (a, b), col in zip(skeleton_in.bones, _side_colours(skeleton_in), strict=True):
        dim = missing[a] or missing[b]
        cv2.line(frame, tuple(pixels[a]), tuple(pixels[b]),
                 tuple(v // 2 for v in col) if dim else col, th, cv2.LINE_AA)  # fmt: skip
    return np.concatenate([frame, panel], 1)


def _side_colours(skeleton: Skeleton) -> list[tuple[int, int, int]]:
    return [_side_colour(skeleton.names[b]) for _, b in skeleton.bones]


def bone_colours_bgr(skeleton: Skeleton) -> list[tuple[int, int, int]]:
    """One BGR colour per bone of ``skeleton``: left green, right orange, centre blue."""
    return _side_colours(skeleton)


def _side_colour(name: str) -> tuple[int, int, int]:
    """BGR: left green, right orange, centre blue."""
    if name.startswith("l_"):
        return (60, 180, 60)
    if name.startswith("r_"):
        return (0, 140, 255)
    return (200, 120, 40)


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
    each captioned with its flip and rotation (:func:`picture_grid` of
    :func:`~tensorpose.augment.crops.augmented_crops`; the arguments are that function's).

    Returns:
        ``(rows * H, (augmentations + 1) * W, 3)`` uint8 RGB.
    """
    from ..augment.crops import augmented_crops

    batch = augmented_crops(dataset, skeleton, cfg, people, augmentations, seed, backend)
    return picture_grid({**batch, "links": links})


def picture_grid(batch: dict) -> np.ndarray:
    """Training inputs with their people's joints, tiled ``columns`` to a row.

    Args:
        batch: ``images (N, H, W, 3)`` uint8 RGB; ``keypoints (N, P, K, 2)`` pixels;
            ``visibility (N, P, K)`` (joints > 0 drawn, people without any left out);
            ``skeleton``; optional ``links`` (default the skeleton's bones), ``captions``
            (N strings) and ``columns`` (default N: one row).

    Returns:
        ``(rows * H, columns * W, 3)`` uint8 RGB, thin white separators between columns.
    """
    images, kps, vis = batch["images"], batch["keypoints"], batch["visibility"]
    skeleton, links = batch["skeleton"], batch.get("links")
    captions = batch.get("captions")
    n = batch.get("columns") or len(images)
    tiles = []
    for i in range(len(images)):  # per picture: drawing
        t = np.ascontiguousarray(images[i]).copy()
        for p in range(kps[i].shape[0]):
            if bool((vis[i][p] > 0).any()):
                t = draw_skeleton(t, kps[i][p], vis[i][p], skeleton, links)
        if captions is not None:
            _caption(t, captions[i])
        tiles.append(t)
    W = tiles[0].shape[1]
    rows = [np.concatenate(tiles[r : r + n], axis=1) for r in range(0, len(tiles), n)]
    grid = np.concatenate(rows, axis=0)
    grid[:, W - 1 :: W][:, : n - 1] = 255  # thin separators
    return grid


def write_picture(path: Path, image: np.ndarray) -> Path:
    """Write ``image (H, W, 3)`` uint8 RGB to ``path`` (PNG, JPEG: by the suffix)."""
    cv2.imwrite(str(path), cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    return path


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


def plot_curves(history: Sequence[dict], path: str | Path, title: str = "") -> Path:
    """Two panels: loss (train, val) and MPJPE in mm (train, val, val P-MPJPE) per epoch."""
    plt = _pyplot()
    ep = [h["epoch"] for h in history]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    a.plot(ep, [h["train_loss"] for h in history], "o-", ms=3, label="train")
    a.plot(ep, [h["val_loss"] for h in history], "s-", ms=3, label="val (held out)")
    a.set_xlabel("epoch")
    a.set_ylabel("loss")
    a.set_yscale("log")
    a.set_title("loss")
    a.legend()
    b.plot(ep, [h["train_mpjpe_mm"] for h in history], "o-", ms=3, label="train MPJPE")
    b.plot(ep, [h["val_mpjpe_mm"] for h in history], "s-", ms=3, label="val MPJPE")
    b.plot(ep, [h["val_p_mpjpe_mm"] for h in history], "^--", ms=3, label="val P-MPJPE")
    b.set_xlabel("epoch")
    b.set_ylabel("mm (log scale)")
    b.set_title("joint error")
    b.set_yscale("log")
    b.legend()
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    plain = FuncFormatter(lambda v, _: f"{v:g}")
    for ax in (a, b):
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def augment_picture(
    out: str | Path,
    coco: str | Path | None = None,
    size: tuple[int, int] = (256, 192),
    people: Sequence[int] | None = None,
    rows: int = 4,
    augmentations: int = 5,
    backend: str = "device",
    seed: int = 0,
    overwrite: bool = False,
) -> list[int]:
    """Write :func:`augment_grid` of COCO people (``coco``: default the bundled subset) to the
    picture ``out``: ``size`` ``(H, W)`` crops, the dataset indices ``people`` (default
    ``rows`` people spread over the dataset). Returns the people drawn. ``out`` is a file, never
    a folder, device or FIFO; an existing one is replaced only with ``overwrite``, and the
    picture appears whole or not at all (:class:`~tensorpose.io.atomic.OutputFolder`).

    Raises:
        InputError: an index outside the dataset, a bad ``out``, or a picture that cannot be
            written.
    """
    from ..augment.crops import AugmentConfig
    from ..data.images import TopDownDataset
    from ..io.atomic import OutputFolder, check_output_file
    from ..io.coco import bundled_coco, load_coco_keypoints
    from ..skeleton import get_skeleton

    check_output_file(out, overwrite)

    if not cv2.haveImageWriter(str(out)):
        raise InputError(f"{out}: unknown image extension {Path(out).suffix!r} (use .png or .jpg)")
    H, W = size
    data = load_coco_keypoints(coco or bundled_coco())
    ds = TopDownDataset(data, aspect_ratio=W / H, cache_images=True)
    if not people:
        n = min(rows, len(ds))
        people = [round(i * (len(ds) - 1) / max(n - 1, 1)) for i in range(n)]
    bad = [i for i in people if not 0 <= i < len(ds)]
    if bad:
        raise InputError(f"people {bad}: the dataset has {len(ds)} people (0..{len(ds) - 1})")
    cfg = AugmentConfig(output_size=(H, W), shift=0.05)
    grid = augment_grid(ds, get_skeleton("coco17"), cfg, people, augmentations, seed, backend,
                        links=data.links)  # fmt: skip
    out = Path(out)
    with OutputFolder(out.parent, [out.name], overwrite=overwrite, say=lambda _: None) as o:
        if not cv2.imwrite(str(o.path(out.name)), cv2.cvtColor(grid, cv2.COLOR_RGB2BGR)):
            raise InputError(f"{out}: could not write the picture (unknown extension?)")
        o.commit()
    return list(people)


def plot_people_tracks(path: str | os.PathLike, centres: Sequence[np.ndarray],
                       labels: Sequence[str], title: str) -> None:  # fmt: skip
    """People's tracks from above: each person's centre ``(T, 3)`` (NaN: not found) on the
    ground plane (the first two world axes), and per frame which people were found."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 6), layout="constrained")
    FigureCanvasAgg(fig)
    ax, ax2 = fig.subplots(1, 2, width_ratios=[1, 1.4])
    colours = [f"C{i % 10}" for i in range(len(centres))]
    for c, label, colour in zip(centres, labels, colours, strict=True):  # a handful of people
        ax.plot(c[:, 0], c[:, 1], ".-", color=colour, ms=3, lw=0.8, label=label)
        here = np.flatnonzero(np.isfinite(c).all(-1))
        if here.size:
            ax.plot(*c[here[0], :2], "o", color=colour, ms=7)
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel("X (m)")
    ax.set_ylabel("Y (m)")
    ax.set_title("centres from above (dot: first frame)")
    ax.legend(fontsize=8)
    for i, (c, colour) in enumerate(zip(centres, colours, strict=True)):  # a handful of people
        here = np.flatnonzero(np.isfinite(c).all(-1))
        ax2.plot(here, np.full(here.shape, i), "|", color=colour, ms=12)
    ax2.set_yticks(np.arange(len(labels)), labels)
    ax2.set_ylim(len(labels) - 0.5, -0.5)
    ax2.set_xlabel("frame")
    ax2.set_title("frames where each person is found")
    fig.suptitle(title)
    fig.savefig(path, dpi=110)
