"""Top-down person samples from images: decode to uint8, attach the person's crop window, and
hand raw uint8 images to the device, where one affine warp per sample makes the crop.

A sample is the whole decoded image plus the window (``center``, ``scale``) and the keypoints
in image pixels; :func:`collate_topdown` pads a batch of images into one uint8 tensor (zero
padding changes nothing for a warp with a zero border). The crop, the augmentation and the
targets then happen batched on the device (:class:`tensorpose.augment.crops.DeviceAugment`) or, on a
CPU, per sample in the DataLoader workers (:class:`tensorpose.augment.crops.CpuAugment` as the
collate function).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from ..io.coco import CocoKeypoints, PersonRecord, bundled_coco, load_coco_keypoints
from ..io.video import read_image
from ..ops.affine import box_to_center_scale

__all__ = ["TopDownDataset", "collate_topdown"]


class TopDownDataset(Dataset):
    """One item per annotated person: the decoded image and the person's crop window.

    Args:
        source: a :class:`~tensorpose.io.coco.CocoKeypoints`, a list of
            :class:`~tensorpose.io.coco.PersonRecord`, or a COCO JSON path; default: the
            bundled COCO subset.
        aspect_ratio: crop width / height (``192 / 256`` for the usual 256x192 crops).
        padding: window enlargement around the person box (1.25).
        on_error: ``"raise"`` (default): a missing or corrupt image raises, naming the file.
            ``"skip"``: the item comes back as ``{"error": message, ...ids}``; the collate
            functions drop it from the batch, list it under ``batch["errors"]`` and warn, so an
            epoch never loses a sample silently.
        cache_images: keep decoded images in memory (small datasets; per worker process).
        reduce_to: ``(H, W)`` of the crops (the CPU backend only): decode each JPEG at the
            largest reduction ``r`` of 1, 2, 4, 8 (libjpeg's scaled IDCT, a fraction of the
            cost) for which the person's smallest window, ``scale * min_window``, still has at
            least one decoded pixel per crop pixel. The item's ``reduction`` says which ``r``;
            its keypoints, window and :class:`~tensorpose.augment.crops.CpuAugment`'s matrices stay
            in
            full-resolution pixels (CpuAugment warps the reduced image with the matrix composed
            exactly with the reduction). ``None``: decode whole.
        min_window: the smallest window scale factor the augmentation draws (``1 - scale``).

    Items are dicts of numpy arrays: ``image (H, W, 3)`` uint8 RGB, ``center (2,)``,
    ``scale (2,)`` float32 pixels, ``keypoints (K, 2)`` float32, ``visibility (K,)`` int64,
    ``bbox (4,)`` float32, ``area`` float, ``ann_id``, ``image_id``, ``index``,
    ``reduction`` ints.
    """

    def __init__(
        self,
        source: CocoKeypoints | Sequence[PersonRecord] | str | Path | None = None,
        aspect_ratio: float = 192 / 256,
        padding: float = 1.25,
        on_error: str = "raise",
        cache_images: bool = False,
        reduce_to: tuple[int, int] | None = None,
        min_window: float = 1.0,
    ) -> None:
        if source is None:
            source = bundled_coco()
        if isinstance(source, (str, Path)):
            source = load_coco_keypoints(source)
        self.records = list(source.records if isinstance(source, CocoKeypoints) else source)
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        self.on_error = on_error
        self.cache_images = cache_images
        self._cache: dict[tuple[Path, int], np.ndarray] = {}
        boxes = torch.tensor(np.array([r.bbox for r in self.records]).reshape(-1, 4))
        center, scale = box_to_center_scale(boxes, aspect_ratio, padding)
        self.center = center.float().numpy()
        self.scale = scale.float().numpy()
        self.reduction = np.ones(len(self.records), np.int64)
        if reduce_to is not None:  # decoded pixels per crop pixel at the smallest window
            ratio = (self.scale * min_window / np.array(reduce_to[::-1], np.float32)).min(-1)
            for r in (2, 4, 8):
                self.reduction[ratio >= r] = r

    def __len__(self) -> int:
        return len(self.records)

    def _image(self, r: PersonRecord, reduction: int = 1) -> tuple[np.ndarray, int]:
        """The decoded image and its actual reduction (1 for files other than JPEG)."""
        img = self._cache.get((r.file, reduction))
        if img is None:
            img = read_image(r.file, (r.width, r.height), reduction)
            if self.cache_images:
                self._cache[(r.file, reduction)] = img
        return img, (reduction if img.shape[1] != r.width or img.shape[0] != r.height else 1)

    def __getitem__(self, index: int) -> dict:
        r = self.records[index]
        ids = {"ann_id": r.ann_id, "image_id": r.image_id, "index": int(index)}
        try:
            img, reduction = self._image(r, int(self.reduction[index]))
        except (OSError, ValueError) as e:
            if self.on_error == "raise":
                raise
            return {"error": f"sample {index} (annotation {r.ann_id}): {e}", **ids}
        return {
            "image": img,
            "center": self.center[index],
            "scale": self.scale[index],
            "keypoints": r.keypoints.astype(np.float32),
            "visibility": r.visibility.astype(np.int64),
            "bbox": r.bbox.astype(np.float32),
            "area": float(r.area),
            "reduction": reduction,
            **ids,
        }


def split_errors(samples: Sequence[dict]) -> tuple[list[dict], list[str]]:
    """Drop failed items (``"error"`` key) from a batch, warn, and return their messages."""
    good = [s for s in samples if "error" not in s]
    errors = [s["error"] for s in samples if "error" in s]
    if errors:
        warnings.warn(f"{len(errors)} sample(s) skipped: {'; '.join(errors)}", stacklevel=3)
    return good, errors


def collate_topdown(samples: Sequence[dict]) -> dict:
    """Batch raw samples, keeping the images uint8 for the device.

    Returns:
        dict with ``images (B, H_max, W_max, 3)`` uint8 (zero padded below/right; view it as
        ``(B, 3, H, W)`` with ``.permute(0, 3, 1, 2)``), ``image_size (B, 2)`` (w, h),
        ``center``/``scale (B, 2)``, ``keypoints (B, K, 2)``, ``visibility (B, K)``,
        ``bbox (B, 4)``, ``area (B,)``, ``ann_id``/``image_id``/``index (B,)``, and
        ``errors``: messages of the samples that could not be read (dropped).
    """
    good, errors = split_errors(samples)
    if any(s.get("reduction", 1) != 1 for s in good):
        raise ValueError("images decoded at reduced size need the cpu augmentation backend")
    B = len(good)
    Hm = max((s["image"].shape[0] for s in good), default=0)
    Wm = max((s["image"].shape[1] for s in good), default=0)
    images = torch.zeros(B, Hm, Wm, 3, dtype=torch.uint8)
    for i, s in enumerate(good):  # a copy per sample: the collate's job, not the hot path
        h, w = s["image"].shape[:2]
        images[i, :h, :w] = torch.from_numpy(s["image"])
    batch = stack_fields(good)
    batch["images"] = images
    batch["image_size"] = torch.tensor(
        [[s["image"].shape[1], s["image"].shape[0]] for s in good], dtype=torch.long
    ).reshape(B, 2)
    batch["errors"] = errors
    return batch


def stack_fields(good: Sequence[dict]) -> dict:
    """The per-person fields of raw samples as batched tensors (everything but the image)."""
    out = {}
    for key, dtype in (
        ("center", torch.float32),
        ("scale", torch.float32),
        ("keypoints", torch.float32),
        ("visibility", torch.long),
        ("bbox", torch.float32),
    ):
        out[key] = torch.as_tensor(np.stack([s[key] for s in good]) if good else [], dtype=dtype)
    for key, dtype in (
        ("area", torch.float32),
        ("ann_id", torch.long),
        ("image_id", torch.long),
        ("index", torch.long),
    ):
        out[key] = torch.tensor([s[key] for s in good], dtype=dtype)
    return out
