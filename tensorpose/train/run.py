"""The state of a training run and its set-up: processes, seeds, run folder, task and data,
model wrappers, optimiser, schedule, scaler and, when resuming, the stored state."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..config import Config, ConfigError, config_to_dict, save_config
from ..errors import MissingFileError
from ..io.atomic import FolderLock
from ..tasks import Task, build_task, get_task, unwrap
from ..threads import set_threads
from .atomic_save import clean_temp_files
from .checkpoint import (
    RESUME_KEYS,
    CheckpointError,
    load_checkpoint,
    load_weights,
    model_config_mismatch,
    save_checkpoint,
)
from .distributed import init_distributed, wrap_ddp
from .folder import RunFolderError, check_run_name
from .interrupt import SignalCatcher
from .logging import RunLog
from .optim import build_optimizer, build_scheduler
from .profiler import StepProfiler, trace_profiler
from .rng import rng_state, set_rng_state
from .state_dict import freeze
from .utils import seed_everything

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
    final_val: dict | None = None  # the last epoch's validation, with what it covered
    t_train: float = 0.0
    lock: FolderLock | None = None
    skipped: set[str] = field(default_factory=set)
    """Unreadable inputs already reported (each is reported once per run)."""
    signals: SignalCatcher | None = None
    position: dict | None = None
    """Where a mid-epoch checkpoint stopped: ``epoch``, ``batch`` (batches done),
    ``epoch_rng`` (the task generator at the epoch start), ``meter`` (the epoch's sums)."""

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def ckpt_path(self) -> Path:
        return self.run_dir / "checkpoint.pt"

    def out_of_steps(self) -> bool:
        return bool(self.cfg.train.max_steps and self.step >= self.cfg.train.max_steps)

    def save(self, path: Path, epoch: int, position: dict | None = None) -> Path:
        """A checkpoint with the full training state after ``epoch`` completed epochs (and,
        mid-epoch, ``position``: see :attr:`position`)."""
        extra_state = {"position": position} if position is not None else {}
        return save_checkpoint(
            path, unwrap(self.task.model), config_to_dict(self.cfg), self.task.extra(),
            epoch=epoch, step=self.step, optimizer=self.opt.state_dict(),
            scheduler=self.sched.state_dict(),
            scaler=self.scaler.state_dict() if self.scaler.is_enabled() else None,
            rng=rng_state(self.task.generator), history=self.history, best=self.best,
            first_loss=self.first_loss, **extra_state,
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
    if run_dir is None:
        run_dir = Path(tc.out_dir) / check_run_name(tc.name or default_name)
    run_dir = Path(run_dir)
    lock = open_run_folder(run_dir, resume) if rank == 0 else None
    try:
        return _setup(cfg, run_dir, resume, profile, rank, world, device, lock, t_start)
    except BaseException:
        if lock is not None:
            lock.release()
            if not resume:  # a fresh run that never started leaves no folder behind
                (run_dir / "config.yaml").unlink(missing_ok=True)
                if not any(run_dir.iterdir()):
                    run_dir.rmdir()
        raise


def _setup(cfg: Config, run_dir: Path, resume: bool, profile: bool, rank: int, world: int,
           device: torch.device, lock: FolderLock | None, t_start: float) -> Run:  # fmt: skip
    tc = cfg.train
    payload = load_resume_state(cfg, run_dir / "checkpoint.pt") if resume else None
    if rank == 0:
        save_config(cfg, run_dir / "config.yaml")
    set_threads(tc.threads, "train.threads")  # 0: the default policy (tensorpose.threads)
    seed_everything(tc.seed + rank, tc.deterministic)

    task, frozen = build_training_task(cfg, device, rank, world)
    opt = build_optimizer(tc, [p for p in task.parameters() if p.requires_grad])
    sched = build_scheduler(tc, opt, len(task.train_batches))
    scaler = torch.amp.GradScaler("cuda", enabled=tc.amp == "fp16")
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(tc.amp)
    run = Run(cfg, task, device, rank, world, run_dir, opt, sched, scaler, amp_dtype, frozen,
              t_start, lock=lock)  # fmt: skip
    if payload is not None:
        restore_state(run, payload)
        if run.main:
            repair_after_crash(run, payload)
    run.metric, run.mode = best_metric(cfg, task)
    if run.main:
        run.log = RunLog(run_dir, tc.tensorboard, append=resume)
        batch = task.picture_batch() if not resume else None
        run.pictures = [] if batch is None else [write_augment_picture(run_dir, batch)]
    run.prof = StepProfiler(device)
    run.tracer = trace_profiler(run_dir, device) if profile and run.main else None
    if run.tracer is not None:
        run.tracer.start()
    return run


def write_augment_picture(run_dir: Path, batch: dict) -> Path:
    """``augment.png`` in ``run_dir``: the task's :meth:`~tensorpose.tasks.base.Task.picture_batch`
    drawn (OpenCV is imported here, so a run that pictures nothing does not load it)."""
    from ..viz.draw import picture_grid, write_picture

    return write_picture(run_dir / "augment.png", picture_grid(batch))


def open_run_folder(run_dir: Path, resume: bool) -> FolderLock:
    """Create (fresh run) or open (``resume``) ``run_dir`` and take its lock; remove the
    temporary files of interrupted checkpoint writes.

    Raises:
        RunFolderError: a fresh run into a folder that already holds files (the message names
            ``--resume`` and ``train.name``); a folder locked by a running process.
    """
    if resume:
        if not run_dir.is_dir():
            raise MissingFileError(f"{run_dir / 'checkpoint.pt'}: no such run folder to resume")
    else:
        if run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())):
            raise RunFolderError(
                f"run folder {run_dir} already exists and is not empty: continue that run with "
                f"`tensorpose train --resume {run_dir}`, or choose another train.name (or "
                "train.out_dir); nothing was changed"
            )
        run_dir.mkdir(parents=True, exist_ok=True)
    lock = FolderLock(run_dir).acquire()
    clean_temp_files(run_dir)
    return lock


def best_metric(cfg: Config, task: Task) -> tuple[str, str]:
    """The metric that selects ``best.pt`` and ``"min"``/``"max"``: ``train.best_metric``
    (checked against the task's reported metrics when the config is built) or the task's."""
    name = cfg.train.best_metric
    if not name:
        return task.best_metric
    higher = "pck" in name or "AP" in name
    return name, "max" if higher else "min"


def repair_after_crash(run: Run, payload: dict) -> None:
    """Make the run folder agree with the checkpoint (the source of truth) after a kill:
    ``best.pt`` rewritten when its record differs and the checkpoint holds those weights,
    ``steps.csv``/``history.csv``/``history.json`` cut back to the checkpoint's step/epoch."""
    import csv
    import json

    best_path = run.run_dir / "best.pt"
    best = dict(payload.get("best") or {})
    if best and best.get("epoch") == payload["epoch"] and payload.get("position") is None:
        stored = None
        if best_path.is_file():
            try:
                stored = load_checkpoint(best_path).get("best")
            except (CheckpointError, OSError):
                stored = None
        if stored != best:
            run.save(best_path, payload["epoch"])
            print(f"{best_path}: rewritten from checkpoint.pt (best epoch {best['epoch']})")
    for name, key, limit in (("steps.csv", "step", run.step), ("history.csv", "epoch", run.epoch)):
        path = run.run_dir / name
        if not path.is_file():
            continue
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        keep = [r for r in rows if r.get(key, "").isdigit() and int(r[key]) <= limit]
        if len(keep) != len(rows):
            fields = list(rows[0]) if rows else []
            with path.open("w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=fields)
                w.writeheader()
                w.writerows(keep)
    (run.run_dir / "history.json").write_text(json.dumps(run.history, indent=1))


def build_training_task(cfg: Config, device: torch.device, rank: int,
                        world: int) -> tuple[Task, list[str]]:  # fmt: skip
    """The task on ``device`` with its data set up for this rank, the model initialised
    (``init_from``), frozen (``freeze``) and wrapped (channels_last, DDP, torch.compile).
    Returns the task and the frozen parameter names."""
    tc = cfg.train
    task = build_task(cfg).to(device)
    if tc.init_from:
        missing, unexpected = load_weights(
            task.model, load_checkpoint(tc.init_from, require=("model",))["model"], False
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
    if not path.is_file():
        raise MissingFileError(f"{path}: no checkpoint to resume from")
    payload = load_checkpoint(path, require=RESUME_KEYS)
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
    run.position = payload.get("position")
    set_rng_state(payload["rng"], run.task.generator)
    if run.rank:  # python/numpy/torch streams differ per rank, as in a fresh run
        seed_everything(run.cfg.train.seed + run.rank + 1_000_003 * run.epoch)
