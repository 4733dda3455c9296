"""Pictures with OpenCV drawing (no matplotlib): skeletons on images and a grid of augmented
crops, so a person can check that flips swap sides and rotations carry the joints.

Colours: the person's LEFT side is drawn green, the RIGHT side orange, the middle blue. On a
correctly flipped crop the colours stay on the person's anatomical sides: for a person facing
the camera, green (left) stays on the image's right in every crop, flipped or not.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np
import torch

from .skeleton import Skeleton

__all__ = ["augment_grid", "draw_skeleton"]

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
