"""One trainer for every task (``tensorpose.tasks``), readable top to bottom.

:func:`train`: set up (processes, seeds, run folder, task + data, model wrappers, optimiser,
schedule, scaler, resume), then the epoch loop: batches come through the
:class:`~tensorpose.train.profiler.DevicePrefetcher`; per step ``task.prepare`` (on-device
augmentation/targets), ``task(batch)`` (forward + loss), backward, clip, optimiser and schedule
steps, each timed by the :class:`~tensorpose.train.profiler.StepProfiler`. Losses are summed on
the device and read only every ``train.log_every`` steps (progress bar, ``steps.csv``, NaN
check). After an epoch: validation (every ``val_every``), checkpoint (every ``ckpt_every``,
atomic, full state), ``best.pt`` by the task's metric. A non-finite loss stops the run with a
clear message and keeps the last good checkpoint; a failing DataLoader worker stops it with
``interrupted.pt``. At the end: the breakdown of step time and ``summary.json``.

Distributed: under ``torchrun`` (``WORLD_SIZE`` > 1) every process trains a shard of each
global batch with DistributedDataParallel (NCCL on CUDA, gloo on CPU); rank 0 logs and writes
checkpoints; train losses are averaged over ranks at log intervals.
"""

from __future__ import annotations

import math
import os
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from ..config import Config, ConfigError, config_from_dict, config_to_dict, save_config
from ..metrics import RunningMean
from ..tasks import Task, build_task, unwrap
from .checkpoint import (
    CheckpointError,
    export_safetensors,
    freeze,
    load_checkpoint,
    load_weights,
    model_config_mismatch,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from .logging import RunLog
from .profiler import DevicePrefetcher, StepProfiler, trace_profiler

__all__ = [
    "TrainingStopped",
    "build_model",
    "evaluate_checkpoint",
    "load_model",
    "resolve_device",
    "train",
]

RESUMABLE = ("epochs", "max_steps", "log_every", "val_every", "ckpt_every", "threads",
             "device", "tensorboard", "out_dir", "name")  # fmt: skip
"""``train`` keys that may change when resuming (everything else must match)."""


class TrainingStopped(RuntimeError):
    """The run stopped early (non-finite loss, failing data); the message says why and which
    checkpoint is the last good one."""


# ---------------------------------------------------------------------- set-up helpers
def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    if name == "auto":
        name = f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(name)
    except RuntimeError:
        raise ValueError(f"train.device: not a device name: {name!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"train.device is {name!r} but CUDA is not available")
    return dev


def init_distributed(device_name: str) -> tuple[int, int, torch.device]:
    """``(rank, world_size, device)``; joins the process group when launched by ``torchrun``
    (NCCL on CUDA, gloo on CPU)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = resolve_device(device_name, local)
    if world == 1:
        return 0, 1, device
    if device.type == "cuda":
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return dist.get_rank(), dist.get_world_size(), device


def seed_everything(seed: int, deterministic: bool = False) -> None:
    """Seed python, numpy, torch and every CUDA device; optionally deterministic kernels."""
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 - the global stream
    torch.manual_seed(seed)  # also seeds every CUDA device
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True


def build_optimizer(tc, params) -> torch.optim.Optimizer:
    if tc.optimizer == "sgd":
        return torch.optim.SGD(params, tc.lr, momentum=tc.momentum, weight_decay=tc.weight_decay)
    cls = torch.optim.Adam if tc.optimizer == "adam" else torch.optim.AdamW
    return cls(params, tc.lr, weight_decay=tc.weight_decay, amsgrad=tc.amsgrad)


def build_scheduler(tc, opt, steps_per_epoch: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Per-step factor: linear warm-up over ``warmup_steps``, times the epoch schedule."""
    total = max(tc.epochs * steps_per_epoch, 1)

    def factor(step: int) -> float:
        epoch = step // steps_per_epoch
        warm = min(1.0, (step + 1) / tc.warmup_steps) if tc.warmup_steps else 1.0
        if tc.lr_schedule == "exponential":
            return warm * tc.lr_decay**epoch
        if tc.lr_schedule == "step":
            return warm * tc.lr_decay ** (epoch // tc.lr_step)
        if tc.lr_schedule == "cosine":
            return warm * 0.5 * (1 + math.cos(math.pi * min(step / total, 1.0)))
        return warm

    return torch.optim.lr_scheduler.LambdaLR(opt, factor)


def _reduce_mean(values: list[float], world: int, device: torch.device) -> list[float]:
    if world == 1:
        return values
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return (t / world).tolist()


def _check_resume_config(cfg: Config, stored: dict, path: Path) -> None:
    now = config_to_dict(cfg)
    diffs = []
    for section in ("task", "data", "model", "train"):
        a, b = stored.get(section), now.get(section)
        if section == "task":
            diffs += [f"task: checkpoint has {a!r}, config has {b!r}"] if a != b else []
            continue
        if section == "train":
            a = {k: v for k, v in (a or {}).items() if k not in RESUMABLE}
            b = {k: v for k, v in b.items() if k not in RESUMABLE}
        diffs += [f"{section}.{d}" for d in model_config_mismatch(a or {}, b)]
    if diffs:
        raise CheckpointError(
            f"{path}: cannot resume, the run was started with another config: " + "; ".join(diffs)
        )


# ---------------------------------------------------------------------- training
def train(
    cfg: Config,
    run_dir: str | Path | None = None,
    progress: bool = True,
    resume: bool = False,
    profile: bool = False,
) -> dict[str, Any]:
    """Train ``cfg.task``; write config, logs, checkpoints and ``summary.json`` to ``run_dir``
    (default ``train.out_dir/train.name``).

    Args:
        resume: continue the run in ``run_dir`` from its ``checkpoint.pt`` (the config must
            match the stored one except for ``train`` keys in :data:`RESUMABLE`).
        profile: write a torch.profiler Chrome trace of a few steps to ``run_dir/trace.json``.

    Returns:
        dict with ``history`` (per-epoch rows), ``val`` (last validation metrics),
        ``run_dir``, ``checkpoint``, ``best``, ``profile`` (step-time breakdown),
        ``seconds``, ``steps``, ``stopped`` (``None`` or the reason).

    Raises:
        TrainingStopped: non-finite loss or failing data (the message names the checkpoint).
    """
    from tqdm import tqdm

    t_start = time.perf_counter()
    tc = cfg.train
    rank, world, device = init_distributed(tc.device)
    main = rank == 0
    if tc.batch_size % world:
        raise ConfigError(
            f"train.batch_size {tc.batch_size} must be divisible by {world} processes"
        )
    if tc.amp != "none" and device.type != "cuda":
        raise ConfigError(f"train.amp={tc.amp} needs a CUDA device (running on {device})")
    default_name = f"lift_{cfg.model.head}" if cfg.task == "lift" else cfg.task
    run_dir = Path(run_dir) if run_dir is not None else Path(tc.out_dir) / (tc.name or default_name)
    ckpt_path = run_dir / "checkpoint.pt"
    payload = None
    if resume:
        payload = load_checkpoint(ckpt_path)
        if payload.get("format") != 2 or "optimizer" not in payload:
            raise CheckpointError(f"{ckpt_path}: holds weights only, no training state to resume")
        _check_resume_config(cfg, payload["config"], ckpt_path)
    if main:
        run_dir.mkdir(parents=True, exist_ok=True)
        save_config(cfg, run_dir / "config.yaml")
    if tc.threads > 0:
        torch.set_num_threads(tc.threads)
    seed_everything(tc.seed + rank, tc.deterministic)

    # task (model + loss + data), model wrappers
    task: Task = build_task(cfg).to(device)
    if tc.init_from:
        missing, unexpected = load_weights(
            task.model, load_checkpoint(tc.init_from)["model"], False
        )
        if main:
            print(f"init from {tc.init_from}: missing {missing}, unexpected {unexpected}")
    frozen = freeze(task.model, tc.freeze) if tc.freeze else []
    task.setup(device, rank, world)
    if tc.channels_last:
        task.model = task.model.to(memory_format=torch.channels_last)
        task.channels_last = True
    if world > 1:
        if tc.sync_bn and device.type == "cuda":
            task.model = nn.SyncBatchNorm.convert_sync_batchnorm(task.model)
        ids = [device.index] if device.type == "cuda" else None
        task.model = nn.parallel.DistributedDataParallel(task.model, device_ids=ids)
    if tc.compile:
        task.model = torch.compile(task.model)
    opt = build_optimizer(tc, [p for p in task.parameters() if p.requires_grad])
    steps_per_epoch = len(task.train_batches)
    sched = build_scheduler(tc, opt, steps_per_epoch)
    scaler = torch.amp.GradScaler("cuda", enabled=tc.amp == "fp16")
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(tc.amp)

    # state, resumed or fresh
    history: list[dict] = []
    best: dict = {}
    start_epoch, step = 0, 0
    if payload is not None:
        load_weights(task.model, payload["model"])
        opt.load_state_dict(payload["optimizer"])
        sched.load_state_dict(payload["scheduler"])
        if payload.get("scaler"):
            scaler.load_state_dict(payload["scaler"])
        start_epoch, step = payload["epoch"], payload["step"]
        history, best = list(payload.get("history", [])), dict(payload.get("best", {}))
        set_rng_state(payload["rng"], task.generator)
        if rank:  # python/numpy/torch streams differ per rank, as in a fresh run
            seed_everything(tc.seed + rank + 1_000_003 * start_epoch)
    metric, mode = (tc.best_metric, "max" if "pck" in tc.best_metric or "AP" in tc.best_metric
                    else "min") if tc.best_metric else task.best_metric  # fmt: skip
    log = RunLog(run_dir, tc.tensorboard, append=resume) if main else None
    pictures = task.write_pictures(run_dir) if main and not resume else []

    def checkpoint(path: Path, epoch: int) -> Path:
        return save_checkpoint(
            path, unwrap(task.model), config_to_dict(cfg), task.extra(),
            epoch=epoch, step=step, optimizer=opt.state_dict(), scheduler=sched.state_dict(),
            scaler=scaler.state_dict() if scaler.is_enabled() else None,
            rng=rng_state(task.generator), history=history, best=best, first_loss=first_loss,
        )  # fmt: skip

    prof = StepProfiler(device)
    tracer = trace_profiler(run_dir, device) if profile and main else None
    if tracer is not None:
        tracer.start()
    stopped, val, t_train = None, {}, 0.0
    first_loss = payload.get("first_loss") if payload is not None else None
    epoch = start_epoch
    for epoch in range(start_epoch, tc.epochs):
        if tc.max_steps and step >= tc.max_steps:
            break
        task.train()
        task.train_batches.set_epoch(epoch)
        sums: dict[str, RunningMean] = {}
        interval_loss = RunningMean()
        bar = tqdm(total=steps_per_epoch, desc=f"epoch {epoch + 1}/{tc.epochs}",
                   disable=not (progress and main), leave=False)  # fmt: skip
        t0, seen, t_log, seen_log = time.perf_counter(), 0, time.perf_counter(), 0
        batches = iter(DevicePrefetcher(task.train_batches, device, prof))
        for i in range(steps_per_epoch):
            try:
                batch = next(batches)
            except Exception as e:  # a failing sample or worker: stop with a checkpoint
                stopped = f"data error at epoch {epoch + 1}, step {i + 1}: {e}"
                if main:
                    checkpoint(run_dir / "interrupted.pt", epoch)
                raise TrainingStopped(
                    f"{stopped}\nstate saved to {run_dir / 'interrupted.pt'}; last complete "
                    f"checkpoint: {ckpt_path if ckpt_path.exists() else 'none yet'}"
                ) from e
            errors = batch.get("errors") if isinstance(batch, dict) else None
            if errors and main:  # unreadable samples were skipped: never silently
                tqdm.write(f"skipped samples: {'; '.join(errors)}")
                with (run_dir / "errors.log").open("a") as f:
                    f.write("".join(f"epoch {epoch + 1}: {m}\n" for m in errors))
            with prof.phase("prepare"):
                batch = task.prepare(batch)
            n = task.count(batch)
            with prof.phase("forward"), torch.autocast(device.type, amp_dtype,
                                                       enabled=amp_dtype is not None):  # fmt: skip
                out = task(batch)
            with prof.phase("backward"):
                scaler.scale(out["loss"]).backward()
            with prof.phase("optimizer"):
                if tc.grad_clip > 0:
                    scaler.unscale_(opt)
                    nn.utils.clip_grad_norm_(task.parameters(), tc.grad_clip)
                scaler.step(opt)
                scaler.update()
                opt.zero_grad(set_to_none=True)
                sched.step()
            prof.step_done()
            if tracer is not None:
                tracer.step()
            step += 1
            seen += n
            interval_loss.update(out["loss"], n)
            for k, v in out.items():
                if k != "pred" and torch.is_tensor(v) and v.dim() == 0:
                    sums.setdefault(k, RunningMean()).update(v, n)
            last = i + 1 == steps_per_epoch or (tc.max_steps and step >= tc.max_steps)
            if step % tc.log_every == 0 or last or step == 1:  # the only host reads
                prof.flush()
                (loss,) = _reduce_mean([interval_loss.compute()], world, device)
                now = time.perf_counter()
                rate = world * (seen - seen_log) / max(now - t_log, 1e-9)
                t_log, seen_log = now, seen
                interval_loss.reset()
                bar.update(i + 1 - bar.n)
                bar.set_postfix(loss=f"{loss:.4g}", samples_s=f"{rate:.0f}")
                if main:
                    lr = opt.param_groups[0]["lr"]
                    log.step({"step": step, "epoch": epoch + 1, "loss": loss, "lr": lr,
                              "samples_per_s": rate})  # fmt: skip
                if step == 1:
                    first_loss = loss
                if not math.isfinite(loss):
                    stopped = f"loss is {loss} at epoch {epoch + 1}, step {step}"
                    break
            if last:
                break
        bar.close()
        t_train += time.perf_counter() - t0
        if stopped:
            break
        keys = sorted(sums)
        means = dict(zip(keys, _reduce_mean([sums[k].compute() for k in keys], world, device),
                         strict=True))  # fmt: skip
        if not math.isfinite(means["loss"]):
            stopped = f"loss is {means['loss']} in epoch {epoch + 1}"
            break
        row = {"epoch": epoch + 1, **{f"train_{k}": v for k, v in means.items()}}
        row["samples_per_s"] = world * seen / max(time.perf_counter() - t0, 1e-9)
        row["lr"] = opt.param_groups[0]["lr"]
        final = epoch + 1 == tc.epochs or bool(tc.max_steps and step >= tc.max_steps)
        if main and ((epoch + 1) % tc.val_every == 0 or final):
            val = task.evaluate()
            row.update({f"val_{k}": v for k, v in val.items()})
        history.append(row)
        if main:
            _print_epoch(row, tqdm.write) if progress else None
            log.epoch(row, history)
            improved = metric in row and (
                not best
                or (row[metric] < best["value"] if mode == "min" else row[metric] > best["value"])
            )
            if improved:
                best = {"metric": metric, "mode": mode, "value": row[metric], "epoch": epoch + 1}
            if (epoch + 1) % tc.ckpt_every == 0 or final:
                checkpoint(ckpt_path, epoch + 1)
            if improved:
                checkpoint(run_dir / "best.pt", epoch + 1)
        if world > 1:
            dist.barrier()
    if tracer is not None:
        tracer.stop()

    breakdown = prof.summary(t_train)
    summary = {
        "task": cfg.task,
        "epochs": len(history),
        "steps": step,
        "seconds": time.perf_counter() - t_start,
        "world_size": world,
        "device": str(device),
        "stopped": stopped,
        "best": best,
        "first_loss": first_loss,
        "loss_drop": first_loss / history[-1]["train_loss"] if history and first_loss else None,
        "final": history[-1] if history else {},
        "profile": breakdown,
        "frozen": frozen,
        "pictures": [str(p) for p in pictures],
    }
    if main:
        if not stopped and ckpt_path.exists():
            try:
                summary["safetensors"] = str(export_safetensors(run_dir / "weights.safetensors",
                                                                unwrap(task.model)))  # fmt: skip
            except ImportError:  # optional package
                pass
        if progress:
            print(prof.table(breakdown))
        log.summary(summary)
    if stopped:
        last_good = ckpt_path if ckpt_path.exists() else None
        raise TrainingStopped(
            f"{stopped}: stopping. The last good checkpoint is "
            f"{last_good or 'none (no epoch completed)'}; lower train.lr, set train.grad_clip, "
            "or check the data."
        )
    return {
        **summary,
        "history": history,
        "val": val,
        "run_dir": run_dir,
        "checkpoint": ckpt_path,
        "train_frames": getattr(getattr(task, "train_set", None), "__len__", lambda: 0)(),
    }


def _print_epoch(row: dict, write) -> None:
    parts = [f"epoch {row['epoch']:3d}", f"train loss {row['train_loss']:.4g}"]
    for k, v in row.items():
        if k.startswith("val_") and isinstance(v, float) and k != "val_frames":
            parts.append(f"{k[4:]} {v:.4g}")
    parts.append(f"{row['samples_per_s']:.0f} samples/s")
    write("  ".join(parts))


# ---------------------------------------------------------------------- checkpoints -> models
def build_model(cfg: Config) -> nn.Module:
    from ..tasks import build_model as _build

    return _build(cfg)


def load_model(
    path: str | Path, model_config: dict | None = None
) -> tuple[nn.Module, Config, dict]:
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
    try:
        load_weights(model, payload["model"])
    except CheckpointError as e:
        raise CheckpointError(f"{path}: weights do not fit model config {stored}: {e}") from None
    return model.eval(), cfg, payload.get("extra", {})


def evaluate_checkpoint(
    path: str | Path,
    bvh: list[str] | None = None,
    mapping: str | None = None,
    model_config: dict | None = None,
    device: str = "auto",
    return_predictions: bool = False,
    annotations: str | None = None,
) -> dict[str, Any]:
    """Evaluate a checkpoint of any task.

    Lifting: on BVH files (default: the config's held-out ``data.val``); returns the metrics of
    :meth:`LiftingTask.evaluate` plus ``sequences``, ``cameras``, ``fps`` (and with
    ``return_predictions`` the per-clip ``predictions`` and the evaluated ``data``).
    2D: on ``annotations`` (default: the run's validation file), plain crops; returns PCK, AUC,
    EPE, OKS and COCO AP (see :meth:`TopDownTask.evaluate`) plus ``task``.
    """
    from ..tasks import build_task as _task
    from ..tasks import load_lifting_split

    model, cfg, extra = load_model(path, model_config)
    dev = resolve_device(device)
    task = _task(cfg, model.to(dev))
    if cfg.task != "lift":
        if annotations:
            cfg.data.val_annotations = annotations
        task.setup(dev)
        return {"task": cfg.task, **task.evaluate()}
    if bvh:
        from .. import skeletons
        from ..data.mocap import LiftingSet, load_bvh_sequences
        from ..tasks import camera_spec

        d = cfg.data
        seqs, _ = load_bvh_sequences(bvh, mapping or None, d.fps)
        data = LiftingSet.from_world(
            seqs, skeletons.get(cfg.model.skeleton), d.val_cameras, d.seed, camera_spec(cfg)
        ).to(dev)
    else:
        data = load_lifting_split(cfg, cfg.data.val, cfg.data.val_cameras, mapping).to(dev)
    out: dict[str, Any] = dict(task.evaluate(data, extra.get("mean_pose")))
    out.pop("loss", None)
    out["sequences"] = sorted({c.name for c in data.clips})
    out["cameras"] = cfg.data.val_cameras
    out["fps"] = data.fps
    if return_predictions:
        out["predictions"] = task.predict_clips(data)
        out["data"] = data
    return out


def profile_data(cfg: Config, workers: list[int], batches: int = 10) -> list[dict]:
    """Samples/s of the input pipeline alone (loader and on-device preparation, no model) for
    each number of DataLoader workers, on the configured device."""
    from ..tasks import build_task as _task

    device = resolve_device(cfg.train.device)
    rows = []
    for w in workers:
        if hasattr(cfg.data, "workers"):
            cfg.data.workers = w
        elif w:
            continue  # lifting batches are assembled on the device: no workers
        task = _task(cfg).to(device)
        task.setup(device)
        task.train_batches.set_epoch(0)
        prof = StepProfiler(device)
        it = iter(DevicePrefetcher(task.train_batches, device, prof))
        n, t0 = 0, None
        for i in range(batches + 1):  # the first batch starts the workers: not timed
            batch = next(it, None)
            if batch is None:
                it = iter(DevicePrefetcher(task.train_batches, device, prof))
                batch = next(it)
            batch = task.prepare(batch)
            if i == 0:
                t0 = time.perf_counter()
            else:
                n += task.count(batch)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        rate = n / max(time.perf_counter() - t0, 1e-9)
        rows.append({"workers": w, "samples_per_s": rate, "per_worker": rate / max(w, 1)})
    return rows
