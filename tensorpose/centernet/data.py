"""Whole-image multi-person samples (CenterNet-style training): one item per image with every
annotated person, a letterbox window onto a square input, batched augmentation on the device
and the batch -> CenterNet targets call.

Who counts as a person:

- :func:`~tensorpose.io.coco.load_coco_keypoints` is called with ``min_keypoints=0`` (its default
  of 1 is the top-down rule): people without labelled keypoints stay, as centres. They are real
  people in the picture; dropping them would teach the centre heatmap that they are background.
  :func:`~tensorpose.ops.heatmap.centernet_targets` draws their centre and box (``box_mask``) but
  leaves them out of the size/offset/joint regression (``mask``), as the reference code does,
  and COCO's keypoint evaluation ignores them.
- Crowd annotations (``iscrowd=1``) are skipped by the loader (``skip_crowd=True``): a crowd box
  is not one person's centre. Their pixels count as background for the focal loss (the
  reference does not mask them either).
- Images without any person are left out unless ``keep_empty=True`` (background-only images).

Data flow: :class:`MultiPersonDataset` items (decoded uint8 image + people in image pixels) ->
:func:`collate_multiperson` (images zero-padded into one uint8 tensor, people padded to ``N``
slots with a ``valid`` mask) -> copy to the device -> :class:`MultiPersonAugment` (one affine
matrix per image: letterbox + scale/rotation/shift/flip; one batched warp; joint swap on flips;
colour) -> :func:`multiperson_targets` (map pixels, one :func:`centernet_targets` call).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np
import torch
from torch.utils.data import Dataset

from ..augment.crops import (
    AugmentConfig,
    AugmentParams,
    DeviceAugment,
    augment_matrices,
    flip_keypoints,
    sample_params,
)
from ..data.images import split_errors
from ..io.coco import CocoKeypoints, PersonRecord, bundled_coco, load_coco_keypoints
from ..io.video import read_image
from ..ops.affine import crop_matrix, transform_points, warp_affine
from ..ops.heatmap import centernet_targets
from ..skeleton import Skeleton

__all__ = [
    "MultiPersonAugment",
    "MultiPersonDataset",
    "box_corners",
    "collate_multiperson",
    "letterbox_matrices",
    "letterbox_windows",
    "multiperson_targets",
    "warp_images",
]


class MultiPersonDataset(Dataset):
    """One item per image: the decoded image and every person annotated in it.

    Args:
        source: a :class:`~tensorpose.io.coco.CocoKeypoints` (its records are used as they
            are), a list of :class:`~tensorpose.io.coco.PersonRecord`, or a COCO JSON path
            (loaded with ``min_keypoints=0``, crowds skipped: see the module docstring);
            default: the bundled COCO subset.
        keep_empty: also yield images without people (needs a ``CocoKeypoints`` or a path, which
            list the images).
        on_error: ``"raise"``: a missing or corrupt image raises, naming the file; ``"skip"``:
            the item comes back as ``{"error": message, ...}`` and :func:`collate_multiperson`
            drops it (listed under ``batch["errors"]``, warned about).
        cache_images: keep decoded images in memory (small datasets; per worker process).

    Items are dicts of numpy arrays, people in annotation order: ``image (H, W, 3)`` uint8
    RGB, ``boxes (N, 4)`` float32 COCO ``x, y, w, h``, ``keypoints (N, K, 2)`` float32,
    ``visibility (N, K)`` int64, ``area (N,)`` float32, ``ann_id (N,)`` int64, ``image_id``,
    ``index`` ints, ``file`` str.

    Attributes:
        image_ids: the images, in item order.
        annotations: the COCO JSON the people came from (``None`` for a list of records).
    """

    def __init__(
        self,
        source: CocoKeypoints | Sequence[PersonRecord] | str | Path | None = None,
        keep_empty: bool = False,
        on_error: str = "raise",
        cache_images: bool = False,
    ) -> None:
        if source is None:
            source = bundled_coco()
        if isinstance(source, (str, Path)):
            source = load_coco_keypoints(source, min_keypoints=0, warn=False)
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        records = list(source.records if isinstance(source, CocoKeypoints) else source)
        images: dict[int, dict] = {}
        if isinstance(source, CocoKeypoints):
            images = dict(source.images)
        elif keep_empty:
            raise ValueError("keep_empty=True needs a CocoKeypoints or a JSON path as source")
        for r in records:
            images.setdefault(r.image_id, {"file": r.file, "width": r.width, "height": r.height})
        people: dict[int, list[PersonRecord]] = {i: [] for i in images}
        for r in records:
            people[r.image_id].append(r)
        keep = sorted(i for i in images if keep_empty or people[i])
        self.image_ids = keep
        self.annotations = source.path if isinstance(source, CocoKeypoints) else None
        self.images = {i: images[i] for i in keep}
        self.people = {i: people[i] for i in keep}
        self.num_keypoints = records[0].keypoints.shape[0] if records else 17
        self.on_error = on_error
        self.cache_images = cache_images
        self._cache: dict[Path, np.ndarray] = {}

    @property
    def records(self) -> list[PersonRecord]:
        """Every person, image by image."""
        return [r for i in self.image_ids for r in self.people[i]]

    def __len__(self) -> int:
        return len(self.image_ids)

    def _image(self, info: dict) -> np.ndarray:
        img = self._cache.get(info["file"])
        if img is None:
            img = read_image(info["file"], (info["width"], info["height"]))
            if self.cache_images:
                self._cache[info["file"]] = img
        return img

    def __getitem__(self, index: int) -> dict:
        iid = self.image_ids[index]
        info, people = self.images[iid], self.people[iid]
        ids = {"image_id": int(iid), "index": int(index), "file": str(info["file"])}
        try:
            img = self._image(info)
        except (OSError, ValueError) as e:
            if self.on_error == "raise":
                raise
            return {"error": f"image {iid} (item {index}): {e}", **ids}
        K = self.num_keypoints
        return {
            "image": img,
            "boxes": np.array([r.bbox for r in people], np.float32).reshape(-1, 4),
            "keypoints": np.array([r.keypoints for r in people], np.float32).reshape(-1, K, 2),
            "visibility": np.array([r.visibility for r in people], np.int64).reshape(-1, K),
            "area": np.array([r.area for r in people], np.float32),
            "ann_id": np.array([r.ann_id for r in people], np.int64),
            **ids,
        }


def collate_multiperson(samples: Sequence[dict], max_people: int | None = None) -> dict:
    """Batch whole-image samples: images padded into one uint8 tensor, people into slots.

    Args:
        samples: :class:`MultiPersonDataset` items.
        max_people: ``N``, the slots per image (fixed shapes: GPU, ``torch.compile``); images
            with more people keep their ``N`` largest (by ``area``) and the batch counts the
            rest under ``dropped``. ``None``: ``N`` = the most people of any image in the batch.
            Use it as ``collate_fn=functools.partial(collate_multiperson, max_people=32)``.

    Returns:
        dict with ``images (B, H_max, W_max, 3)`` uint8 (zero padded below/right),
        ``image_size (B, 2)`` long (w, h), ``boxes (B, N, 4)`` (x, y, w, h),
        ``keypoints (B, N, K, 2)``, ``visibility (B, N, K)`` long, ``area (B, N)``,
        ``ann_id (B, N)`` (-1 in empty slots), ``valid (B, N)`` bool, ``image_id``/``index (B,)``,
        ``files`` (list), ``errors`` (messages of unreadable images, dropped), ``dropped`` (int).
    """
    good, errors = split_errors(samples)
    B = len(good)
    K = good[0]["keypoints"].shape[1] if good else 0
    counts = [len(s["boxes"]) for s in good]
    N = max(counts, default=0) if max_people is None else int(max_people)
    if N < 0:
        raise ValueError(f"max_people must be >= 0, got {max_people}")
    Hm = max((s["image"].shape[0] for s in good), default=0)
    Wm = max((s["image"].shape[1] for s in good), default=0)
    images = torch.zeros(B, Hm, Wm, 3, dtype=torch.uint8)
    boxes = np.zeros((B, N, 4), np.float32)
    keypoints = np.zeros((B, N, K, 2), np.float32)
    visibility = np.zeros((B, N, K), np.int64)
    area = np.zeros((B, N), np.float32)
    ann_id = np.full((B, N), -1, np.int64)
    valid = np.zeros((B, N), bool)
    dropped = 0
    for i, s in enumerate(good):  # a copy per image: the collate's job, not the hot path
        h, w = s["image"].shape[:2]
        images[i, :h, :w] = torch.from_numpy(s["image"])
        order = np.arange(counts[i])
        if counts[i] > N:
            order = np.sort(np.argsort(-s["area"], kind="stable")[:N])
            dropped += counts[i] - N
        n = len(order)
        boxes[i, :n] = s["boxes"][order]
        keypoints[i, :n] = s["keypoints"][order]
        visibility[i, :n] = s["visibility"][order]
        area[i, :n] = s["area"][order]
        ann_id[i, :n] = s["ann_id"][order]
        valid[i, :n] = True
    if dropped:
        warnings.warn(
            f"{dropped} people beyond max_people={N} left out of the batch (smallest first)",
            stacklevel=2,
        )
    return {
        "images": images,
        "image_size": torch.tensor(
            [[s["image"].shape[1], s["image"].shape[0]] for s in good], dtype=torch.long
        ).reshape(B, 2),
        "boxes": torch.from_numpy(boxes),
        "keypoints": torch.from_numpy(keypoints),
        "visibility": torch.from_numpy(visibility),
        "area": torch.from_numpy(area),
        "ann_id": torch.from_numpy(ann_id),
        "valid": torch.from_numpy(valid),
        "image_id": torch.tensor([s["image_id"] for s in good], dtype=torch.long),
        "index": torch.tensor([s["index"] for s in good], dtype=torch.long),
        "files": [s["file"] for s in good],
        "errors": errors,
        "dropped": dropped,
    }


# ---------------------------------------------------------------------- geometry
def letterbox_windows(image_size: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The square window that holds a whole image, centred (the letterbox).

    Args:
        image_size: ``(..., 2)`` image ``(w, h)`` in pixels.

    Returns:
        ``center (..., 2) = ((w - 1) / 2, (h - 1) / 2)`` (the middle of the pixel area
        ``[-0.5, w - 0.5] x [-0.5, h - 0.5]``) and ``scale (..., 2) = (s, s)``,
        ``s = max(w, h)``: for :func:`~tensorpose.ops.affine.crop_matrix` and
        :func:`~tensorpose.augment.crops.augment_matrices`.
    """
    wh = image_size.to(torch.float64 if image_size.dtype == torch.float64 else torch.float32)
    side = wh.amax(-1, keepdim=True)
    return (wh - 1) / 2, side.expand_as(wh).clone()


def letterbox_matrices(image_size: torch.Tensor, input_size: int) -> torch.Tensor:
    """``(B, 2, 3)`` image -> square input matrices of the plain letterbox (no augmentation):
    the whole image, aspect kept, centred in ``input_size x input_size``.

    Args:
        image_size: ``(B, 2)`` ``(w, h)``.
        input_size: side of the square input.
    """
    center, scale = letterbox_windows(image_size)
    return crop_matrix(center, scale, (int(input_size), int(input_size)))


def box_corners(boxes: torch.Tensor) -> torch.Tensor:
    """``(..., 4, 2)`` corners of COCO ``(x, y, w, h)`` boxes ``(..., 4)``: top-left, top-right,
    bottom-left, bottom-right."""
    x, y, w, h = boxes.unbind(-1)
    xs = torch.stack([x, x + w, x, x + w], -1)
    ys = torch.stack([y, y, y + h, y + h], -1)
    return torch.stack([xs, ys], -1)


def _transform_boxes(boxes: torch.Tensor, matrices: torch.Tensor) -> torch.Tensor:
    """COCO boxes ``(B, N, 4)`` through ``(B, 2, 3)`` -> axis-aligned ``x1, y1, x2, y2`` hulls
    of the transformed corners ``(B, N, 4)`` (rotations grow the box, as in the reference)."""
    B, N = boxes.shape[:2]
    c = transform_points(box_corners(boxes).reshape(B, N * 4, 2), matrices).reshape(B, N, 4, 2)
    return torch.cat([c.amin(-2), c.amax(-2)], -1)


class MultiPersonAugment:
    """Batched whole-image augmentation on the batch's device.

    One matrix per image (:func:`~tensorpose.augment.crops.augment_matrices` on the letterbox
    window:
    scale, rotation, shift and flip of ``cfg``), one :func:`~tensorpose.ops.affine.warp_affine`
    for the batch, left/right joint swap on flips
    (:func:`~tensorpose.augment.crops.flip_keypoints`),
    the photometric model of :class:`~tensorpose.augment.crops.DeviceAugment`.

    Args:
        cfg: the ranges; ``cfg.output_size`` is the square input ``(S, S)``.
        skeleton: for the joint swap.
        backend: how the images are warped: ``"device"`` (one batched ``grid_sample``, the GPU
            path) or ``"cpu"`` (``cv2.warpAffine`` image by image on CPU tensors: faster on a
            CPU, see ``benchmarks/multiperson.py``; same geometry, results within a grey level).
            People, matrices and colour are batched tensor code either way.

    Call with a :func:`collate_multiperson` batch on the device and a generator there
    (``params`` fixes the draw; ``plain=True``: the letterbox alone, no randomness). Returns the
    batch without ``images``/``boxes``/``keypoints``/``visibility`` and with ``images
    (B, 3, S, S)`` float in ``[0, 255]``, ``boxes (B, N, 4)`` ``x1, y1, x2, y2`` input pixels,
    ``keypoints (B, N, K, 2)`` input pixels, ``visibility (B, N, K)`` (0 where a joint left the
    input or the slot is empty), ``matrices (B, 2, 3)`` (image -> input), ``params``.
    """

    def __init__(self, cfg: AugmentConfig, skeleton: Skeleton, backend: str = "device") -> None:
        S = tuple(int(v) for v in cfg.output_size)
        if len(S) != 2 or S[0] != S[1]:
            raise ValueError(f"cfg.output_size must be square (S, S), got {cfg.output_size}")
        if backend not in ("device", "cpu"):
            raise ValueError(f"backend must be 'device' or 'cpu', got {backend!r}")
        self.backend = backend
        self.cfg = cfg
        self.skeleton = skeleton
        self.size = S
        self._colour = DeviceAugment(cfg, skeleton)
        c = cfg
        self._photometric = bool(
            c.brightness or c.contrast or c.saturation or c.hue
            or (c.noise and c.noise_prob) or c.shadow_prob
        )  # fmt: skip

    def __call__(
        self,
        batch: dict,
        generator: torch.Generator | None = None,
        params: AugmentParams | None = None,
        plain: bool = False,
    ) -> dict:
        images = batch["images"]
        if images.dim() != 4 or images.shape[-1] != 3:
            raise ValueError(f"images must be (B, H, W, 3), got {tuple(images.shape)}")
        B, dev = images.shape[0], images.device
        center, scale = letterbox_windows(batch["image_size"].to(dev))
        if plain:
            M = crop_matrix(center, scale, self.size)
        else:
            if params is None:
                params = sample_params(self.cfg, B, generator, dev)
            M = augment_matrices(center, scale, params, self.size)
        crops = self._warp(images, M)
        if not plain and self._photometric:
            crops = self._colour.photometric(crops, params, generator)
        kp = batch["keypoints"].float()
        N, K = kp.shape[1:3]
        kp = transform_points(kp.reshape(B, N * K, 2), M).reshape(B, N, K, 2)
        vis = batch["visibility"] * batch["valid"].unsqueeze(-1)
        if not plain:
            kp, vis = flip_keypoints(kp, vis, params.flip, self.skeleton)
        S = self.size[0]
        inside = (kp >= -0.5).all(-1) & (kp < S - 0.5).all(-1)
        vis = vis * inside
        boxes = _transform_boxes(batch["boxes"].float(), M)
        skip = ("images", "boxes", "keypoints", "visibility")
        out = {k: v for k, v in batch.items() if k not in skip}
        out.update(images=crops, boxes=boxes, keypoints=kp, visibility=vis, matrices=M,
                   params=params)  # fmt: skip
        return out

    def _warp(self, images: torch.Tensor, M: torch.Tensor) -> torch.Tensor:
        return warp_images(images, M, self.size, backend=self.backend)


def warp_images(
    images: torch.Tensor,
    matrices: torch.Tensor,
    size: tuple[int, int],
    index: torch.Tensor | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """Warp uint8 frames by affine matrices (bilinear, zero border), on the fast path per device.

    Args:
        images: ``(B, H, W, 3)`` uint8 (zero padding below/right reads like the border).
        matrices: ``(P, 2, 3)`` source -> output.
        size: ``(H, W)`` of the output.
        index: ``(P,)`` long, the source image of each matrix (several crops of one frame);
            default ``arange(B)``.
        backend: ``"device"``: one batched :func:`~tensorpose.ops.affine.warp_affine`;
            ``"cpu"``: ``cv2.warpAffine`` per matrix on CPU tensors (several times faster on a
            CPU, and it never copies or converts whole frames); ``"auto"``: ``cpu`` for CPU
            tensors, ``device`` otherwise.

    Returns:
        ``(P, 3, H, W)`` float32 in ``[0, 255]`` (the ``cpu`` backend rounds to integers).
    """
    if backend == "auto":
        backend = "cpu" if images.device.type == "cpu" else "device"
    H, W = (int(v) for v in size)
    if backend == "device":
        src = images.permute(0, 3, 1, 2)
        if index is not None:
            src = src.index_select(0, index)
        return warp_affine(src, matrices, (H, W), out_dtype=torch.float32)
    if backend != "cpu":
        raise ValueError(f"backend must be 'auto', 'device' or 'cpu', got {backend!r}")
    if images.device.type != "cpu":
        raise ValueError(f"backend 'cpu' needs CPU images, got them on {images.device}")
    src, Mn = images.numpy(), matrices.double().cpu().numpy()
    idx = range(len(Mn)) if index is None else index.tolist()
    out = torch.empty(len(Mn), H, W, 3, dtype=torch.uint8)
    dst = out.numpy()
    for i, j in enumerate(idx):  # per-warp OpenCV: the fast path on a CPU
        cv2.warpAffine(src[j], Mn[i], (W, H), dst=dst[i], flags=cv2.INTER_LINEAR,
                       borderMode=cv2.BORDER_CONSTANT, borderValue=0)  # fmt: skip
    return out.permute(0, 3, 1, 2).float()


def multiperson_targets(
    batch: dict,
    stride: int = 4,
    min_overlap: float = 0.7,
    max_radius: int | None = None,
) -> dict[str, torch.Tensor]:
    """CenterNet targets of an augmented batch (:class:`MultiPersonAugment` output).

    Input pixels become map pixels by one division by ``stride`` (decoding multiplies back),
    then one :func:`~tensorpose.ops.heatmap.centernet_targets` call for the batch.

    Args:
        batch: ``images (B, 3, S, S)``, ``boxes (B, N, 4)`` x1, y1, x2, y2 input pixels,
            ``keypoints (B, N, K, 2)``, ``visibility (B, N, K)``, ``valid (B, N)``.
        stride: input pixels per map pixel (4 for the deconvolution neck).
        min_overlap: CenterNet's radius parameter.
        max_radius: a static radius bound (GPU / ``torch.compile``; see
            :func:`~tensorpose.ops.heatmap.centernet_radius_bound`); ``None``: sized by the data.

    Returns:
        the dict of :func:`~tensorpose.ops.heatmap.centernet_targets` on ``(S / stride)^2`` maps.
    """
    S = batch["images"].shape[-1]
    if S % stride:
        raise ValueError(f"input size {S} must be a multiple of stride {stride}")
    H = W = S // stride
    return centernet_targets(
        batch["boxes"] / stride,
        batch["keypoints"] / stride,
        batch["visibility"],
        batch["valid"],
        (H, W),
        min_overlap=min_overlap,
        max_radius=max_radius,
    )
