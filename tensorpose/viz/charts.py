"""The commands' pictures drawn with OpenCV alone (no matplotlib, no torch): a command that
writes a picture starts as fast as one that does not.

- :func:`reprojection_errors_picture`: a triangulation's reprojection errors per joint
  (``triangulate``).
- :func:`skeletons_3d_picture`: 3D skeletons (and a reference behind them, e.g. the ground
  truth) seen orthographically from several viewpoints
  (``lift``).

Colours of skeletons as in :mod:`tensorpose.viz.draw`: the person's LEFT side green, the RIGHT side
orange, the middle blue.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import cv2
import numpy as np

__all__ = ["reprojection_errors_picture", "skeletons_3d_picture"]

FONT = cv2.FONT_HERSHEY_SIMPLEX
BLACK, GREY, WHITE = (0, 0, 0), (150, 150, 150), (255, 255, 255)
P90, MEDIAN, VALID = (139, 194, 245), (43, 130, 217), (216, 120, 60)  # BGR


def _text(img: np.ndarray, text: str, x: int, y: int, scale: float = 0.4,
          colour: tuple[int, int, int] = BLACK, align: str = "left") -> None:  # fmt: skip
    """``text`` with its baseline at ``y``, starting (``align="left"``), centred or ending at
    ``x``."""
    (w, _), _ = cv2.getTextSize(text, FONT, scale, 1)
    x0 = x - {"left": 0, "centre": w // 2, "right": w}[align]
    cv2.putText(img, text, (int(x0), int(y)), FONT, scale, colour, 1, cv2.LINE_AA)


def _vertical_text(img: np.ndarray, text: str, x: int, y: int, scale: float = 0.35) -> None:
    """``text`` turned 90 degrees (read bottom to top), its end at ``(x, y)`` (top centre)."""
    (w, h), base = cv2.getTextSize(text, FONT, scale, 1)
    strip = np.full((h + base + 2, w + 2, 3), 255, np.uint8)
    cv2.putText(strip, text, (1, h + 1), FONT, scale, BLACK, 1, cv2.LINE_AA)
    strip = cv2.rotate(strip, cv2.ROTATE_90_COUNTERCLOCKWISE)
    sh, sw = strip.shape[:2]
    x0, y0 = max(0, x - sw // 2), y
    sh, sw = min(sh, img.shape[0] - y0), min(sw, img.shape[1] - x0)
    img[y0 : y0 + sh, x0 : x0 + sw] = np.minimum(img[y0 : y0 + sh, x0 : x0 + sw], strip[:sh, :sw])


def _nice(x: float) -> float:
    """1, 2 or 5 times a power of ten, the smallest at least ``x`` (``x > 0``)."""
    power = 10 ** math.floor(math.log10(x))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= x)


def _per_joint(err: np.ndarray, valid: np.ndarray, q: float) -> np.ndarray:
    """The ``q``-th percentile of each joint's valid errors (NaN where none is valid)."""
    return np.array([np.percentile(err[valid[:, j], j], q) if valid[:, j].any() else np.nan
                     for j in range(err.shape[1])])  # fmt: skip


def _bars(img: np.ndarray, box: tuple[int, int, int, int], med: np.ndarray, p90: np.ndarray,
          valid_pct: np.ndarray, max_px: float) -> None:  # fmt: skip
    """Median and 90th-percentile bars per joint, the threshold dashed, valid % as dots."""
    x0, y0, x1, y1 = box
    J = med.shape[0]
    top = float(np.nanmax(np.r_[p90, max_px * 1.1, 1.0]))
    step = _nice(top / 5)

    def ypx(v: float) -> int:
        return round(y1 - (y1 - y0) * min(v, top) / top)

    for t in np.arange(0, top, step):
        cv2.line(img, (x0, ypx(t)), (x1, ypx(t)), (235, 235, 235), 1)
        _text(img, f"{t:g}", x0 - 4, ypx(t) + 4, 0.35, align="right")
    w = (x1 - x0) / J
    for j in range(J):
        left, right = int(x0 + w * (j + 0.15)), int(x0 + w * (j + 0.85))
        for v, col in ((p90[j], P90), (med[j], MEDIAN)):
            if np.isfinite(v):
                cv2.rectangle(img, (left, ypx(v)), (right, y1), col, -1)
        cy = round(y1 - (y1 - y0) * float(valid_pct[j]) / 115)
        cv2.circle(img, (int(x0 + w * (j + 0.5)), cy), 3, VALID, -1, cv2.LINE_AA)
    for xs in range(x0, x1, 12):  # the threshold, dashed
        cv2.line(img, (xs, ypx(max_px)), (min(xs + 6, x1), ypx(max_px)), BLACK, 1)
    cv2.rectangle(img, (x0, y0), (x1, y1), BLACK, 1)
    for pct in (0, 50, 100):
        _text(img, f"{pct}%", x1 + 4, int(y1 - (y1 - y0) * pct / 115) + 4, 0.35, VALID)
    _text(img, "mean reprojection error (px)", x0, y0 - 6, 0.4)
    _text(img, "valid frames (%)", x1, y0 - 6, 0.4, VALID, align="right")
    for i, (label, col) in enumerate((("90th percentile", P90), ("median", MEDIAN),
                                      (f"threshold {max_px:g} px", BLACK))):  # fmt: skip
        cv2.rectangle(img, (x0 + 8, y0 + 8 + 16 * i), (x0 + 20, y0 + 18 + 16 * i), col, -1)
        _text(img, label, x0 + 26, y0 + 18 + 16 * i, 0.35)


def _heatmap(img: np.ndarray, box: tuple[int, int, int, int], err: np.ndarray,
             valid: np.ndarray, names: Sequence[str], max_px: float) -> None:  # fmt: skip
    """Every frame's error per joint (rows) colour-mapped 0..max_px; white: not valid."""
    x0, y0, x1, y1 = box
    T, J = err.shape
    level = np.clip(np.nan_to_num(err.T) / max_px, 0, 1)
    cells = cv2.applyColorMap((level * 255).astype(np.uint8), cv2.COLORMAP_VIRIDIS)
    cells[~valid.T] = 255
    img[y0:y1, x0:x1] = cv2.resize(cells, (x1 - x0, y1 - y0), interpolation=cv2.INTER_NEAREST)
    cv2.rectangle(img, (x0, y0), (x1, y1), BLACK, 1)
    for j, name in enumerate(names):
        _text(img, name, x0 - 4, int(y0 + (j + 0.7) * (y1 - y0) / J), 0.32, align="right")
    step = max(1, int(_nice(T / 10)))
    for t in range(0, T, step):
        x = int(x0 + (t + 0.5) * (x1 - x0) / T)
        cv2.line(img, (x, y1), (x, y1 + 4), BLACK, 1)
        _text(img, str(t), x, y1 + 16, 0.35, align="centre")
    _text(img, "frame", (x0 + x1) // 2, y1 + 32, 0.4, align="centre")
    bar = cv2.applyColorMap(np.linspace(255, 0, y1 - y0).astype(np.uint8)[:, None],
                            cv2.COLORMAP_VIRIDIS)  # fmt: skip
    img[y0:y1, x1 + 20 : x1 + 36] = np.repeat(bar, 16, 1)
    _text(img, f"{max_px:g}", x1 + 40, y0 + 10, 0.35)
    _text(img, "0 px", x1 + 40, y1, 0.35)
    _text(img, "blank: not valid", x1 + 40, (y0 + y1) // 2, 0.35)


def reprojection_errors_picture(path: str | os.PathLike, mean_error: np.ndarray,
                                valid: np.ndarray, names: list[str], max_px: float,
                                title: str) -> None:  # fmt: skip
    """Per-joint reprojection errors (PNG at ``path``): median and 90th percentile over the
    valid frames with the threshold ``max_px``, the valid fraction, and below the error of
    every frame and joint.

    Args:
        mean_error: ``(T, J)`` mean reprojection error in pixels; ``valid``: ``(T, J)`` bool.
    """
    err, valid = np.asarray(mean_error, np.float64), np.asarray(valid, bool)
    img = np.full((900, 1320, 3), 255, np.uint8)
    _text(img, title, 660, 24, 0.5, align="centre")
    _bars(img, (130, 50, 1200, 330), _per_joint(err, valid, 50), _per_joint(err, valid, 90),
          valid.mean(0) * 100, max_px)  # fmt: skip
    J = err.shape[1]
    for j, name in enumerate(names):
        _vertical_text(img, name, int(130 + (j + 0.5) * 1070 / J), 336)
    _heatmap(img, (130, 450, 1200, 850), err, valid, names, max_px)
    if not cv2.imwrite(str(path), img):
        raise OSError(f"{path}: could not write the PNG")


def _skeleton_2d(img: np.ndarray, p: np.ndarray, bones: Sequence, colours: Sequence,
                 extent: float, size: int, ox: int, oy: int, dots: bool) -> None:  # fmt: skip
    """One orthographic skeleton ``p (J, 2)`` into the panel at ``(ox, oy)`` of ``img``."""
    px = p * (0.42 * size / extent) + size / 2
    ok = np.isfinite(px).all(-1)  # a joint the lifter left out is not drawn
    q = np.nan_to_num(px).round().astype(int) + np.array([ox, oy + 8])
    for (a, b), col in zip(bones, colours, strict=True):
        if ok[a] and ok[b]:
            cv2.line(img, (int(q[a, 0]), int(q[a, 1])), (int(q[b, 0]), int(q[b, 1])), col, 2,
                     cv2.LINE_AA)  # fmt: skip
    if dots:
        for x, y in q[ok]:
            cv2.circle(img, (int(x), int(y)), 2, BLACK, -1, cv2.LINE_AA)


def skeletons_3d_picture(path: str | os.PathLike, joints: np.ndarray, bones: Sequence,
                         colours: Sequence[tuple[int, int, int]], labels: Sequence[str],
                         title: str, views: Sequence[tuple[float, str]] = (
                             (0.0, "camera view"), (90.0, "side view")),
                         size: int = 260, reference: np.ndarray | None = None,
                         ) -> None:  # fmt: skip
    """3D skeletons ``(F, J, 3)`` (camera frame: x right, y down, z forward; root-relative),
    one column per frame and one row per view ``(yaw in degrees about the vertical, name)``,
    seen orthographically with one scale for every panel (PNG at ``path``).

    Args:
        bones: ``(a, b)`` joint index pairs; ``colours``: one BGR colour per bone.
        labels: one caption per frame.
        reference: ``(F, J, 3)`` another skeleton per frame (e.g. the ground truth), drawn in
            light grey behind ``joints``.
    """
    joints = np.asarray(joints, np.float64)
    F = joints.shape[0]
    ref = None if reference is None else np.asarray(reference, np.float64)
    turned, turned_ref = [], []
    for yaw, _ in views:
        a = math.radians(yaw)
        R = np.array([[math.cos(a), 0.0, math.sin(a)], [0.0, 1.0, 0.0]])
        turned.append(joints @ R.T)
        turned_ref.append(None if ref is None else ref @ R.T)
    everything = np.stack(turned if ref is None else turned + turned_ref)
    extent = max(float(np.nanmax(np.abs(everything), initial=0.0)), 1e-6)
    head = 34
    img = np.full((head + size * len(views), size * F, 3), 255, np.uint8)
    _text(img, title + "   (left limbs green, right limbs orange)", img.shape[1] // 2, 22, 0.45,
          align="centre")  # fmt: skip
    grey = [(200, 200, 200)] * len(bones)
    for r, (_, vname) in enumerate(views):
        for f in range(F):
            ox, oy = f * size, head + r * size
            cv2.rectangle(img, (ox, oy), (ox + size - 1, oy + size - 1), (220, 220, 220), 1)
            if ref is not None:
                _skeleton_2d(img, turned_ref[r][f], bones, grey, extent, size, ox, oy, False)
            _skeleton_2d(img, turned[r][f], bones, colours, extent, size, ox, oy, True)
            _text(img, f"{labels[f]}: {vname}", ox + 6, oy + 16, 0.4)
    if not cv2.imwrite(str(path), img):
        raise OSError(f"{path}: could not write the PNG")
