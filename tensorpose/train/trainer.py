"""The simplest readable training loop for the 3D lifter (to be absorbed by the full trainer).

Read top to bottom: :func:`build_data` (sequences -> :class:`~tensorpose.data.mocap.LiftingSet`
on the device), :func:`build_model`, then :func:`train`: seeded, epoch loop over shuffled target
frames, batches assembled on the device, :class:`~tensorpose.tasks.LiftingTask` gives the loss,
Adam steps; the loss is accumulated on the device and read only every ``log_every`` steps (tqdm
bar with loss and frames/s); dense validation after every epoch; checkpoint + history at the end.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import torch

from .. import skeletons
from ..config import Config, config_from_dict, config_to_dict, save_config
from ..data.mocap import CameraSpec, LiftingSet, load_bvh_sequences, load_npz
from ..metrics import RunningMean
from ..models.lifter import TemporalLifter
from ..tasks import LiftingTask
from .checkpoint import CheckpointError, load_checkpoint, model_config_mismatch, save_checkpoint

__all__ = [
    "build_data",
    "build_eval_set",
    "build_model",
    "evaluate_checkpoint",
    "load_model",
    "resolve_device",
    "train",
]


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError:
        raise ValueError(f"train.device: not a device name: {name!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"train.device is {name!r} but CUDA is not available")
    return dev


def camera_spec(cfg: Config) -> CameraSpec:
    d = cfg.data
    return CameraSpec(d.width, d.height, d.focal, tuple(d.elevation_deg), tuple(d.distance_m))


def _load_split(cfg: Config, entries: list[str], cameras: int, mapping: str | None = None):
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


def build_data(cfg: Config, device: torch.device) -> tuple[LiftingSet, LiftingSet]:
    """Train and validation sets (split by sequence), on ``device``."""
    train_set = _load_split(cfg, cfg.data.train, cfg.data.train_cameras)
    val_set = _load_split(cfg, cfg.data.val, cfg.data.val_cameras)
    return train_set.to(device), val_set.to(device)


def build_eval_set(
    cfg: Config, bvh: list[str] | None, mapping: str | None, device: torch.device
) -> LiftingSet:
    """Evaluation clips: the given BVH files (any naming convention with a shipped mapping) or,
    by default, the config's held-out ``data.val``; cameras as for validation."""
    if bvh:
        d = cfg.data
        sk = skeletons.get(cfg.model.skeleton)
        seqs, _ = load_bvh_sequences(bvh, mapping or None, d.fps)
        s = LiftingSet.from_world(seqs, sk, d.val_cameras, d.seed, camera_spec(cfg))
    else:
        s = _load_split(cfg, cfg.data.val, cfg.data.val_cameras, mapping)
    return s.to(device)


def build_model(cfg: Config) -> TemporalLifter:
    m = cfg.model
    return TemporalLifter(
        skeletons.get(m.skeleton), m.receptive_field, m.channels, m.dropout, m.head
    )


def load_model(
    path: str | Path, model_config: dict | None = None
) -> tuple[TemporalLifter, Config, dict]:
    """Rebuild the model stored in a checkpoint.

    Args:
        model_config: if given (a ``model`` section dict), it must equal the checkpoint's;
            otherwise :class:`CheckpointError` lists the differing keys.

    Returns:
        ``(model in eval mode, the run's Config, extra dict)``.
    """
    payload = load_checkpoint(path)
    try:
        cfg = config_from_dict(payload["config"])
    except ValueError as e:
        raise CheckpointError(f"{path}: stored config is not valid here: {e}") from None
    stored = config_to_dict(cfg)["model"]
    if model_config is not None:
        diff = model_config_mismatch(stored, model_config)
        if diff:
            raise CheckpointError(
                f"{path}: checkpoint was trained with another model config: " + "; ".join(diff)
            )
    model = build_model(cfg)
    missing, unexpected = [], []
    try:
        result = model.load_state_dict(payload["model"], strict=False)
        missing, unexpected = result.missing_keys, result.unexpected_keys
    except RuntimeError as e:  # shape mismatches
        raise CheckpointError(f"{path}: weights do not fit model config {stored}: {e}") from None
    if missing or unexpected:
        raise CheckpointError(
            f"{path}: weights do not fit model config {stored} (missing {missing[:4]}, "
            f"unexpected {unexpected[:4]})"
        )
    return model.eval(), cfg, payload.get("extra", {})


def train(cfg: Config, run_dir: str | Path | None = None, progress: bool = True) -> dict[str, Any]:
    """Train the lifter described by ``cfg``; write config, checkpoint and history to
    ``run_dir`` (default ``train.out_dir/train.name``).

    Returns a dict with ``history`` (per-epoch train/val loss and MPJPE), ``val`` (final dense
    validation metrics), ``run_dir``, ``checkpoint`` and ``seconds``.
    """
    from tqdm import tqdm

    t_start = time.perf_counter()
    tc = cfg.train
    if run_dir is None:
        run_dir = Path(tc.out_dir) / (tc.name or f"lift_{cfg.model.head}")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(cfg, run_dir / "config.yaml")
    if tc.threads > 0:
        torch.set_num_threads(tc.threads)
    torch.manual_seed(tc.seed)
    device = resolve_device(tc.device)

    train_set, val_set = build_data(cfg, device)
    model = build_model(cfg).to(device)
    task = LiftingTask(model, tc.bone_weight, tc.direction_weight)
    rf = model.receptive_field()
    opt = torch.optim.Adam(model.parameters(), lr=tc.lr, amsgrad=True)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=tc.lr_decay)
    gen = torch.Generator(device=device).manual_seed(tc.seed)
    mean_pose = train_set.mean_pose()

    n, bs = len(train_set), tc.batch_size
    steps = math.ceil(n / bs)
    history: list[dict[str, float]] = []
    val: dict[str, float] = {}
    for epoch in range(tc.epochs):
        task.train()
        loss_m, mpjpe_m = RunningMean(), RunningMean()
        order = train_set.target_frames[torch.randperm(n, generator=gen, device=device)]
        bar = tqdm(
            range(steps), desc=f"epoch {epoch + 1}/{tc.epochs}", disable=not progress, leave=False
        )
        t0, seen = time.perf_counter(), 0
        for step in bar:
            frames = order[step * bs : (step + 1) * bs]
            batch = train_set.batch(frames, rf, cfg.data.flip, gen)
            out = task(batch)
            opt.zero_grad(set_to_none=True)
            out["loss"].backward()
            opt.step()
            k = frames.shape[0]
            loss_m.update(out["loss"], k)
            mpjpe_m.update(out["mpjpe"], k)
            seen += k
            if (step + 1) % tc.log_every == 0 or step + 1 == steps:  # the only host reads
                fps = seen / max(time.perf_counter() - t0, 1e-9)
                bar.set_postfix(loss=f"{loss_m.compute():.4f}", fps=f"{fps:.0f}")
        sched.step()
        train_seconds = time.perf_counter() - t0
        val = task.evaluate(val_set, mean_pose)
        row = {
            "epoch": epoch + 1,
            "train_loss": loss_m.compute(),
            "train_mpjpe_mm": 1000 * mpjpe_m.compute(),
            "val_loss": val["loss"],
            "val_mpjpe_mm": val["mpjpe_mm"],
            "val_p_mpjpe_mm": val["p_mpjpe_mm"],
            "frames_per_s": seen / max(train_seconds, 1e-9),
            "lr": opt.param_groups[0]["lr"],
        }
        history.append(row)
        if progress:
            tqdm.write(
                f"epoch {epoch + 1:3d}  train loss {row['train_loss']:.4f}  "
                f"train MPJPE {row['train_mpjpe_mm']:6.1f} mm  val MPJPE "
                f"{row['val_mpjpe_mm']:6.1f} mm  P-MPJPE {row['val_p_mpjpe_mm']:6.1f} mm  "
                f"{row['frames_per_s']:6.0f} frames/s"
            )
    ckpt = save_checkpoint(
        run_dir / "checkpoint.pt",
        model,
        config_to_dict(cfg),
        {"mean_pose": mean_pose.cpu(), "epochs": tc.epochs},
    )
    (run_dir / "history.json").write_text(json.dumps(history, indent=1))
    return {
        "history": history,
        "val": val,
        "run_dir": run_dir,
        "checkpoint": ckpt,
        "seconds": time.perf_counter() - t_start,
        "train_frames": n,
    }


def evaluate_checkpoint(
    path: str | Path,
    bvh: list[str] | None = None,
    mapping: str | None = None,
    model_config: dict | None = None,
    device: str = "auto",
    return_predictions: bool = False,
) -> dict[str, Any]:
    """Evaluate a checkpoint on BVH files (default: its config's held-out ``data.val``).

    Returns the metrics of :meth:`LiftingTask.evaluate` (``mpjpe_mm``, ``p_mpjpe_mm``,
    ``n_mpjpe_mm``, ``mpjve_mm``, ``bone_std_mm``, ``frames``, ``mean_pose_mpjpe_mm``) plus
    ``sequences``, ``cameras``, ``fps``; with ``return_predictions`` also ``predictions`` (the
    per-clip dense outputs) and ``data`` (the evaluated set).
    """
    model, cfg, extra = load_model(path, model_config)
    dev = resolve_device(device)
    data = build_eval_set(cfg, bvh, mapping, dev)
    task = LiftingTask(model.to(dev), cfg.train.bone_weight, cfg.train.direction_weight)
    mean_pose = extra.get("mean_pose")
    out: dict[str, Any] = dict(task.evaluate(data, mean_pose))
    out.pop("loss", None)
    out["sequences"] = sorted({c.name for c in data.clips})
    out["cameras"] = cfg.data.val_cameras
    out["fps"] = data.fps
    if return_predictions:
        out["predictions"] = task.predict_clips(data)
        out["data"] = data
    return out
