"""CenterNet multi-person pose ("Objects as Points") on whole images (``task: centernet``).

The network and its decoder live in :mod:`tensorpose.models.centernet`; this module holds the
logic around them: :class:`CenterNet` (input geometry, targets, loss, decoding settings, COCO
results; usable in a plain training loop, see ``scripts/centernet_overfit.py``), :func:`evaluate`
and the task, :class:`CenterNetTask`.

One batch, file to metric: :mod:`tensorpose.io.coco` (every person of an image, crowds skipped,
people without keypoints kept as centres) ->
:class:`~tensorpose.data.multiperson.MultiPersonDataset` +
:func:`~tensorpose.data.multiperson.collate_multiperson` (host, uint8 images, people in
``data.max_people`` slots) -> :meth:`CenterNet.prepare` on the device (letterbox +
augmentation in one warp, normalisation,
:func:`~tensorpose.ops.heatmap.centernet_targets`) -> the model
(:func:`~tensorpose.models.centernet.build_model`) -> :meth:`CenterNet.loss`
(:func:`~tensorpose.losses.centernet_loss`) -> :meth:`CenterNet.decode`
(:func:`~tensorpose.models.centernet.decode_people`: peaks, top-k, joint snapping, inverse
letterbox, OKS-NMS over the batch) -> :meth:`CenterNet.results` (COCO results) ->
:func:`evaluate` / :meth:`CenterNetTask.evaluate` (COCO keypoint AP through pycocotools).

OpenCV (:mod:`tensorpose.data.multiperson`) is imported by the methods that warp, so loading a
CenterNet config stays light.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler

from ..augment_config import AugmentConfig
from ..config import Config, ConfigError, valid
from ..data.loaders import EpochLoader, seed_worker
from ..io.coco import bundled_coco, coco_results
from ..losses import centernet_loss
from ..metrics2d import COCO_SIGMAS, coco_keypoint_ap
from ..models.centernet import IMAGENET_MEAN, IMAGENET_STD, STRIDE, build_model, decode_people
from ..ops.heatmap import centernet_radius_bound
from ..skeleton import Skeleton, get_skeleton
from .base import Field, Task, check_batch, eval_mode, unwrap
from .topdown import ImageDataConfig

if TYPE_CHECKING:
    from ..data.multiperson import MultiPersonDataset

__all__ = [
    "CenterNet",
    "CenterNetDataConfig",
    "CenterNetModelConfig",
    "CenterNetTask",
    "evaluate",
]


@dataclass
class CenterNetDataConfig(ImageDataConfig):
    """Whole images of a COCO keypoint file, letterboxed onto a square input (the ``data``
    section of ``task: centernet``; augmentation ranges as in the top-down tasks)."""

    min_keypoints: int = field(default=0, metadata=valid(0, 1000))
    """People with fewer labelled keypoints are left out (0: people without keypoints stay as
    centres, see :mod:`tensorpose.data.multiperson`)."""
    input_size: list[int] = field(default_factory=lambda: [256, 256], metadata=valid(32, 8192))
    """Square network input ``[S, S]``, ``S`` a multiple of 32."""
    max_people: int = field(default=32, metadata=valid(1, 1000))
    """Person slots per image (fixed shapes); images with more keep their largest people."""
    max_images: int = field(default=0, metadata=valid(0, 10**9))
    """Use only the first N images (0: all)."""

    def validate(self, cfg: Config) -> None:
        super().validate(cfg)
        S = self.input_size
        if S[0] != S[1] or S[0] % 32:
            raise ConfigError(f"data.input_size must be [S, S] with S a multiple of 32, got {S}")


@dataclass
class CenterNetModelConfig:
    """CenterNet pose network (small ResNet + deconvolution neck, stride 4) and its decoding."""

    depth: int = 18
    """ResNet depth: 10 or 18."""
    width: int = field(default=32, metadata=valid(1, 4096))
    skeleton: str = "coco17"
    min_overlap: float = field(default=0.7, metadata=valid(0, 1, "open"))
    """CenterNet's gaussian-radius parameter (centres and joints)."""
    static_radius: bool = False
    """Targets with the static radius bound (fixed shapes, no host read: GPU, torch.compile)."""
    top_k: int = field(default=20, metadata=valid(1, 1000))
    """People decoded per image."""
    joint_threshold: float = field(default=0.1, metadata=valid(0, 1))
    """Joint-heatmap peak score needed to snap a regressed joint to it."""
    nms_threshold: float = field(default=0.9, metadata=valid(0, 10))
    """OKS above which a lower-scored person is suppressed (>= 1: no NMS)."""

    def validate(self, cfg: Config) -> None:
        if self.depth not in (10, 18):
            raise ConfigError(f"model.depth must be 10 or 18, got {self.depth}")


# ---------------------------------------------------------------------- CenterNet logic
class CenterNet:
    """Everything CenterNet needs around the model: input geometry, targets, loss, decoding.

    Args:
        skeleton: joint names and flip pairs (a name for :func:`tensorpose.skeleton.get_skeleton`).
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
        from ..data.multiperson import MultiPersonAugment  # OpenCV

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
        from ..data.multiperson import multiperson_targets

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
        from ..data.multiperson import letterbox_matrices, warp_images

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
        (:func:`~tensorpose.models.centernet.decode_people` with these settings).

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
        ``AP, AP50, AP75, APm, APl, AR, ...`` (see :func:`~tensorpose.metrics2d.coco_keypoint_ap`)
        plus ``results`` (the COCO results list) and ``images``.
    """
    from ..data.multiperson import collate_multiperson

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


# ---------------------------------------------------------------------- the task
class CenterNetTask(Task):
    """Bottom-up multi-person pose: CenterNet targets, loss and decoding on whole images,
    evaluated with COCO keypoint AP."""

    data_config = CenterNetDataConfig
    model_config = CenterNetModelConfig
    capabilities: ClassVar[frozenset[str]] = frozenset({"predict", "export"})
    export_decoding = "centernet"
    contract: ClassVar[dict[str, Field]] = {
        "x": Field(("B", 3, "S", "S"), torch.float32),  # normalised letterboxed images
        "matrices": Field(("B", 2, 3), torch.float32),  # image -> input
        "keypoints": Field(("B", "N", "K", 2), torch.float32),  # input pixels
        "visibility": Field(("B", "N", "K"), torch.int64),  # 0 outside the input / empty slot
        "valid": Field(("B", "N"), torch.bool),  # occupied person slots
        "image_id": Field(("B",), torch.int64),
    }
    best_metric = ("val_AP", "max")
    metric_names = ("val_AP", "val_AP50", "val_AP75", "val_APm", "val_APl", "val_AR",
                    "val_detections", "train_loss")  # fmt: skip

    def __init__(self, model: nn.Module, cfg: Config) -> None:
        super().__init__(model, cfg)
        d, m = cfg.data, cfg.model
        S = int(d.input_size[0])
        self.skeleton = get_skeleton(m.skeleton)
        self.device = torch.device("cpu")
        self.centernet = CenterNet(
            self.skeleton, S, AugmentConfig(output_size=(S, S), **d.ranges()), d.mean, d.std,
            m.min_overlap, m.static_radius, top_k=m.top_k, joint_threshold=m.joint_threshold,
            nms_threshold=m.nms_threshold,
        )  # fmt: skip

    @classmethod
    def build_model(cls, cfg: Config) -> nn.Module:
        m = cfg.model
        return build_model(get_skeleton(m.skeleton).num_joints, m.depth, m.width)

    # -- data
    def dataset(self, annotations: str):
        """Images of a COCO keypoint file (default: the bundled subset) with their people."""
        from ..data.multiperson import MultiPersonDataset
        from ..io.coco import load_coco_keypoints

        d = self.cfg.data
        path = Path(annotations) if annotations else bundled_coco()
        coco = load_coco_keypoints(path, d.images or None, min_keypoints=d.min_keypoints,
                                   warn=False)  # fmt: skip
        if len(coco.keypoint_names) != self.skeleton.num_joints:
            raise ValueError(
                f"{path}: K={len(coco.keypoint_names)} keypoints but model.skeleton "
                f"{self.skeleton.name!r} has {self.skeleton.num_joints} joints"
            )
        ds = MultiPersonDataset(coco, on_error=d.on_error, cache_images=d.cache_images)
        if d.max_images:  # the first N images: the dataset (and its evaluation) covers those
            ds.image_ids = ds.image_ids[: d.max_images]
        return ds

    def backend(self, device: torch.device) -> str:
        b = self.cfg.data.backend
        return ("device" if device.type == "cuda" else "cpu") if b == "auto" else b

    def loader(self, ds, batch: int, device: torch.device, rank: int = 0, world: int = 1,
               shuffle: bool = True) -> EpochLoader:  # fmt: skip
        """This rank's collated batches of ``ds`` (uint8 images, people in slots)."""
        from ..data.multiperson import collate_multiperson

        d, seed = self.cfg.data, self.cfg.train.seed
        loader = DataLoader(
            ds, batch, sampler=DistributedSampler(ds, world, rank, shuffle=shuffle, seed=seed),
            num_workers=d.workers, pin_memory=d.pin_memory and device.type == "cuda",
            collate_fn=functools.partial(collate_multiperson, max_people=d.max_people),
            worker_init_fn=seed_worker, generator=torch.Generator().manual_seed(seed),
        )  # fmt: skip
        return EpochLoader(loader, seed)

    def setup(self, device: torch.device, rank: int = 0, world: int = 1) -> None:
        d, t = self.cfg.data, self.cfg.train
        self.device = device
        self.centernet.augment.backend = self.backend(device)
        self.train_set = self.dataset(d.annotations)
        self.val_set = self.dataset(d.val_annotations or d.annotations)
        self.train_batches = self.loader(self.train_set, t.batch_size // world, device, rank,
                                         world)  # fmt: skip
        self.generator = torch.Generator(device=device).manual_seed(t.seed + 7919 * rank)

    def eval_data(self, device: torch.device, annotations: str | None = None):
        """The images of ``annotations`` (default: the run's validation file)."""
        d = self.cfg.data
        self.device = device
        self.centernet.augment.backend = self.backend(device)
        self.val_set = self.dataset(annotations or d.val_annotations or d.annotations)
        return self.val_set

    def eval_info(self, data: Any = None) -> dict[str, Any]:
        ds = data if data is not None else self.val_set
        return {"images": len(ds), "people": len(ds.records)}

    # -- step
    def prepare(self, batch: dict, plain: bool = False) -> dict:
        """Letterbox + augmentation (none when ``plain``), normalisation, CenterNet targets."""
        out = self.centernet.prepare(batch, None if plain else self.generator, plain=plain)
        S = self.centernet.input_size
        return check_batch(out, self.contract, S=S, K=self.skeleton.num_joints)

    def forward(self, batch: dict) -> dict[str, torch.Tensor]:
        terms = self.centernet.loss(self.model(batch["x"]), batch)
        return {k: (v if k == "loss" else v.detach()) for k, v in terms.items()}

    # -- evaluation
    @torch.no_grad()
    def predict(self, ds=None, batch_size: int | None = None) -> list[dict]:
        """COCO keypoint results (``COCO.loadRes`` input) of every image of ``ds`` (default:
        the validation images), letterboxed, in eval mode."""
        ds = ds if ds is not None else self.val_set
        bs = batch_size or max(1, min(self.cfg.train.batch_size, 16))
        results: list[dict] = []
        with eval_mode(unwrap(self.model)) as model:
            for batch in self.loader(ds, bs, self.device, shuffle=False):
                images = batch["images"].to(self.device)
                dec = self.centernet.predict(
                    model, {"images": images, "image_size": batch["image_size"]}
                )
                results += self.centernet.results(dec, batch["image_id"])
        return results

    def evaluate(self, ds=None) -> dict[str, float]:
        """COCO keypoint AP, AP50, AP75, AR (pycocotools) of :meth:`predict` on ``ds``."""
        ds = ds if ds is not None else self.val_set
        results = self.predict(ds)
        ap = coco_keypoint_ap(ds.annotations, results, image_ids=list(ds.image_ids))
        out = {k: float(v) for k, v in ap.items() if isinstance(v, (int, float))}
        out["detections"] = float(len(results))
        return out

    # -- pictures and reporting
    def write_pictures(self, run_dir: Path) -> list[Path]:
        """``augment.png``: up to four augmented training inputs with their people's joints."""
        import cv2

        from ..data.multiperson import collate_multiperson
        from ..viz import draw_skeleton

        ds = self.train_set
        n = min(4, len(ds))
        if n == 0:
            return []
        batch = collate_multiperson([ds[i] for i in range(n)], self.cfg.data.max_people)
        g = torch.Generator().manual_seed(self.cfg.train.seed)
        out = self.centernet.augment({k: v for k, v in batch.items()}, g)
        tiles = []
        for i in range(out["images"].shape[0]):  # per picture: drawing
            img = out["images"][i].permute(1, 2, 0).clamp(0, 255).byte().numpy().copy()
            for p in out["valid"][i].nonzero().flatten().tolist():
                vis = out["visibility"][i, p] > 0
                if bool(vis.any()):
                    img = draw_skeleton(img, out["keypoints"][i, p], vis, self.skeleton)
            tiles.append(img)
        path = Path(run_dir) / "augment.png"
        cv2.imwrite(str(path), cv2.cvtColor(np.concatenate(tiles, 1), cv2.COLOR_RGB2BGR))
        return [path]

    ROWS = (("AP", "COCO AP"), ("AP50", "COCO AP50"), ("AP75", "COCO AP75"), ("AR", "COCO AR"),
            ("detections", "people in the results"))  # fmt: skip

    @classmethod
    def report(cls, metrics: dict[str, Any]) -> list[str]:
        lines = []
        if "images" in metrics:
            lines.append(f"  {metrics['images']} images, {metrics['people']} people, letterboxed")
        lines += [f"  {label:<28s} {metrics[k]:10.4g}" for k, label in cls.ROWS if k in metrics]
        return lines
