"""CenterNet around its network: input geometry, targets, loss, decoding settings, COCO
results (:class:`CenterNet`, usable in a plain training loop, see
``scripts/centernet_overfit.py``) and COCO keypoint AP of a model (:func:`evaluate`).

OpenCV (:mod:`tensorpose.centernet.data`) is imported by the methods that warp."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.utils.data import DataLoader

from ..augment.config import AugmentConfig
from ..io.coco import coco_results
from ..losses import centernet_loss
from ..metrics.pose2d import COCO_SIGMAS, coco_keypoint_ap
from ..ops.heatmap import centernet_radius_bound
from ..skeleton import Skeleton, get_skeleton
from .model import IMAGENET_MEAN, IMAGENET_STD, STRIDE, decode_people

if TYPE_CHECKING:
    from .data import MultiPersonDataset

__all__ = ["CenterNet", "evaluate"]


# ---------------------------------------------------------------------- CenterNet logic
class CenterNet:
    """Everything CenterNet needs around the model: input geometry, targets, loss, decoding.

    Args:
        skeleton: joint names and flip pairs (a name for :func:`tensorpose.skeleton.get_skeleton`).
        input_size: side ``S`` of the square network input (a multiple of 32).
        augment: training augmentation ranges (``output_size`` is set to ``(S, S)``); default
            :class:`~tensorpose.augment.crops.AugmentConfig`'s with ``S``.
        mean, std: input normalisation, fractions of 255 (ImageNet's by default).
        min_overlap: CenterNet's gaussian-radius parameter.
        static_radius: draw targets with the static radius bound (fixed shapes, no host read:
            GPU / ``torch.compile``); ``False`` sizes the work by the data (the CPU choice).
        loss_weights: per-term weights for :func:`~tensorpose.losses.centernet_loss`.
        top_k: people decoded per image (COCO evaluates at most 20).
        joint_threshold: joint-heatmap peak score needed to snap a regressed joint to it.
        nms_threshold: OKS above which a lower-scored person is suppressed (``>= 1``: off).
        sigmas: per-joint OKS constants for the NMS (COCO's for 17 joints).
    """

    def __init__(
        self,
        skeleton: Skeleton | str = "coco17",
        input_size: int = 256,
        augment: AugmentConfig | None = None,
        mean: Sequence[float] = IMAGENET_MEAN,
        std: Sequence[float] = IMAGENET_STD,
        min_overlap: float = 0.7,
        static_radius: bool = False,
        loss_weights: dict[str, float] | None = None,
        top_k: int = 20,
        joint_threshold: float = 0.1,
        nms_threshold: float = 0.9,
        sigmas: Sequence[float] = COCO_SIGMAS,
    ) -> None:
        from .data import MultiPersonAugment  # OpenCV

        self.skeleton = get_skeleton(skeleton) if isinstance(skeleton, str) else skeleton
        S = int(input_size)
        if S < 32 or S % 32:
            raise ValueError(f"input_size must be a positive multiple of 32, got {input_size}")
        if len(sigmas) != self.skeleton.num_joints:
            raise ValueError(
                f"sigmas has {len(sigmas)} values, skeleton {self.skeleton.name!r} has "
                f"{self.skeleton.num_joints} joints"
            )
        if len(mean) != 3 or len(std) != 3 or min(std) <= 0:
            raise ValueError(f"mean/std must have 3 values (std > 0), got {mean}, {std}")
        self.input_size = S
        self.stride = STRIDE
        cfg = augment if augment is not None else AugmentConfig()
        self.augment_config = AugmentConfig(**{**cfg.__dict__, "output_size": (S, S)})
        self.augment = MultiPersonAugment(self.augment_config, self.skeleton)
        self.mean = tuple(float(v) for v in mean)
        self.std = tuple(float(v) for v in std)
        self.min_overlap = float(min_overlap)
        self.max_radius = (
            centernet_radius_bound((S // STRIDE, S // STRIDE), min_overlap)
            if static_radius
            else None
        )
        self.loss_weights = dict(loss_weights or {})
        self.top_k = int(top_k)
        self.joint_threshold = float(joint_threshold)
        self.nms_threshold = float(nms_threshold)
        self.sigmas = tuple(float(s) for s in sigmas)

    # ------------------------------------------------------------------ inputs and targets
    def normalize(self, images: torch.Tensor) -> torch.Tensor:
        """``(B, 3, S, S)`` values in ``[0, 255]`` -> normalised float32 network input."""
        dev = images.device
        mean = torch.tensor(self.mean, device=dev).view(1, 3, 1, 1) * 255
        std = torch.tensor(self.std, device=dev).view(1, 3, 1, 1) * 255
        return ((images.float() - mean) / std).contiguous()

    def prepare(
        self, batch: dict, generator: torch.Generator | None = None, plain: bool = False
    ) -> dict:
        """A :func:`~tensorpose.centernet.data.collate_multiperson` batch on the device ->
        ``x (B, 3, S, S)`` network input, ``targets`` (dict of
        :func:`~tensorpose.ops.heatmap.centernet_targets`), ``matrices (B, 2, 3)`` (image ->
        input) and the augmented people (see
        :class:`~tensorpose.centernet.data.MultiPersonAugment`).

        Args:
            batch: the collated batch, tensors on the device.
            generator: RNG on the device for the augmentation.
            plain: the letterbox alone (evaluation).
        """
        from .data import multiperson_targets

        out = self.augment(batch, generator, plain=plain)
        out["x"] = self.normalize(out["images"])
        out["targets"] = multiperson_targets(out, self.stride, self.min_overlap, self.max_radius)
        return out

    def letterbox(
        self, images: torch.Tensor, image_size: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Network input of raw frames (no people needed: prediction).

        Args:
            images: ``(B, H, W, 3)`` uint8 RGB (zero padded below/right when sizes differ);
                warped by :func:`~tensorpose.centernet.data.warp_images` (OpenCV on a CPU,
                one batched warp elsewhere).
            image_size: ``(B, 2)`` ``(w, h)`` of each image.

        Returns:
            ``x (B, 3, S, S)`` and ``matrices (B, 2, 3)`` (image -> input).
        """
        from .data import letterbox_matrices, warp_images

        S = self.input_size
        M = letterbox_matrices(image_size.to(images.device), S)
        return self.normalize(warp_images(images, M, (S, S))), M

    # ------------------------------------------------------------------ loss
    def loss(self, outputs: dict[str, torch.Tensor], batch: dict) -> dict[str, torch.Tensor]:
        """:func:`~tensorpose.losses.centernet_loss` of the head outputs (logits; computed in
        float32) against ``batch["targets"]``: ``loss`` and each term, on the device."""
        out = {k: v.float() for k, v in outputs.items()}
        return centernet_loss(out, batch["targets"], self.loss_weights)

    # ------------------------------------------------------------------ decoding
    def decode(self, outputs: dict[str, torch.Tensor], matrices: torch.Tensor) -> dict:
        """People in image pixels from head outputs, all on the device
        (:func:`~tensorpose.centernet.model.decode_people` with these settings).

        Args:
            outputs: the model's dict (logits for the two heatmaps), maps ``(S/4, S/4)``.
            matrices: ``(B, 2, 3)`` image -> input matrices of the batch.

        Returns:
            dict with ``scores (B, k)`` (centre peak), ``boxes (B, k, 4)`` ``x1, y1, x2, y2``,
            ``keypoints (B, k, K, 2)``, ``keypoint_scores (B, k, K)`` (the joint heatmap in the
            cell of the final joint position), ``keep (B, k)`` bool (survived OKS-NMS), all in
            image pixels, people in decreasing score per image.
        """
        return decode_people(
            outputs, matrices, self.stride, self.top_k, self.joint_threshold,
            self.nms_threshold, self.sigmas,
        )  # fmt: skip

    @torch.no_grad()
    def predict(self, model: nn.Module, batch: dict) -> dict:
        """Letterboxed forward pass and :meth:`decode` of a collated batch on the device (the
        model's train/eval mode is left as it is)."""
        x, M = self.letterbox(batch["images"], batch["image_size"])
        return self.decode(model(x), M)

    @staticmethod
    def results(
        decoded: dict, image_ids: torch.Tensor | Sequence[int], min_score: float = 0.0
    ) -> list[dict]:
        """COCO keypoint results (``COCO.loadRes`` input) of the kept people with a score of at
        least ``min_score``; reads the batch back to the host once."""
        keep = (decoded["keep"] & (decoded["scores"] >= min_score)).cpu()
        ids = torch.as_tensor(image_ids).cpu().view(-1, 1).expand(keep.shape)[keep]
        return coco_results(
            ids,
            decoded["keypoints"].cpu()[keep],
            decoded["keypoint_scores"].cpu()[keep],
            decoded["scores"].cpu()[keep],
        )


# ---------------------------------------------------------------------- evaluation
@torch.no_grad()
def evaluate(
    model: nn.Module,
    centernet: CenterNet,
    dataset: MultiPersonDataset,
    annotations: str | Path | dict | None = None,
    batch_size: int = 8,
    device: torch.device | str = "cpu",
) -> dict:
    """COCO keypoint AP/AR (pycocotools) of ``model`` on every image of ``dataset``.

    Args:
        model: the CenterNet network (put in eval mode here, restored after).
        centernet: decoding settings.
        dataset: the images (letterboxed, no augmentation).
        annotations: ground-truth JSON (path or dict); default the dataset's file.
        batch_size: images per forward pass.
        device: where to run.

    Returns:
        ``AP, AP50, AP75, APm, APl, AR, ...`` (see
        :func:`~tensorpose.metrics.pose2d.coco_keypoint_ap`)
        plus ``results`` (the COCO results list) and ``images``.
    """
    from .data import collate_multiperson

    device = torch.device(device)
    annotations = annotations if annotations is not None else dataset.annotations
    if annotations is None:
        raise ValueError("annotations is required when the dataset was built from records")
    loader = DataLoader(dataset, batch_size, shuffle=False, collate_fn=collate_multiperson)
    was_training = model.training
    model.eval()
    results: list[dict] = []
    try:
        for batch in loader:
            images = batch["images"].to(device)
            dec = centernet.predict(model, {"images": images, "image_size": batch["image_size"]})
            results += centernet.results(dec, batch["image_id"])
    finally:
        model.train(was_training)
    ap = coco_keypoint_ap(annotations, results, image_ids=list(dataset.image_ids))
    return {**ap, "results": results, "images": len(dataset)}
