"""Tasks: the one place where a batch meets the model and the loss.

A task is an ``nn.Module`` holding ``model`` (the trainer may wrap it in DDP or
``torch.compile``) and everything problem-specific around it:

- :meth:`Task.setup` builds the data (train batches for this rank, validation set);
- :meth:`Task.prepare` turns a batch on the device into model inputs and targets (on-device
  augmentation, normalisation, target generation);
- ``task(batch) -> {"loss", "pred", ...}``: one training step's outputs, all on the device
  (0-dim detached extras are averaged into the log);
- :meth:`Task.evaluate` gives the validation metrics as floats (read back once per validation).

Tasks: :class:`LiftingTask` (3D lifting from 2D keypoint windows), :class:`DeepPoseTask` (2D
joint regression, masked MSE) and :class:`HeatmapTask` (SimpleBaseline heatmaps, heatmap MSE).
CenterNet (whole-image, multi-person) has its codecs, head and loss but no task yet.
"""

from __future__ import annotations

import dataclasses
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from . import losses, metrics, metrics2d, skeletons
from .config import Config
from .data.mocap import CameraSpec, LiftingSet, load_bvh_sequences, load_npz
from .models.lifter import TemporalLifter
from .ops.kinematics import decompose

__all__ = [
    "DataError",
    "DeepPoseTask",
    "HeatmapTask",
    "LiftingTask",
    "Task",
    "build_model",
    "build_task",
    "unwrap",
]


def unwrap(model: nn.Module) -> nn.Module:
    """The module inside DistributedDataParallel (``.module``) and torch.compile
    (``._orig_mod``) wrappers."""
    while True:
        if hasattr(model, "_orig_mod"):
            model = model._orig_mod
        elif isinstance(model, nn.parallel.DistributedDataParallel):
            model = model.module
        else:
            return model


class Task(nn.Module):
    """Base class: ``model`` + loss + the data glue of one problem (see the module docstring).

    Attributes set by :meth:`setup`: ``train_batches`` (iterable of host or device batches for
    this rank, with ``len``, ``set_epoch(epoch)``), ``generator`` (device RNG of on-device
    randomness, saved in checkpoints).
    """

    best_metric = ("val_loss", "min")
    """Default validation metric for ``best.pt`` and whether lower or higher is better."""

    def __init__(self, model: nn.Module, cfg: Config) -> None:
        super().__init__()
        self.model = model
        self.cfg = cfg
        self.channels_last = False
        self.generator: torch.Generator | None = None

    def setup(self, device: torch.device, rank: int = 0, world: int = 1) -> None:
        raise NotImplementedError

    def prepare(self, batch: dict) -> dict:
        """On-device work between the host-to-device copy and the forward pass."""
        return batch

    def count(self, batch: dict) -> int:
        """Samples in a prepared batch (a host int from a shape: no synchronisation)."""
        raise NotImplementedError

    def evaluate(self) -> dict[str, float]:
        raise NotImplementedError

    def extra(self) -> dict:
        """Task data kept in checkpoints next to the weights."""
        return {}

    def write_pictures(self, run_dir: Path) -> list[Path]:
        """Pictures for the run folder at the start of training."""
        return []


# ---------------------------------------------------------------------- 3D lifting
def camera_spec(cfg: Config) -> CameraSpec:
    d = cfg.data
    return CameraSpec(d.width, d.height, d.focal, tuple(d.elevation_deg), tuple(d.distance_m))


def load_lifting_split(cfg: Config, entries: list[str], cameras: int, mapping: str | None = None):
    """A :class:`LiftingSet` of BVH files/bundled names or npz entries, seen by ``cameras``
    virtual cameras (fixed by ``data.seed``)."""
    d = cfg.data
    sk = skeletons.get(cfg.model.skeleton)
    spec = camera_spec(cfg)
    if d.source == "npz":
        world, clips = load_npz(d.npz, sk, entries, d.up_axis)
        if world and clips:
            raise ValueError(f"{d.npz}: mixes world-only and per-camera entries; split them")
        if clips:
            return LiftingSet.from_arrays(clips, sk, d.width, d.height)
        return LiftingSet.from_world(world, sk, cameras, d.seed, spec)
    seqs, bvh_sk = load_bvh_sequences(entries, mapping if mapping is not None else d.mapping, d.fps)
    if bvh_sk != sk:
        raise ValueError(
            f"the BVH mapping produces skeleton {bvh_sk.name!r} but model.skeleton is {sk.name!r}"
        )
    return LiftingSet.from_world(seqs, sk, cameras, d.seed, spec)


class FrameBatches:
    """Shuffled target frames of a :class:`LiftingSet` in batches, drawn on the device.

    Each epoch one ``randperm`` (from ``generator``); with ``world > 1`` processes, the order is
    padded to a multiple of ``world`` and rank ``r`` takes every ``world``-th frame from ``r``
    (as ``DistributedSampler``), in batches of ``batch_size / world``: the ranks' batches of a
    step together are the single-process batch of that step.
    """

    def __init__(self, data: LiftingSet, batch_size: int, generator: torch.Generator,
                 rank: int = 0, world: int = 1) -> None:  # fmt: skip
        self.data, self.generator, self.rank, self.world = data, generator, rank, world
        self.local = batch_size // world
        per_rank = math.ceil(len(data) / world)
        self.steps = math.ceil(per_rank / self.local)

    def __len__(self) -> int:
        return self.steps

    def set_epoch(self, epoch: int) -> None:  # the generator's state carries over epochs
        pass

    def __iter__(self):
        n = len(self.data)
        perm = torch.randperm(n, generator=self.generator, device=self.generator.device)
        order = self.data.target_frames[perm]
        if self.world > 1:
            pad = (-n) % self.world
            order = torch.cat([order, order[:pad]])[self.rank :: self.world]
        for step in range(self.steps):
            yield {"frames": order[step * self.local : (step + 1) * self.local]}


class LiftingTask(Task):
    """2D keypoint windows -> root-relative 3D joints, with the loss of the model's head.

    Loss: MPJPE, plus for the kinematic head ``bone_weight * |length error|`` and
    ``direction_weight * |direction error|`` (all in metres / unit vectors).
    """

    best_metric = ("val_mpjpe_mm", "min")

    def __init__(self, model: TemporalLifter, cfg: Config | None = None) -> None:
        super().__init__(model, cfg)
        self.skeleton = model.skeleton
        self.bone_weight = cfg.model.bone_weight if cfg is not None else 1.0
        self.direction_weight = cfg.model.direction_weight if cfg is not None else 0.1
        self.mean_pose: torch.Tensor | None = None

    def setup(self, device: torch.device, rank: int = 0, world: int = 1) -> None:
        """Train and validation sets (split by sequence) on ``device``; batches of frames."""
        cfg = self.cfg
        d, t = cfg.data, cfg.train
        self.train_set = load_lifting_split(cfg, d.train, d.train_cameras).to(device)
        self.val_set = load_lifting_split(cfg, d.val, d.val_cameras).to(device)
        self.mean_pose = self.train_set.mean_pose()
        self.generator = torch.Generator(device=device).manual_seed(t.seed)
        self.train_batches = FrameBatches(self.train_set, t.batch_size, self.generator, rank, world)

    def prepare(self, batch: dict) -> dict:
        """Window gather and random flip, on the device (same generator as the shuffle)."""
        rf = unwrap(self.model).receptive_field()
        return self.train_set.batch(batch["frames"], rf, self.cfg.data.flip, self.generator)

    def count(self, batch: dict) -> int:
        return batch["keypoints"].shape[0]

    def extra(self) -> dict:
        return {"mean_pose": self.mean_pose.cpu()} if self.mean_pose is not None else {}

    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``batch``: ``keypoints (B, R, J, 2)`` windows of exactly the receptive field and
        ``target (B, 1, J, 3)``. Runs the strided (one frame per window) model.

        Returns ``loss`` (0-dim), ``pred (B, 1, J, 3)``, ``mpjpe_mm`` (0-dim, detached) and the
        loss terms, all on the device (nothing is read back to the host).
        """
        out = self.model(batch["keypoints"], strided=True)
        return self._loss(out, batch["target"])

    def _loss(self, out: dict[str, torch.Tensor], target: torch.Tensor) -> dict[str, torch.Tensor]:
        pred = out["joints"]
        err = losses.mpjpe_loss(pred, target)
        result = {"pred": pred, "mpjpe_mm": 1000 * err.detach()}
        loss = err
        if "lengths" in out:
            bone = losses.bone_length_loss(out["lengths"], target, self.skeleton)
            direction = losses.bone_direction_loss(out["directions"], target, self.skeleton)
            loss = loss + self.bone_weight * bone + self.direction_weight * direction
            result["bone_loss"] = bone.detach()
            result["direction_loss"] = direction.detach()
        result["loss"] = loss
        return result

    @torch.no_grad()
    def predict_clips(self, data: LiftingSet) -> list[dict[str, torch.Tensor]]:
        """Dense predictions for every clip: one batched forward per group of clips of equal
        length (the cameras of one sequence). Each entry: ``pred``, ``target (T, J, 3)``,
        ``valid (T,)``, ``keypoints (T, J, 2)`` and the clip index."""
        was_training = self.training
        self.eval()
        results = []
        for group in data.clip_groups():  # a loop over sequences, not samples
            arrays = [data.clip_arrays(i) for i in group]
            kp = torch.stack([a["keypoints"] for a in arrays])
            pred = unwrap(self.model).predict(kp)
            for k, (i, a) in enumerate(zip(group, arrays, strict=True)):
                results.append({"clip": i, "pred": pred[k], **a})
        self.train(was_training)
        return results

    def evaluate(
        self, data: LiftingSet | None = None, mean_pose: torch.Tensor | None = None
    ) -> dict[str, float]:
        """Metrics over all valid frames of all clips of ``data`` (default: the validation set),
        in millimetres.

        Returns ``mpjpe_mm``, ``p_mpjpe_mm``, ``n_mpjpe_mm``, ``mpjve_mm`` (per frame at the
        data's frame rate), ``bone_std_mm`` (per-bone std of predicted lengths over each clip,
        averaged), ``frames`` (evaluated poses, frames x cameras), ``loss`` (the training loss
        on the dense predictions) and, given ``mean_pose (J, 3)`` (default: the training set's),
        ``mean_pose_mpjpe_mm`` (the error of always predicting that pose).
        """
        if data is None:
            data, mean_pose = self.val_set, self.mean_pose
        with torch.no_grad():
            return self._evaluate(data, mean_pose)

    def _evaluate(self, data: LiftingSet, mean_pose: torch.Tensor | None) -> dict[str, float]:
        sums = {k: 0.0 for k in ("mpjpe", "p_mpjpe", "n_mpjpe", "loss", "mean_pose")}
        vel_sum, vel_n, std_sum, frames = 0.0, 0, 0.0, 0
        for r in self.predict_clips(data):
            pred, target, valid = r["pred"], r["target"], r["valid"]
            n = int(valid.sum())
            p, t = pred[valid], target[valid]
            sums["mpjpe"] += float(metrics.mpjpe(p, t, "none").sum())
            sums["p_mpjpe"] += float(metrics.p_mpjpe(p, t, "none").sum())
            sums["n_mpjpe"] += float(metrics.n_mpjpe(p, t, "none").sum())
            if mean_pose is not None:
                mp = mean_pose.to(t).expand_as(t)
                sums["mean_pose"] += float(metrics.mpjpe(mp, t, "none").sum())
            both = valid[1:] & valid[:-1]
            if pred.shape[0] > 1 and bool(both.any()):
                v = metrics.mpjve(pred, target, "none")[both]
                vel_sum += float(v.sum())
                vel_n += int(v.numel())
            std_sum += float(metrics.bone_length_std(pred[valid], self.skeleton, "mean"))
            loss_out = {"joints": p[None]}
            if unwrap(self.model).head == "kinematic":
                lengths, dirs = decompose(p[None], self.skeleton)
                loss_out.update(lengths=lengths[:, :1], directions=dirs)
            sums["loss"] += float(self._loss(loss_out, t[None])["loss"]) * n
            frames += n
        clips = len(data.clips)
        out = {
            "mpjpe_mm": 1000 * sums["mpjpe"] / frames,
            "p_mpjpe_mm": 1000 * sums["p_mpjpe"] / frames,
            "n_mpjpe_mm": 1000 * sums["n_mpjpe"] / frames,
            "mpjve_mm": 1000 * vel_sum / max(vel_n, 1),
            "bone_std_mm": 1000 * std_sum / clips,
            "frames": frames,
            "loss": sums["loss"] / frames,
        }
        if mean_pose is not None:
            out["mean_pose_mpjpe_mm"] = 1000 * sums["mean_pose"] / frames
        return out


# ---------------------------------------------------------------------- 2D top-down
class DataError(RuntimeError):
    """A sample could not be loaded; the message names the sample, annotation and image."""


class IdentifiedSamples(Dataset):
    """A :class:`~tensorpose.data.images.TopDownDataset` whose failures name the sample: any
    exception while loading item ``i`` becomes :class:`DataError` with the sample index, the
    annotation id and the image file (DataLoader workers re-raise it in the main process)."""

    def __init__(self, dataset) -> None:
        self.dataset = dataset
        self.records = dataset.records

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> dict:
        try:
            return self.dataset[index]
        except Exception as e:
            r = self.records[index]
            raise DataError(
                f"sample {index} (annotation {r.ann_id}, image {r.file}): {type(e).__name__}: {e}"
            ) from e


def seed_worker(worker_id: int) -> None:
    """DataLoader ``worker_init_fn``: seed python and numpy from the worker's torch seed
    (which the DataLoader derives from its generator and the worker id)."""
    seed = torch.initial_seed() % 2**32
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - the global stream user code may draw from


class EpochLoader:
    """A DataLoader whose shuffle, worker seeds and CPU augmentation depend only on
    ``(seed, epoch)``: resuming at an epoch boundary replays the same batches."""

    def __init__(self, loader: DataLoader, seed: int) -> None:
        self.loader, self.seed = loader, seed

    def __len__(self) -> int:
        return len(self.loader)

    def set_epoch(self, epoch: int) -> None:
        self.loader.sampler.set_epoch(epoch)
        self.loader.generator.manual_seed(self.seed * 1_000_003 + epoch)
        if hasattr(self.loader.collate_fn, "set_epoch"):
            self.loader.collate_fn.set_epoch(epoch)

    def __iter__(self):
        return iter(self.loader)


class TopDownTask(Task):
    """Shared 2D top-down plumbing: COCO people -> crops (CPU workers or on the device) ->
    normalised images and targets; evaluation on plain crops with PCK, AUC, EPE, OKS and COCO
    AP (results JSON through pycocotools, when installed)."""

    best_metric = ("val_pck", "max")

    def __init__(self, model: nn.Module, cfg: Config) -> None:
        super().__init__(model, cfg)
        self.skeleton = skeletons.get(cfg.model.skeleton)
        self.size = tuple(cfg.data.input_size)

    # -- data
    def augment_config(self, plain: bool = False):
        from .augment import AugmentConfig

        d = self.cfg.data
        if plain:
            return AugmentConfig.identity(self.size)
        names = {f.name for f in dataclasses.fields(AugmentConfig)} - {"output_size"}
        return AugmentConfig(self.size, **{k: getattr(d, k) for k in names if hasattr(d, k)})

    def dataset(self, annotations: str):
        from .data.images import TopDownDataset
        from .io.coco import bundled_coco, load_coco_keypoints

        d = self.cfg.data
        path = Path(annotations) if annotations else bundled_coco()
        coco = load_coco_keypoints(path, min_keypoints=d.min_keypoints, warn=False)
        if len(coco.keypoint_names) != self.skeleton.num_joints:
            raise ValueError(
                f"{path}: K={len(coco.keypoint_names)} keypoints but model.skeleton "
                f"{self.skeleton.name!r} has {self.skeleton.num_joints} joints"
            )
        records = coco.records[: d.people] if d.people else coco.records
        ds = TopDownDataset(records, self.size[1] / self.size[0], d.padding, d.on_error,
                            d.cache_images)  # fmt: skip
        return IdentifiedSamples(ds), coco, path

    def backend(self, device: torch.device) -> str:
        b = self.cfg.data.backend
        return ("device" if device.type == "cuda" else "cpu") if b == "auto" else b

    def loader(self, ds, batch: int, device, rank: int, world: int, shuffle: bool,
               plain: bool) -> EpochLoader:  # fmt: skip
        from .augment import CpuAugment
        from .data.images import collate_topdown

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
        self.train_set, self.coco, _ = self.dataset(d.annotations)
        self.val_set, _, self.val_path = self.dataset(d.val_annotations or d.annotations)
        local = t.batch_size // world
        self.train_batches = self.loader(self.train_set, local, device, rank, world, True, False)
        self.generator = torch.Generator(device=device).manual_seed(t.seed + 7919 * rank)

    # -- step
    def prepare(self, batch: dict, plain: bool = False) -> dict:
        """Device augmentation (device backend), normalisation, targets."""
        if self.backend(batch["keypoints"].device) == "device":
            from .augment import DeviceAugment

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
        x = x.contiguous(memory_format=fmt)
        batch["x"] = x
        return self.targets(batch)

    def count(self, batch: dict) -> int:
        return batch["x"].shape[0]

    def targets(self, batch: dict) -> dict:
        raise NotImplementedError

    def decode(self, out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Model output -> crop-pixel keypoints ``(B, K, 2)`` and scores ``(B, K)``."""
        raise NotImplementedError

    # -- evaluation
    @torch.no_grad()
    def predict(self, ds=None, batch_size: int | None = None) -> dict[str, Any]:
        """Plain-crop predictions in image pixels for every person of ``ds`` (default: the
        validation set), with their ids and the mean loss."""
        from .ops.affine import invert_affine, transform_points

        ds = ds if ds is not None else self.val_set
        device = getattr(self, "device", torch.device("cpu"))
        bs = batch_size or max(1, min(self.cfg.train.batch_size, 32))
        loader = self.loader(ds, bs, device, 0, 1, shuffle=False, plain=True)
        model = unwrap(self.model)
        was_training = model.training
        model.eval()
        preds, scores, index, loss_sum, n = [], [], [], 0.0, 0
        for batch in loader:
            batch = {k: v.to(device) if torch.is_tensor(v) else v for k, v in batch.items()}
            batch = self.prepare(batch, plain=True)
            out = self.step_outputs(model, batch)
            crop, sc = self.decode(out["raw"])
            preds.append(transform_points(crop.double(), invert_affine(batch["matrices"].double())))
            scores.append(sc)
            index.append(batch["index"])
            k = batch["x"].shape[0]
            loss_sum += float(out["loss"]) * k
            n += k
        model.train(was_training)
        return {
            "pred": torch.cat(preds).float().cpu(),
            "scores": torch.cat(scores).float().cpu(),
            "index": torch.cat(index).cpu(),
            "loss": loss_sum / max(n, 1),
        }

    def evaluate(self, ds=None, annotations: str | Path | None = None) -> dict[str, float]:
        """PCK@0.2 and @0.5 (box-normalised), AUC, EPE (px), mean OKS in image pixels on plain
        crops, the loss, and COCO AP/AR (pycocotools on results JSON; skipped without it)."""
        from .io.coco import coco_results

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

    def step_outputs(self, model: nn.Module, batch: dict) -> dict:
        raise NotImplementedError

    def forward(self, batch: dict) -> dict[str, torch.Tensor]:
        out = self.step_outputs(self.model, batch)
        out["pred"] = self.decode_train(out.pop("raw"))
        return out

    def decode_train(self, raw: torch.Tensor) -> torch.Tensor:
        return raw

    def write_pictures(self, run_dir: Path) -> list[Path]:
        """``augment.png``: plain and augmented training crops of a few people with their
        keypoints and skeleton links (flips swap sides, rotations carry the joints)."""
        import cv2

        from .viz import augment_grid

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
            return []
        grid = augment_grid(ds, self.skeleton, self.augment_config(), people, 5,
                            self.cfg.train.seed, "cpu", links=self.coco.links)  # fmt: skip
        path = Path(run_dir) / "augment.png"
        cv2.imwrite(str(path), cv2.cvtColor(grid, cv2.COLOR_RGB2BGR))
        return [path]


class DeepPoseTask(TopDownTask):
    """DeepPose: ``(B, K, 2)`` coordinates normalised to the crop, visibility-masked MSE."""

    def targets(self, batch: dict) -> dict:
        from .models.deeppose import normalize_coords

        batch["y"] = normalize_coords(batch["keypoints"], self.size)
        return batch

    def step_outputs(self, model: nn.Module, batch: dict) -> dict:
        out = model(batch["x"])
        fn = losses.masked_mse_explicit if self.cfg.model.explicit_backward else losses.masked_mse
        loss = fn(out.float(), batch["y"], batch["visibility"])
        if model.training and dist.is_initialized() and dist.get_world_size() > 1:
            # normalise by the visible joints of the GLOBAL batch (DDP averages gradients over
            # ranks): one all-reduce of a count on the device, no host sync
            local = (batch["visibility"] > 0).sum().to(loss.dtype)
            total = local.clone()
            dist.all_reduce(total)
            loss = loss * local.clamp_min(1) * dist.get_world_size() / total.clamp_min(1)
        return {"loss": loss, "raw": out}

    def decode_train(self, raw: torch.Tensor) -> torch.Tensor:
        from .models.deeppose import denormalize_coords

        return denormalize_coords(raw.detach().float(), self.size)

    def decode(self, raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pred = self.decode_train(raw)
        return pred, torch.ones(pred.shape[:2], device=pred.device)


class HeatmapTask(TopDownTask):
    """SimpleBaseline: MSRA gaussian heatmaps at stride 4, weighted heatmap MSE."""

    def targets(self, batch: dict) -> dict:
        from .ops.heatmap import gaussian_heatmaps

        H, W = self.size
        hm, w = gaussian_heatmaps(batch["keypoints"], batch["visibility"], (H // 4, W // 4),
                                  self.cfg.model.sigma, 4.0)  # fmt: skip
        batch["heatmaps"], batch["weights"] = hm, w
        return batch

    def step_outputs(self, model: nn.Module, batch: dict) -> dict:
        out = model(batch["x"])
        return {"loss": losses.heatmap_mse(out.float(), batch["heatmaps"], batch["weights"]),
                "raw": out}  # fmt: skip

    def decode_train(self, raw: torch.Tensor) -> torch.Tensor:
        return self.decode(raw)[0]

    def decode(self, raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        from .ops.heatmap import decode_heatmaps

        return decode_heatmaps(raw.detach().float(), self.cfg.model.decode, stride=4.0)


# ---------------------------------------------------------------------- factories
def build_model(cfg: Config) -> nn.Module:
    """The model of ``cfg.task`` from the ``model`` section."""
    m = cfg.model
    if cfg.task == "lift":
        return TemporalLifter(
            skeletons.get(m.skeleton), m.receptive_field, m.channels, m.dropout, m.head
        )
    K = skeletons.get(m.skeleton).num_joints
    if cfg.task == "deeppose":
        from .models.deeppose import deeppose

        if m.backbone == "alexnet":
            kw = {"input_size": cfg.data.input_size[0], "fc_width": m.fc_width,
                  "dropout": m.dropout}  # fmt: skip
        else:
            kw = {"width": m.width}
        return deeppose(K, m.backbone, **kw)
    from .models.heads import heatmap_pose_net

    return heatmap_pose_net(K, m.depth, m.width)


TASK_CLASSES = {"lift": LiftingTask, "deeppose": DeepPoseTask, "heatmap": HeatmapTask}


def build_task(cfg: Config, model: nn.Module | None = None) -> Task:
    """The task of ``cfg.task`` around ``model`` (default: a fresh :func:`build_model`)."""
    return TASK_CLASSES[cfg.task](model if model is not None else build_model(cfg), cfg)
