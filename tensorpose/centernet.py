"""CenterNet multi-person pose ("Objects as Points"): the task logic as plain functions and one
small class, for a task module (or a plain training loop, see ``scripts/centernet_overfit.py``)
to wrap.

One batch, file to metric:

1. :class:`~tensorpose.data.multiperson.MultiPersonDataset` +
   :func:`~tensorpose.data.multiperson.collate_multiperson` (host, uint8, people in slots);
2. :meth:`CenterNet.prepare` on the device: letterbox + augmentation (one warp for the batch),
   normalisation, :func:`~tensorpose.ops.heatmap.centernet_targets`;
3. the model (:func:`build_model`: :func:`~tensorpose.models.heads.centernet_pose_net`) and
   :meth:`CenterNet.loss` (:func:`~tensorpose.losses.centernet_loss`);
4. :meth:`CenterNet.decode` on the device: sigmoid, 3x3 max-pool peaks, ``topk``, gather
   (:func:`~tensorpose.ops.heatmap.centernet_decode`), map pixels -> input pixels -> image
   pixels (inverse letterbox/augmentation matrix), OKS-NMS over all images of the batch at once;
5. :meth:`CenterNet.results` (COCO results) and :func:`evaluate` (pycocotools keypoint AP).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader

from .augment import AugmentConfig
from .data.multiperson import (
    MultiPersonAugment,
    MultiPersonDataset,
    collate_multiperson,
    letterbox_matrices,
    multiperson_targets,
    warp_images,
)
from .io.coco import coco_results
from .losses import centernet_loss
from .metrics2d import COCO_SIGMAS, coco_keypoint_ap
from .models.heads import PoseNet, centernet_pose_net
from .ops.affine import invert_affine, transform_points
from .ops.heatmap import centernet_decode, centernet_radius_bound
from .ops.nms import oks_nms
from .skeleton import Skeleton, get_skeleton

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "CenterNet",
    "batched_oks_nms",
    "build_model",
    "evaluate",
]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
STRIDE = 4  # the deconvolution neck of centernet_pose_net: stride 32 -> 4


def build_model(num_joints: int = 17, depth: int = 18, width: int = 32) -> PoseNet:
    """The CenterNet pose network: small ResNet (``depth`` 10/18, ``width`` stem channels),
    deconvolution neck to stride 4, heads ``heatmap, size, offset, joint_offset,
    joint_heatmaps, joint_sub_offset`` (see :class:`~tensorpose.models.heads.CenterNetHead`)."""
    return centernet_pose_net(num_joints, depth, width)


class CenterNet:
    """Everything CenterNet needs around the model: input geometry, targets, loss, decoding.

    Args:
        skeleton: joint names and flip pairs (a name for :func:`tensorpose.get_skeleton`).
        input_size: side ``S`` of the square network input (a multiple of 32).
        augment: training augmentation ranges (``output_size`` is set to ``(S, S)``); default
            :class:`~tensorpose.augment.AugmentConfig`'s with ``S``.
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
        """A :func:`~tensorpose.data.multiperson.collate_multiperson` batch on the device ->
        ``x (B, 3, S, S)`` network input, ``targets`` (dict of
        :func:`~tensorpose.ops.heatmap.centernet_targets`), ``matrices (B, 2, 3)`` (image ->
        input) and the augmented people (see
        :class:`~tensorpose.data.multiperson.MultiPersonAugment`).

        Args:
            batch: the collated batch, tensors on the device.
            generator: RNG on the device for the augmentation.
            plain: the letterbox alone (evaluation).
        """
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
                warped by :func:`~tensorpose.data.multiperson.warp_images` (OpenCV on a CPU,
                one batched warp elsewhere).
            image_size: ``(B, 2)`` ``(w, h)`` of each image.

        Returns:
            ``x (B, 3, S, S)`` and ``matrices (B, 2, 3)`` (image -> input).
        """
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
        """People in image pixels from head outputs, all on the device.

        Args:
            outputs: the model's dict (logits for the two heatmaps), maps ``(S/4, S/4)``.
            matrices: ``(B, 2, 3)`` image -> input matrices of the batch.

        Returns:
            dict with ``scores (B, k)`` (centre peak), ``boxes (B, k, 4)`` ``x1, y1, x2, y2``,
            ``keypoints (B, k, K, 2)``, ``keypoint_scores (B, k, K)`` (the joint heatmap in the
            cell of the final joint position), ``keep (B, k)`` bool (survived OKS-NMS), all in
            image pixels, people in decreasing score per image.
        """
        heat = torch.sigmoid(outputs["heatmap"].float())
        joint_heat = torch.sigmoid(outputs["joint_heatmaps"].float())
        d = centernet_decode(
            heat,
            outputs["size"].float(),
            outputs["offset"].float(),
            outputs["joint_offset"].float(),
            joint_heat,
            outputs["joint_sub_offset"].float(),
            k=self.top_k,
            joint_threshold=self.joint_threshold,
        )
        B, k, K = d["keypoints"].shape[:3]
        H, W = joint_heat.shape[-2:]
        kp = d["keypoints"]
        # the cell that holds the joint (targets put integer positions at trunc(x))
        ix = kp[..., 0].floor().clamp(0, W - 1).long()
        iy = kp[..., 1].floor().clamp(0, H - 1).long()
        flat = (iy * W + ix).transpose(1, 2)  # (B, K, k)
        kscore = joint_heat.flatten(2).gather(2, flat).transpose(1, 2)
        inv = invert_affine(matrices.double())
        s = float(self.stride)
        kp_img = transform_points((kp.double() * s).reshape(B, k * K, 2), inv).reshape(B, k, K, 2)
        x1, y1, x2, y2 = (d["boxes"].double() * s).unbind(-1)
        corners = torch.stack(
            [torch.stack([x1, y1], -1), torch.stack([x2, y1], -1),
             torch.stack([x1, y2], -1), torch.stack([x2, y2], -1)], -2,
        )  # fmt: skip
        c = transform_points(corners.reshape(B, k * 4, 2), inv).reshape(B, k, 4, 2)
        boxes = torch.cat([c.amin(-2), c.amax(-2)], -1)
        area = ((boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1])).clamp_min(1.0)
        scores = d["scores"]
        if self.nms_threshold < 1:
            full = torch.cat([kp_img, kscore.double().unsqueeze(-1)], -1)
            keep = batched_oks_nms(full, scores, area, self.nms_threshold, self.sigmas)
        else:
            keep = torch.ones_like(scores, dtype=torch.bool)
        return {
            "scores": scores,
            "boxes": boxes.float(),
            "keypoints": kp_img.float(),
            "keypoint_scores": kscore,
            "keep": keep,
        }

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


# ---------------------------------------------------------------------- OKS-NMS
def batched_oks_nms(
    keypoints: torch.Tensor,
    scores: torch.Tensor,
    areas: torch.Tensor,
    threshold: float,
    sigmas: Sequence[float] = COCO_SIGMAS,
) -> torch.Tensor:
    """OKS-NMS within each image of a batch, in ONE call of the per-set NMS: each image's poses
    are shifted far from the others' (OKS across images underflows to 0), the ``batched_nms``
    trick for boxes.

    Args:
        keypoints: ``(B, k, K, 3)`` image pixels and scores.
        scores: ``(B, k)``.
        areas: ``(B, k)`` person areas (pixels^2).
        threshold: suppress a pose whose OKS with a better-scored one exceeds it.

    Returns:
        ``keep (B, k)`` bool.
    """
    B, k = scores.shape
    xy = keypoints[..., :2].double()
    a = areas.double()
    # 10 sqrt(area) apart at least: exp(-d^2 / ((2 sigma)^2 area)) < exp(-100 / 0.05) = 0
    gap = (xy.amax() - xy.amin()) + 10 * a.max().sqrt() + 1
    shift = (torch.arange(B, device=xy.device, dtype=xy.dtype) * gap).view(B, 1, 1, 1)
    flat = torch.cat([xy + shift, keypoints[..., 2:].double()], -1).reshape(B * k, -1, 3)
    idx = oks_nms(flat, scores.reshape(-1), a.reshape(-1), threshold, sigmas)
    keep = torch.zeros(B * k, dtype=torch.bool, device=scores.device)
    keep[idx] = True
    return keep.view(B, k)


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
        ``AP, AP50, AP75, APm, APl, AR, ...`` (see :func:`~tensorpose.metrics2d.coco_keypoint_ap`)
        plus ``results`` (the COCO results list) and ``images``.
    """
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
