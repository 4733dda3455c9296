"""What the top-down 2D tasks share (DeepPose in :mod:`.deeppose`, heatmaps in :mod:`.heatmap`).

Data path: :mod:`tensorpose.io.coco` (annotations -> person records) ->
:class:`~tensorpose.data.images.TopDownDataset` (decoded uint8 image + crop window per person) ->
crops and augmentation, either per sample in the DataLoader workers
(:class:`~tensorpose.augment.crops.CpuAugment`) or batched on the device
(:class:`~tensorpose.augment.crops.DeviceAugment`, in :meth:`TopDownTask.prepare`) -> normalised
images ``x`` and the subclass's targets -> model and loss (subclass) -> plain-crop predictions in
image pixels -> :mod:`tensorpose.metrics.pose2d` (PCK, AUC, EPE, OKS, COCO AP).

OpenCV is imported by the methods that decode, warp or draw, so loading a 2D config stays light.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler

from ..augment.config import AugmentConfig, AugmentRanges
from ..config import Config, ConfigError, check_min, choices, valid
from ..data.loaders import EpochLoader, IdentifiedSamples, seed_worker
from ..errors import InputError
from ..io.coco import bundled_coco, coco_results, load_coco_keypoints
from ..metrics import pose2d as metrics2d
from ..ops.affine import invert_affine, transform_points
from ..skeleton import get_skeleton
from .base import Field, Task, check_batch, eval_mode, unwrap

__all__ = ["ImageDataConfig", "TopDownTask"]


@dataclass
class ImageDataConfig(AugmentRanges):
    """Top-down person crops from a COCO keypoint file (the ``data`` section of the 2D tasks),
    with the augmentation ranges of :class:`~tensorpose.augment.config.AugmentRanges` as keys
    of the same section (``data.scale``, ``data.flip_prob``, ...)."""

    annotations: str = ""
    """COCO person-keypoint JSON for training; empty: the bundled 16-image subset."""
    val_annotations: str = ""
    """Evaluation JSON; empty: the training file (the honest check on the tiny subset)."""
    images: str = ""
    """Image folder of the annotation files; empty: found next to them (``<json folder>/images``,
    or COCO's own layout: ``annotations/person_keypoints_val2017.json`` beside ``val2017/``)."""
    people: int = field(default=0, metadata=valid(0, 10**9))
    """Use only the first N people (0: all)."""
    min_keypoints: int = field(default=1, metadata=valid(0, 1000))
    input_size: list[int] = field(default_factory=lambda: [256, 192], metadata=valid(16, 8192))
    """Crop ``[H, W]``."""
    padding: float = field(default=1.25, metadata=valid(0, 10, "left-open"))
    backend: str = field(default="auto", metadata=choices("auto", "cpu", "device"))
    """Augmentation backend: ``cpu`` (OpenCV in DataLoader workers), ``device`` (batched on the
    device after the copy), ``auto`` (device on CUDA, cpu otherwise)."""
    workers: int = field(default=0, metadata=valid(0, 256))
    pin_memory: bool = True
    cache_images: bool = True
    reduced_decoding: bool = True
    """With the ``cpu`` backend, decode each training JPEG at the largest libjpeg reduction (1/2,
    1/4, 1/8) that still gives the person's smallest augmented window (``1 - data.scale``) one
    decoded pixel per crop pixel; keypoints and warps stay in full-resolution pixels. Evaluation
    crops are always decoded whole."""
    on_error: str = field(default="skip", metadata=choices("skip", "raise"))
    """Unreadable image: ``skip`` (dropped from its batch and logged) or ``raise`` (stop)."""
    mean: list[float] = field(
        default_factory=lambda: [0.485, 0.456, 0.406], metadata=valid(-1000, 1000)
    )
    std: list[float] = field(
        default_factory=lambda: [0.229, 0.224, 0.225], metadata=valid(0, 1000, "left-open")
    )

    def validate(self, cfg: Config) -> None:
        if len(self.input_size) != 2 or min(self.input_size) < 16:
            raise ConfigError(
                f"data.input_size must be [H, W] with H, W >= 16, got {self.input_size}"
            )
        if len(self.mean) != 3 or len(self.std) != 3 or min(self.std) <= 0:
            raise ConfigError(
                f"data.mean/std must have 3 values (std > 0), got {self.mean}, {self.std}"
            )
        check_min((("data.workers", self.workers, 0), ("data.people", self.people, 0)))
        for key in self.PROBABILITIES:
            if not 0.0 <= getattr(self, key) <= 1.0:
                raise ConfigError(
                    f"data.{key} must be a probability in [0, 1], got {getattr(self, key)}"
                )


class TopDownTask(Task):
    """Shared 2D top-down plumbing: COCO people -> crops (CPU workers or on the device) ->
    normalised images and targets; evaluation on plain crops with PCK, AUC, EPE, OKS and COCO
    AP (results JSON through pycocotools, when installed).

    Subclasses give ``model_config``, :meth:`build_model`, :meth:`targets`,
    :meth:`step_outputs`, :meth:`decode` (and :meth:`decode_train`), and extend ``contract``
    with their targets.
    """

    data_config = ImageDataConfig
    contract: ClassVar[dict[str, Field]] = {
        "x": Field(("B", 3, "H", "W"), torch.float32),  # normalised crops
        "keypoints": Field(("B", "K", 2), torch.float32),  # crop pixels
        "visibility": Field(("B", "K"), torch.int64),  # 0 where a joint left the crop
        "matrices": Field(("B", 2, 3), torch.float32),  # image -> crop
        "index": Field(("B",), torch.int64),  # dataset index of each person
    }
    best_metric = ("val_pck", "max")
    metric_names = ("val_pck", "val_pck50", "val_auc", "val_epe_px", "val_oks", "val_AP",
                    "val_AP50", "val_AR", "val_loss", "train_loss")  # fmt: skip

    def __init__(self, model: nn.Module, cfg: Config) -> None:
        super().__init__(model, cfg)
        self.skeleton = get_skeleton(cfg.model.skeleton)
        self.size = tuple(cfg.data.input_size)
        self.device = torch.device("cpu")

    # -- data
    def augment_config(self, plain: bool = False) -> AugmentConfig:
        """The augmentation of this config (``plain``: none, the evaluation crop)."""
        if plain:
            return AugmentConfig.identity(self.size)
        return AugmentConfig(output_size=self.size, **self.cfg.data.ranges())

    def dataset(
        self, annotations: str, reduce: bool = False
    ) -> tuple[IdentifiedSamples, Any, Path]:
        """People of a COCO keypoint file (default: the bundled subset) -> dataset, the parsed
        file, its path. ``reduce``: decode at the reduction the augmented crops allow."""
        from ..data.images import TopDownDataset  # OpenCV

        d = self.cfg.data
        path = Path(annotations) if annotations else bundled_coco()
        coco = load_coco_keypoints(path, d.images or None, min_keypoints=d.min_keypoints,
                                   warn=False)  # fmt: skip
        if len(coco.keypoint_names) != self.skeleton.num_joints:
            raise InputError(
                f"{path}: K={len(coco.keypoint_names)} keypoints but model.skeleton "
                f"{self.skeleton.name!r} has {self.skeleton.num_joints} joints"
            )
        records = coco.records[: d.people] if d.people else coco.records
        ds = TopDownDataset(records, self.size[1] / self.size[0], d.padding, d.on_error,
                            d.cache_images, reduce_to=self.size if reduce else None,
                            min_window=1.0 - d.scale)  # fmt: skip
        return IdentifiedSamples(ds), coco, path

    def backend(self, device: torch.device) -> str:
        b = self.cfg.data.backend
        return ("device" if device.type == "cuda" else "cpu") if b == "auto" else b

    def loader(self, ds, batch: int, device, rank: int, world: int, shuffle: bool,
               plain: bool) -> EpochLoader:  # fmt: skip
        """This rank's batches of ``ds``: CPU crops in the workers or raw images for the
        device (:meth:`prepare` crops them)."""
        from ..augment.crops import CpuAugment  # OpenCV
        from ..data.images import collate_topdown

        d, seed = self.cfg.data, self.cfg.train.seed
        if self.backend(device) == "cpu":
            collate = CpuAugment(self.augment_config(plain), self.skeleton, seed + 7919 * rank)
        else:
            collate = collate_topdown
        sampler = DistributedSampler(ds, world, rank, shuffle=shuffle, seed=seed)
        loader = DataLoader(
            ds, batch, sampler=sampler, num_workers=d.workers, collate_fn=collate,
            pin_memory=d.pin_memory and device.type == "cuda", worker_init_fn=seed_worker,
            generator=torch.Generator().manual_seed(seed),
        )  # fmt: skip
        return EpochLoader(loader, seed)

    def setup(self, device: torch.device, rank: int = 0, world: int = 1) -> None:
        d, t = self.cfg.data, self.cfg.train
        self.device = device
        reduce = d.reduced_decoding and self.backend(device) == "cpu"
        self.train_set, self.coco, _ = self.dataset(d.annotations, reduce)
        self.val_set, _, self.val_path = self.dataset(d.val_annotations or d.annotations)
        local = t.batch_size // world
        self.train_batches = self.loader(self.train_set, local, device, rank, world, True, False)
        self.generator = torch.Generator(device=device).manual_seed(t.seed + 7919 * rank)

    def eval_data(self, device: torch.device, annotations: str | None = None) -> IdentifiedSamples:
        """The people of ``annotations`` (default: the run's validation file)."""
        d = self.cfg.data
        self.device = device
        self.val_set, _, self.val_path = self.dataset(
            annotations or d.val_annotations or d.annotations
        )
        return self.val_set

    # -- step
    def prepare(self, batch: dict, plain: bool = False) -> dict:
        """Device augmentation (device backend), normalisation, targets."""
        if self.backend(batch["keypoints"].device) == "device":
            from ..augment.crops import DeviceAugment  # OpenCV (imported with its module)

            augment = DeviceAugment(self.augment_config(plain), self.skeleton)
            batch = augment(batch, None if plain else self.generator)
        d = self.cfg.data
        dev = batch["keypoints"].device
        mean = torch.tensor(d.mean, device=dev).view(1, 3, 1, 1) * 255
        std = torch.tensor(d.std, device=dev).view(1, 3, 1, 1) * 255
        x = (batch["images"].float() - mean) / std
        # CPU crops arrive as a (B, H, W, 3) permute: pick the layout explicitly (a conv
        # backward on that stride pattern crashed torch 2.13's CPU build for some batch sizes)
        fmt = torch.channels_last if self.channels_last else torch.contiguous_format
        batch["x"] = x.contiguous(memory_format=fmt)
        return check_batch(self.targets(batch), self.contract, **self.sizes())

    def sizes(self) -> dict[str, int]:
        """The named dims of ``contract``."""
        return {"K": self.skeleton.num_joints, "H": self.size[0], "W": self.size[1]}

    def targets(self, batch: dict) -> dict:
        """Add the training targets to a prepared batch."""
        raise NotImplementedError

    def step_outputs(self, model: nn.Module, batch: dict) -> dict:
        """``{"loss", "raw"}``: the loss and raw model output of a prepared batch."""
        raise NotImplementedError

    def decode(self, raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Model output -> crop-pixel keypoints ``(B, K, 2)`` and scores ``(B, K)``."""
        raise NotImplementedError

    def decode_train(self, raw: torch.Tensor) -> torch.Tensor:
        """Model output -> crop-pixel keypoints ``(B, K, 2)`` during training (no scores)."""
        return self.decode(raw)[0]

    def forward(self, batch: dict) -> dict[str, torch.Tensor]:
        out = self.step_outputs(self.model, batch)
        out["pred"] = self.decode_train(out.pop("raw"))
        return out

    # -- evaluation
    @torch.no_grad()
    def predict(self, ds=None, batch_size: int | None = None) -> dict[str, Any]:
        """Plain-crop predictions in image pixels for every person of ``ds`` (default: the
        validation set), in eval mode, with their ids and the mean loss."""
        ds = ds if ds is not None else self.val_set
        bs = batch_size or max(1, min(self.cfg.train.batch_size, 32))
        loader = self.loader(ds, bs, self.device, 0, 1, shuffle=False, plain=True)
        preds, scores, index, loss_sum, n = [], [], [], 0.0, 0
        with eval_mode(unwrap(self.model)) as model:
            for batch in loader:
                batch = {k: v.to(self.device) if torch.is_tensor(v) else v
                         for k, v in batch.items()}  # fmt: skip
                batch = self.prepare(batch, plain=True)
                out = self.step_outputs(model, batch)
                crop, sc = self.decode(out["raw"])
                to_image = invert_affine(batch["matrices"].double())
                preds.append(transform_points(crop.double(), to_image))
                scores.append(sc)
                index.append(batch["index"])
                k = self.count(batch)
                loss_sum += float(out["loss"]) * k
                n += k
        return {
            "pred": torch.cat(preds).float().cpu(),
            "scores": torch.cat(scores).float().cpu(),
            "index": torch.cat(index).cpu(),
            "loss": loss_sum / max(n, 1),
        }

    def evaluate(self, ds=None, annotations: str | Path | None = None) -> dict[str, float]:
        """PCK@0.2 and @0.5 (box-normalised), AUC, EPE (px), mean OKS in image pixels on plain
        crops, the loss, and COCO AP/AR (pycocotools on results JSON; skipped without it)."""
        ds = ds if ds is not None else self.val_set
        annotations = annotations if annotations is not None else self.val_path
        p = self.predict(ds)
        recs = [ds.records[i] for i in p["index"].tolist()]
        gt = torch.tensor(np.stack([r.keypoints for r in recs]), dtype=torch.float32)
        vis = torch.tensor(np.stack([r.visibility for r in recs]))
        box = torch.tensor(np.stack([r.bbox for r in recs]), dtype=torch.float32)
        area = torch.tensor([float(r.area) for r in recs])
        norm = metrics2d.bbox_size(box)
        out = {
            "pck": float(metrics2d.pck(p["pred"], gt, vis, norm, 0.2)),
            "pck50": float(metrics2d.pck(p["pred"], gt, vis, norm, 0.5)),
            "auc": float(metrics2d.auc(p["pred"], gt, vis, norm)),
            "epe_px": float(metrics2d.epe(p["pred"], gt, vis)),
            "oks": float(metrics2d.oks(p["pred"], gt, vis, area).mean()),
            "loss": p["loss"],
            "people": len(recs),
        }
        results = coco_results([r.image_id for r in recs], p["pred"], p["scores"].clamp(0, 1))
        try:
            ap = metrics2d.coco_keypoint_ap(annotations, results)
        except ImportError:
            return out
        out.update({"AP": ap["AP"], "AP50": ap["AP50"], "AR": ap["AR"]})
        return out

    # -- pictures and reporting
    def picture_batch(self) -> dict | None:
        """Plain and augmented training crops of a few people with their keypoints and
        skeleton links (flips swap sides, rotations carry the joints); see
        :meth:`Task.picture_batch`."""
        from ..augment.crops import augmented_crops

        ds = self.train_set.dataset
        people = []
        for i in np.linspace(0, len(ds) - 1, 8).round().astype(int).tolist():
            try:  # people whose image loads (a bad one is reported by the training loop)
                if "error" not in ds[i]:
                    people.append(i)
            except (OSError, ValueError):
                pass
        people = sorted(set(people))[:4]
        if not people:
            return None
        batch = augmented_crops(ds, self.skeleton, self.augment_config(), people, 5,
                                self.cfg.train.seed, "cpu")  # fmt: skip
        return {**batch, "links": self.coco.links}

    ROWS = (("pck", "PCK@0.2 (box)"), ("pck50", "PCK@0.5 (box)"), ("auc", "AUC (PCK 0..0.5)"),
            ("epe_px", "EPE (px)"), ("oks", "mean OKS"), ("AP", "COCO AP"), ("AP50", "COCO AP50"),
            ("AR", "COCO AR"))  # fmt: skip

    @classmethod
    def report(cls, metrics: dict[str, Any]) -> list[str]:
        lines = [f"  {metrics['people']} people, plain crops"]
        lines += [f"  {label:<28s} {metrics[k]:10.4g}" for k, label in cls.ROWS if k in metrics]
        if "AP" not in metrics:
            lines.append("  COCO AP: install pycocotools (the coco extra) to compute it")
        return lines
