"""CenterNet multi-person pose ("Objects as Points") on whole images (``task: centernet``).

The network and its decoder live in :mod:`tensorpose.centernet.model`; this module holds the
logic around them: :class:`CenterNet` (input geometry, targets, loss, decoding settings, COCO
results; usable in a plain training loop, see ``scripts/centernet_overfit.py``), :func:`evaluate`
and the task, :class:`CenterNetTask`.

One batch, file to metric: :mod:`tensorpose.io.coco` (every person of an image, crowds skipped,
people without keypoints kept as centres) ->
:class:`~tensorpose.centernet.data.MultiPersonDataset` +
:func:`~tensorpose.centernet.data.collate_multiperson` (host, uint8 images, people in
``data.max_people`` slots) -> :meth:`CenterNet.prepare` on the device (letterbox +
augmentation in one warp, normalisation,
:func:`~tensorpose.ops.heatmap.centernet_targets`) -> the model
(:func:`~tensorpose.centernet.model.build_model`) -> :meth:`CenterNet.loss`
(:func:`~tensorpose.losses.centernet_loss`) -> :meth:`CenterNet.decode`
(:func:`~tensorpose.centernet.model.decode_people`: peaks, top-k, joint snapping, inverse
letterbox, OKS-NMS over the batch) -> :meth:`CenterNet.results` (COCO results) ->
:func:`evaluate` / :meth:`CenterNetTask.evaluate` (COCO keypoint AP through pycocotools).

OpenCV (:mod:`tensorpose.centernet.data`) is imported by the methods that warp, so loading a
CenterNet config stays light.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler

from ..augment.config import AugmentConfig
from ..centernet.model import build_model
from ..centernet.pipeline import CenterNet, evaluate
from ..config import Config, ConfigError, valid
from ..data.loaders import EpochLoader, seed_worker
from ..errors import InputError
from ..io.coco import bundled_coco
from ..metrics.pose2d import coco_keypoint_ap
from ..skeleton import get_skeleton
from .base import Field, Task, check_batch, eval_mode, unwrap
from .topdown import ImageDataConfig

if TYPE_CHECKING:
    pass

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
    centres, see :mod:`tensorpose.centernet.data`)."""
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
        from ..centernet.data import MultiPersonDataset
        from ..io.coco import load_coco_keypoints

        d = self.cfg.data
        path = Path(annotations) if annotations else bundled_coco()
        coco = load_coco_keypoints(path, d.images or None, min_keypoints=d.min_keypoints,
                                   warn=False)  # fmt: skip
        if len(coco.keypoint_names) != self.skeleton.num_joints:
            raise InputError(
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
        from ..centernet.data import collate_multiperson

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
    def picture_batch(self) -> dict | None:
        """Up to four augmented training inputs with their people's joints; see
        :meth:`Task.picture_batch`."""
        from ..centernet.data import collate_multiperson

        ds = self.train_set
        n = min(4, len(ds))
        if n == 0:
            return None
        batch = collate_multiperson([ds[i] for i in range(n)], self.cfg.data.max_people)
        g = torch.Generator().manual_seed(self.cfg.train.seed)
        out = self.centernet.augment({k: v for k, v in batch.items()}, g)
        valid = out["valid"][..., None]
        return {"images": out["images"].permute(0, 2, 3, 1).clamp(0, 255).byte().numpy(),
                "keypoints": out["keypoints"], "visibility": out["visibility"] * valid,
                "skeleton": self.skeleton}  # fmt: skip

    ROWS = (("AP", "COCO AP"), ("AP50", "COCO AP50"), ("AP75", "COCO AP75"), ("AR", "COCO AR"),
            ("detections", "people in the results"))  # fmt: skip

    @classmethod
    def report(cls, metrics: dict[str, Any]) -> list[str]:
        lines = []
        if "images" in metrics:
            lines.append(f"  {metrics['images']} images, {metrics['people']} people, letterboxed")
        lines += [f"  {label:<28s} {metrics[k]:10.4g}" for k, label in cls.ROWS if k in metrics]
        return lines
