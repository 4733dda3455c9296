"""Pictures: skeletons on images and grids of augmented crops (OpenCV drawing); curves, joint
tracks and 3D skeletons (matplotlib, optional: ``pip install tensorpose[viz]``, imported only when
such a picture is drawn).

- :func:`draw_skeleton`, :func:`draw_people`, :func:`augment_grid`: 2D keypoints and links on
  images; :func:`draw_lift_frame`: a video frame with the 2D input and the 3D panel
  (:mod:`tensorpose.viz.panel3d`) beside.
- The commands' own pictures (reprojection errors, lifted 3D skeletons) are drawn with OpenCV
  alone in :mod:`tensorpose.viz.charts`.
- :func:`plot_joint_xy`: one joint's x(t), y(t), raw vs smoothed.
- :func:`plot_curves`: train/val loss and MPJPE per epoch.
- :func:`plot_skeletons_3d`: ground-truth and predicted 3D skeletons side by side, from several
  viewpoints. Inputs are camera coordinates (x right, y down, z forward); plots show them with
  up = -y so people stand upright.

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
    "plot_curves",
    "plot_joint_xy",
    "plot_skeletons_3d",
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
    each captioned with its flip and rotation.

    Args:
        dataset: a :class:`~tensorpose.data.images.TopDownDataset`.
        skeleton: the joints' skeleton.
        cfg: an :class:`~tensorpose.augment.crops.AugmentConfig`.
        people: dataset indices.
        augmentations: random crops per person.
        seed: generator seed.
        backend: ``"device"`` (batched torch) or ``"cpu"`` (per-sample OpenCV).
        links: drawing links (e.g. the COCO file's); default the skeleton's bones.

    Returns:
        ``(rows * H, (augmentations + 1) * W, 3)`` uint8 RGB.
    """
    from ..augment.crops import AugmentConfig, CpuAugment, DeviceAugment, sample_params
    from ..data.images import collate_topdown

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


def _bone_colours(skeleton: Skeleton) -> list[str]:
    out = []
    for _, child in skeleton.bones:
        n = skeleton.names[child].lower()
        left = n.startswith(("l_", "left"))
        right = n.startswith(("r_", "right"))
        out.append(_hex(LEFT) if left else _hex(RIGHT) if right else _hex(MIDDLE))
    return out


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


def plot_skeletons_3d(
    gt: torch.Tensor | None,
    pred: torch.Tensor,
    skeleton: Skeleton,
    path: str | Path,
    views: Sequence[tuple[float, float, str]] = (
        (8.0, -90.0, "camera view"),
        (8.0, 0.0, "side view"),
    ),
    labels: Sequence[str] | None = None,
    title: str = "",
) -> Path:
    """Ground truth and prediction for ``F`` frames side by side (columns: frame x {ground
    truth, prediction}; the prediction panel repeats the ground truth in light grey), one row per
    viewpoint ``(elevation, azimuth, name)`` in degrees (azimuth -90 looks along the camera's
    optical axis, 0 from the subject's side).

    Args:
        gt, pred: ``(F, J, 3)`` root-relative camera coordinates (metres); ``gt=None``: the
            prediction alone, one panel per frame and view.
        labels: per-frame captions (e.g. frame number and error).
    """
    plt = _pyplot()
    pred = pred.detach().cpu().double()
    alone = gt is None
    gt = pred if alone else gt.detach().cpu().double()
    F = gt.shape[0]
    cols = 1 if alone else 2
    colours = _bone_colours(skeleton)

    # camera (x right, y down, z forward) -> plot (X = x, Y = z depth, Z = -y up)
    def to_plot(p: torch.Tensor) -> torch.Tensor:
        return torch.stack([p[..., 0], p[..., 2], -p[..., 1]], -1)

    g, p = to_plot(gt), to_plot(pred)
    both = torch.cat([g, p])  # (2F, J, 3)
    centre = (both.amax((0, 1)) + both.amin((0, 1))) / 2
    half = float((both.amax((0, 1)) - both.amin((0, 1))).max()) / 2 * 1.05
    fig = plt.figure(figsize=(2.3 * cols * F, 2.6 * len(views)))
    for r, (elev, azim, vname) in enumerate(views):
        for f in range(F):
            panels = ((g[f], "ground truth", None), (p[f], "prediction", g[f]))
            if alone:
                panels = ((p[f], "prediction", None),)
            for k, (pose, name, ghost) in enumerate(panels):
                ax = fig.add_subplot(
                    len(views), cols * F, r * cols * F + cols * f + k + 1, projection="3d"
                )
                if ghost is not None:
                    for a, b_ in skeleton.bones:
                        seg = ghost[[a, b_]]
                        ax.plot(seg[:, 0], seg[:, 1], seg[:, 2], color="0.8", lw=1.5)
                for (a, b_), col in zip(skeleton.bones, colours, strict=True):
                    seg = pose[[a, b_]]
                    ax.plot(seg[:, 0], seg[:, 1], seg[:, 2], color=col, lw=2.2)
                ax.scatter(pose[:, 0], pose[:, 1], pose[:, 2], s=5, color="k", depthshade=False)
                ax.view_init(elev=elev, azim=azim)
                for i, setter in enumerate((ax.set_xlim, ax.set_ylim, ax.set_zlim)):
                    c = float(centre[i])
                    setter(c - half, c + half)
                ax.set_box_aspect((1, 1, 1))
                ax.set_xticklabels([])
                ax.set_yticklabels([])
                ax.set_zticklabels([])
                ax.set_xlabel("x", labelpad=-12, fontsize=7)
                ax.set_ylabel("depth", labelpad=-12, fontsize=7)
                ax.set_zlabel("up", labelpad=-12, fontsize=7)
                cap = f"{vname}: {name}"
                if r == 0 and labels is not None:
                    cap = f"{labels[f]}\n{cap}"
                ax.set_title(cap, fontsize=8)
    if title:
        fig.suptitle(title + "   (left limbs green, right limbs orange)", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=90)
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
) -> list[int]:
    """Write :func:`augment_grid` of COCO people (``coco``: default the bundled subset) to the
    picture ``out``: ``size`` ``(H, W)`` crops, the dataset indices ``people`` (default
    ``rows`` people spread over the dataset). Returns the people drawn.

    Raises:
        ValueError: an index outside the dataset, or a picture that cannot be written.
    """
    from ..augment.crops import AugmentConfig
    from ..data.images import TopDownDataset
    from ..io.coco import bundled_coco, load_coco_keypoints
    from ..skeleton import get_skeleton

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
    out.parent.mkdir(parents=True, exist_ok=True)
    if not cv2.imwrite(str(out), cv2.cvtColor(grid, cv2.COLOR_RGB2BGR)):
        raise InputError(f"{out}: could not write the picture (unknown extension?)")
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
