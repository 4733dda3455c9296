"""The state of a training run and its set-up: processes, seeds, run folder, task and data,
model wrappers, optimiser, schedule, scaler and, when resuming, the stored state."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..config import Config, ConfigError, config_to_dict, save_config
from ..tasks import Task, build_task, get_task, unwrap
from ..utils import seed_everything
from .checkpoint import (
    CheckpointError,
    freeze,
    load_checkpoint,
    load_weights,
    model_config_mismatch,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from .distributed import init_distributed, wrap_ddp
from .logging import RunLog
from .optim import build_optimizer, build_scheduler
from .profiler import StepProfiler, trace_profiler

__all__ = ["RESUMABLE", "Run", "setup"]

RESUMABLE = ("epochs", "max_steps", "log_every", "val_every", "ckpt_every", "threads",
             "device", "tensorboard", "out_dir", "name")  # fmt: skip
"""``train`` keys that may change when resuming (everything else must match)."""


@dataclass
class Run:
    """What one training run carries from step to step and epoch to epoch."""

    cfg: Config
    task: Task
    device: torch.device
    rank: int
    world: int
    run_dir: Path
    opt: torch.optim.Optimizer
    sched: torch.optim.lr_scheduler.LRScheduler
    scaler: torch.amp.GradScaler
    amp_dtype: torch.dtype | None
    frozen: list[str]
    t_start: float
    epoch: int = 0
    """Completed epochs (where the loop starts)."""
    step: int = 0
    """Optimiser steps so far."""
    history: list[dict] = field(default_factory=list)
    best: dict = field(default_factory=dict)
    first_loss: float | None = None
    metric: str = ""
    mode: str = "min"
    log: RunLog | None = None
    pictures: list[Path] = field(default_factory=list)
    prof: StepProfiler | None = None
    tracer: Any = None
    stopped: str | None = None
    val: dict = field(default_factory=dict)
    t_train: float = 0.0

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def ckpt_path(self) -> Path:
        return self.run_dir / "checkpoint.pt"

    def out_of_steps(self) -> bool:
        return bool(self.cfg.train.max_steps and self.step >= self.cfg.train.max_steps)

    def save(self, path: Path, epoch: int) -> Path:
        """A checkpoint with the full training state after ``epoch`` completed epochs."""
        return save_checkpoint(
            path, unwrap(self.task.model), config_to_dict(self.cfg), self.task.extra(),
            epoch=epoch, step=self.step, optimizer=self.opt.state_dict(),
            scheduler=self.sched.state_dict(),
            scaler=self.scaler.state_dict() if self.scaler.is_enabled() else None,
            rng=rng_state(self.task.generator), history=self.history, best=self.best,
            first_loss=self.first_loss,
        )  # fmt: skip


def setup(cfg: Config, run_dir: str | Path | None, resume: bool, profile: bool) -> Run:
    """Processes, run folder, seeds, task and data, wrappers, optimiser, schedule, scaler and
    (with ``resume``) the stored state: everything :func:`train_epoch` needs."""
    t_start = time.perf_counter()
    tc = cfg.train
    rank, world, device = init_distributed(tc.device)
    if tc.batch_size % world:
        raise ConfigError(
            f"train.batch_size {tc.batch_size} must be divisible by {world} processes"
        )
    if tc.amp != "none" and device.type != "cuda":
        raise ConfigError(f"train.amp={tc.amp} needs a CUDA device (running on {device})")
    default_name = get_task(cfg.task).run_name(cfg)
    run_dir = Path(run_dir) if run_dir is not None else Path(tc.out_dir) / (tc.name or default_name)
    payload = load_resume_state(cfg, run_dir / "checkpoint.pt") if resume else None
    if rank == 0:
        run_dir.mkdir(parents=True, exist_ok=True)
        save_config(cfg, run_dir / "config.yaml")
    if tc.threads > 0:
        torch.set_num_threads(tc.threads)
    seed_everything(tc.seed + rank, tc.deterministic)

    task, frozen = build_training_task(cfg, device, rank, world)
    opt = build_optimizer(tc, [p for p in task.parameters() if p.requires_grad])
    sched = build_scheduler(tc, opt, len(task.train_batches))
    scaler = torch.amp.GradScaler("cuda", enabled=tc.amp == "fp16")
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(tc.amp)
    run = Run(cfg, task, device, rank, world, run_dir, opt, sched, scaler, amp_dtype, frozen,
              t_start)  # fmt: skip
    if payload is not None:
        restore_state(run, payload)
    if tc.best_metric:
        higher = "pck" in tc.best_metric or "AP" in tc.best_metric
        run.metric, run.mode = tc.best_metric, "max" if higher else "min"
    else:
        run.metric, run.mode = task.best_metric
    if run.main:
        run.log = RunLog(run_dir, tc.tensorboard, append=resume)
        run.pictures = task.write_pictures(run_dir) if not resume else []
    run.prof = StepProfiler(device)
    run.tracer = trace_profiler(run_dir, device) if profile and run.main else None
    if run.tracer is not None:
        run.tracer.start()
    return run


def build_training_task(cfg: Config, device: torch.device, rank: int,
                        world: int) -> tuple[Task, list[str]]:  # fmt: skip
    """The task on ``device`` with its data set up for this rank, the model initialised
    (``init_from``), frozen (``freeze``) and wrapped (channels_last, DDP, torch.compile).
    Returns the task and the frozen parameter names."""
    tc = cfg.train
    task = build_task(cfg).to(device)
    if tc.init_from:
        missing, unexpected = load_weights(
            task.model, load_checkpoint(tc.init_from)["model"], False
        )
        if rank == 0:
            print(f"init from {tc.init_from}: missing {missing}, unexpected {unexpected}")
    frozen = freeze(task.model, tc.freeze) if tc.freeze else []
    task.setup(device, rank, world)
    if tc.channels_last:
        task.model = task.model.to(memory_format=torch.channels_last)
        task.channels_last = True
    if world > 1:
        task.model = wrap_ddp(task.model, device, tc.sync_bn)
    if tc.compile:
        task.model = torch.compile(task.model)
    return task, frozen


def load_resume_state(cfg: Config, path: Path) -> dict:
    """The checkpoint to resume from, checked: full training state, and the same config as
    ``cfg`` except for the ``train`` keys in :data:`RESUMABLE`."""
    payload = load_checkpoint(path)
    if payload.get("format") != 2 or "optimizer" not in payload:
        raise CheckpointError(f"{path}: holds weights only, no training state to resume")
    stored, now = payload["config"], config_to_dict(cfg)
    diffs = []
    if stored.get("task") != now["task"]:
        diffs.append(f"task: checkpoint has {stored.get('task')!r}, config has {now['task']!r}")
    for section in ("data", "model", "train"):
        a, b = stored.get(section) or {}, now[section]
        if section == "train":
            a = {k: v for k, v in a.items() if k not in RESUMABLE}
            b = {k: v for k, v in b.items() if k not in RESUMABLE}
        diffs += [f"{section}.{d}" for d in model_config_mismatch(a, b)]
    if diffs:
        raise CheckpointError(
            f"{path}: cannot resume, the run was started with another config: " + "; ".join(diffs)
        )
    return payload


def restore_state(run: Run, payload: dict) -> None:
    """Weights, optimiser, schedule, scaler, counters, history and RNG streams of a resumed
    run."""
    load_weights(run.task.model, payload["model"])
    run.opt.load_state_dict(payload["optimizer"])
    run.sched.load_state_dict(payload["scheduler"])
    if payload.get("scaler"):
        run.scaler.load_state_dict(payload["scaler"])
    run.epoch, run.step = payload["epoch"], payload["step"]
    run.history, run.best = list(payload.get("history", [])), dict(payload.get("best", {}))
    run.first_loss = payload.get("first_loss")
    set_rng_state(payload["rng"], run.task.generator)
    if run.rank:  # python/numpy/torch streams differ per rank, as in a fresh run
        seed_everything(run.cfg.train.seed + run.rank + 1_000_003 * run.epoch)
