"""One trainer for every task (:mod:`tensorpose.tasks`): a loop, readable top to bottom.

:func:`train` = :func:`~tensorpose.train.run.setup` (processes, seeds, run folder, task + data,
model wrappers, optimiser, schedule, scaler, resumed state: one
:class:`~tensorpose.train.run.Run`), then per epoch :func:`train_epoch` and :func:`end_epoch`,
then :func:`finish`.

A step (:func:`train_step`): batches come through the
:class:`~tensorpose.train.profiler.DevicePrefetcher`; ``task.prepare`` (on-device
augmentation/targets), ``task(batch)`` (forward + loss), backward, clip, optimiser and schedule
steps, each timed by the :class:`~tensorpose.train.profiler.StepProfiler`. Losses are summed on
the device and read only every ``train.log_every`` steps (progress bar, ``steps.csv``, NaN
check). After an epoch: validation (every ``val_every``), checkpoint (every ``ckpt_every``,
atomic, full state), ``best.pt`` by the task's metric. A non-finite loss stops the run with a
clear message and keeps the last good checkpoint; a failing DataLoader worker stops it with
``interrupted.pt``. At the end: the breakdown of step time and ``summary.json``.

Distributed (:mod:`tensorpose.train.distributed`): under ``torchrun`` every process trains a
shard of each global batch with DistributedDataParallel; rank 0 validates, logs and writes
checkpoints; train losses are averaged over ranks at log intervals.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..config import Config
from ..tasks import unwrap
from .distributed import barrier, reduce_mean
from .interrupt import Interrupted, SignalCatcher
from .profiler import DevicePrefetcher
from .run import Run, setup
from .state_dict import export_safetensors
from .utils import RunningMean

__all__ = ["TrainingStopped", "train"]


class TrainingStopped(RuntimeError):
    """The run stopped early (non-finite loss, failing data); the message says why and which
    checkpoint is the last good one."""


# ---------------------------------------------------------------------- the loop
def train(
    cfg: Config,
    run_dir: str | Path | None = None,
    progress: bool = True,
    resume: bool = False,
    profile: bool = False,
) -> dict[str, Any]:
    """Train ``cfg.task``; write config, logs, checkpoints and ``summary.json`` to ``run_dir``
    (default ``train.out_dir/train.name``, or the task's run name).

    Args:
        resume: continue the run in ``run_dir`` from its ``checkpoint.pt`` (the config must
            match the stored one except for ``train`` keys in
            :data:`~tensorpose.train.run.RESUMABLE`).
        profile: write a torch.profiler Chrome trace of a few steps to ``run_dir/trace.json``.

    Returns:
        dict with ``history`` (per-epoch rows), ``val`` (last validation metrics),
        ``evaluation`` (the final epoch's validation as :func:`tensorpose.inference.evaluate`
        reports it, with the task's ``eval_info``; ``None`` when no epoch ran here),
        ``run_dir``, ``checkpoint``, ``best``, ``profile`` (step-time breakdown),
        ``seconds``, ``steps``, ``stopped`` (``None`` or the reason).

    Raises:
        TrainingStopped: non-finite loss or failing data (the message names the checkpoint).
    """
    run = setup(cfg, run_dir, resume, profile)
    try:
        with SignalCatcher() as signals:
            run.signals = signals
            for epoch in range(run.epoch, cfg.train.epochs):
                if run.out_of_steps():
                    break
                row = train_epoch(run, epoch, progress)
                if row is None:  # stopped
                    break
                end_epoch(run, epoch, row, progress)
            return finish(run, progress)
    finally:
        if run.log is not None:
            run.log.close()
        if run.lock is not None:
            run.lock.release()


def train_epoch(run: Run, epoch: int, progress: bool) -> dict | None:
    """One pass over this rank's batches; the epoch's history row (train means, throughput,
    learning rate), or ``None`` when the run stopped (``run.stopped`` says why)."""
    from tqdm import tqdm

    task, tc = run.task, run.cfg.train
    task.train()
    if hasattr(task.train_batches, "set_epoch"):
        task.train_batches.set_epoch(epoch)
    steps = len(task.train_batches)
    meter = EpochMeter()
    start, epoch_rng = 0, None
    if task.generator is not None:
        epoch_rng = task.generator.get_state()
    pos, run.position = run.position, None
    if pos is not None and pos["epoch"] == epoch:  # resuming mid-epoch: replay the order
        start, epoch_rng = int(pos["batch"]), pos["epoch_rng"]
        meter.restore(pos["meter"], run.device)
    bar = tqdm(total=steps, initial=start, desc=f"epoch {epoch + 1}/{tc.epochs}",
               disable=not (progress and run.main), leave=False)  # fmt: skip
    batches = iter(DevicePrefetcher(epoch_batches(run, start, epoch_rng), run.device, run.prof))
    for i in range(start, steps):
        batch = next_batch(run, batches, epoch, i)
        out, n = train_step(run, batch)
        meter.update(out, n)
        if run.signals is not None:
            run.signals.after_step(run.step)
        last = i + 1 == steps or run.out_of_steps()
        log = run.step % tc.log_every == 0 or last or run.step == 1
        if log:  # the only host reads
            run.prof.flush()
            loss, rate = meter.read_interval(run.world, run.device)
            bar.update(i + 1 - bar.n)
            bar.set_postfix(loss=f"{loss:.4g}", samples_s=f"{rate:.0f}")
            if run.main:
                lr = run.opt.param_groups[0]["lr"]
                run.log.step({"step": run.step, "epoch": epoch + 1, "loss": loss, "lr": lr,
                              "samples_per_s": rate})  # fmt: skip
            if run.step == 1:
                run.first_loss = loss
            if not math.isfinite(loss):
                run.stopped = f"loss is {loss} at epoch {epoch + 1}, step {run.step}"
                break
        signum = run.signals.agreed(run.world, log, run.device) if run.signals else None
        if signum is not None:
            bar.close()
            interrupt(run, epoch, i + 1, epoch_rng, meter, signum)
        if last:
            break
    bar.close()
    run.t_train += time.perf_counter() - meter.t0
    if run.stopped:
        return None
    means = meter.means(run.world, run.device)
    if not math.isfinite(means["loss"]):
        run.stopped = f"loss is {means['loss']} in epoch {epoch + 1}"
        return None
    row = {"epoch": epoch + 1, **{f"train_{k}": v for k, v in means.items()}}
    row["samples_per_s"] = run.world * meter.seen / max(time.perf_counter() - meter.t0, 1e-9)
    row["lr"] = run.opt.param_groups[0]["lr"]
    return row


def epoch_batches(run: Run, start: int, epoch_rng: torch.Tensor | None):
    """This epoch's batches from batch ``start`` on. Resuming mid-epoch, the task generator is
    set back to its state at the epoch start so the same order is drawn, the first ``start``
    batches are skipped (``skip(n)`` of the batches when they have one, else read and
    dropped), and then the generator continues from where the interrupted run stopped."""
    source = run.task.train_batches
    if start == 0:
        return source
    gen = run.task.generator
    now = gen.get_state() if gen is not None else None
    if gen is not None and epoch_rng is not None:
        gen.set_state(epoch_rng)
    if hasattr(source, "skip"):
        it = source.skip(start)
    else:
        it = iter(source)
        for _ in range(start):
            next(it)
    if gen is not None:
        gen.set_state(now)
    return it


def interrupt(run: Run, epoch: int, done: int, epoch_rng: torch.Tensor | None,
              meter: EpochMeter, signum: int) -> None:  # fmt: skip
    """Write the mid-epoch checkpoint (``done`` batches of ``epoch`` trained) and raise
    :class:`~tensorpose.train.interrupt.Interrupted` (for signal ``signum``) with the way to
    resume."""
    import signal

    if run.main:
        position = {"epoch": epoch, "batch": done, "meter": meter.state()}
        if epoch_rng is not None:
            position["epoch_rng"] = epoch_rng
        run.save(run.ckpt_path, epoch, position)
    barrier(run.world)
    name = signal.Signals(signum).name
    raise Interrupted(
        f"{name} received: stopped after step {run.step} (epoch {epoch + 1}, batch {done}); "
        f"state saved to {run.ckpt_path}; continue with `tensorpose train --resume "
        f"{run.run_dir}`",
        signum,
    )


def next_batch(run: Run, batches, epoch: int, i: int) -> Any:
    """The next batch; a failing sample or worker stops the run with ``interrupted.pt``.
    Samples skipped as unreadable are reported and logged to ``errors.log``, never silently."""
    try:
        batch = next(batches)
    except Exception as e:
        run.stopped = f"data error at epoch {epoch + 1}, step {i + 1}: {e}"
        if run.main:
            run.save(run.run_dir / "interrupted.pt", epoch)
        last = run.ckpt_path if run.ckpt_path.exists() else "none yet"
        raise TrainingStopped(
            f"{run.stopped}\nstate saved to {run.run_dir / 'interrupted.pt'}; last complete "
            f"checkpoint: {last}"
        ) from e
    errors = batch.get("errors") if isinstance(batch, dict) else None
    if errors and run.main:
        new = []
        for m in errors:  # "sample i (annotation a): <file>: <reason>": once per file
            what = m.split("): ", 1)[-1]
            if what not in run.skipped:
                run.skipped.add(what)
                new.append(what)
        if new:
            from tqdm import tqdm

            for what in new:
                tqdm.write(f"skipped (dropped from training, data.on_error=skip): {what}")
            with (run.run_dir / "errors.log").open("a") as f:
                f.write("".join(f"epoch {epoch + 1}: skipped {what}\n" for what in new))
    return batch


def train_step(run: Run, batch: Any) -> tuple[dict[str, torch.Tensor], int]:
    """Prepare, forward, backward, optimiser and schedule steps, each a profiler phase.
    Returns the task's outputs (on the device) and the number of samples."""
    task, prof, tc = run.task, run.prof, run.cfg.train
    with prof.phase("prepare"):
        batch = task.prepare(batch)
    n = task.count(batch)
    autocast = torch.autocast(run.device.type, run.amp_dtype, enabled=run.amp_dtype is not None)
    with prof.phase("forward"), autocast:
        out = task(batch)
    with prof.phase("backward"):
        run.scaler.scale(out["loss"]).backward()
    with prof.phase("optimizer"):
        if tc.grad_clip > 0:
            run.scaler.unscale_(run.opt)
            nn.utils.clip_grad_norm_(task.parameters(), tc.grad_clip)
        run.scaler.step(run.opt)
        run.scaler.update()
        run.opt.zero_grad(set_to_none=True)
        run.sched.step()
    prof.step_done()
    if run.tracer is not None:
        run.tracer.step()
    run.step += 1
    return out, n


class EpochMeter:
    """An epoch's losses summed on the device (:class:`~tensorpose.train.utils.RunningMean`), read
    back only at log intervals and at the end of the epoch."""

    def __init__(self) -> None:
        self.t0 = self.t_log = time.perf_counter()
        self.seen = self.seen_log = 0
        self.interval = RunningMean()
        self.sums: dict[str, RunningMean] = {}

    def update(self, out: dict[str, torch.Tensor], n: int) -> None:
        """Add a step's loss and 0-dim extras (weighted by ``n`` samples): no host sync."""
        self.seen += n
        self.interval.update(out["loss"], n)
        for k, v in out.items():
            if k != "pred" and torch.is_tensor(v) and v.dim() == 0:
                self.sums.setdefault(k, RunningMean()).update(v, n)

    def state(self) -> dict:
        """The sums so far (tensors on the CPU, counts as floats) for a mid-epoch checkpoint."""

        def one(m: RunningMean) -> dict:
            total = m.total.detach().cpu() if torch.is_tensor(m.total) else torch.tensor(m.total)
            count = float(m.count) if not torch.is_tensor(m.count) else float(m.count.item())
            return {"total": total, "count": count}

        return {"seen": self.seen, "interval": one(self.interval),
                "sums": {k: one(m) for k, m in self.sums.items()}}  # fmt: skip

    def restore(self, state: dict, device: torch.device) -> None:
        """Continue from :meth:`state`."""

        def one(d: dict) -> RunningMean:
            m = RunningMean()
            m.total, m.count = d["total"].to(device), d["count"]
            return m

        self.seen = self.seen_log = int(state["seen"])
        self.interval = one(state["interval"])
        self.sums = {k: one(v) for k, v in state["sums"].items()}

    def read_interval(self, world: int, device: torch.device) -> tuple[float, float]:
        """The mean loss since the last read (over ranks) and the samples/s (all ranks)."""
        (loss,) = reduce_mean([self.interval.compute()], world, device)
        now = time.perf_counter()
        rate = world * (self.seen - self.seen_log) / max(now - self.t_log, 1e-9)
        self.t_log, self.seen_log = now, self.seen
        self.interval.reset()
        return loss, rate

    def means(self, world: int, device: torch.device) -> dict[str, float]:
        """The epoch's means of the loss and extras, averaged over ranks."""
        keys = sorted(self.sums)
        values = reduce_mean([self.sums[k].compute() for k in keys], world, device)
        return dict(zip(keys, values, strict=True))


def end_epoch(run: Run, epoch: int, row: dict, progress: bool) -> None:
    """Validation (rank 0, every ``val_every`` epochs and at the end), the history row, logs,
    ``checkpoint.pt`` (every ``ckpt_every``) and ``best.pt``; then all ranks meet."""
    tc = run.cfg.train
    final = epoch + 1 == tc.epochs or run.out_of_steps()
    if run.main and ((epoch + 1) % tc.val_every == 0 or final):
        run.val = run.task.evaluate()
        row.update({f"val_{k}": v for k, v in run.val.items()})
        if final:  # the run's evaluation: what tensorpose.inference.evaluate reports
            run.final_val = {"task": run.cfg.task, **run.val, **run.task.eval_info()}
    run.history.append(row)
    if run.main:
        if progress:
            from tqdm import tqdm

            tqdm.write(epoch_line(row))
        run.log.epoch(row, run.history)
        value = row.get(run.metric)
        improved = value is not None and (
            not run.best
            or (value < run.best["value"] if run.mode == "min" else value > run.best["value"])
        )
        if improved:
            run.best = {"metric": run.metric, "mode": run.mode, "value": value,
                        "epoch": epoch + 1}  # fmt: skip
        if (epoch + 1) % tc.ckpt_every == 0 or final:
            run.save(run.ckpt_path, epoch + 1)
        if improved:
            run.save(run.run_dir / "best.pt", epoch + 1)
    barrier(run.world)


def epoch_line(row: dict) -> str:
    """One printed line per epoch: train loss, validation floats, throughput."""
    parts = [f"epoch {row['epoch']:3d}", f"train loss {row['train_loss']:.4g}"]
    for k, v in row.items():
        if k.startswith("val_") and isinstance(v, float) and k != "val_frames":
            parts.append(f"{k[4:]} {v:.4g}")
    parts.append(f"{row['samples_per_s']:.0f} samples/s")
    return "  ".join(parts)


def finish(run: Run, progress: bool) -> dict[str, Any]:
    """The step-time breakdown, ``summary.json``, ``weights.safetensors``; raises
    :class:`TrainingStopped` for a stopped run."""
    if run.tracer is not None:
        run.tracer.stop()
    breakdown = run.prof.summary(run.t_train)
    history, first = run.history, run.first_loss
    summary = {
        "task": run.cfg.task,
        "epochs": len(history),
        "steps": run.step,
        "seconds": time.perf_counter() - run.t_start,
        "world_size": run.world,
        "device": str(run.device),
        "stopped": run.stopped,
        "best": run.best,
        "first_loss": first,
        "loss_drop": first / history[-1]["train_loss"] if history and first else None,
        "final": history[-1] if history else {},
        "profile": breakdown,
        "frozen": run.frozen,
        "pictures": [str(p) for p in run.pictures],
    }
    if run.main:
        if not run.stopped and run.ckpt_path.exists():
            try:
                path = export_safetensors(run.run_dir / "weights.safetensors",
                                          unwrap(run.task.model))  # fmt: skip
                summary["safetensors"] = str(path)
            except ImportError:  # optional package
                pass
        if progress:
            print(run.prof.table(breakdown))
        run.log.summary(summary)
    if run.stopped:
        last_good = run.ckpt_path if run.ckpt_path.exists() else None
        raise TrainingStopped(
            f"{run.stopped}: stopping. The last good checkpoint is "
            f"{last_good or 'none (no epoch completed)'}; lower train.lr, set train.grad_clip, "
            "or check the data."
        )
    return {**summary, "history": history, "val": run.val, "run_dir": run.run_dir,
            "checkpoint": run.ckpt_path, "evaluation": run.final_val}  # fmt: skip
