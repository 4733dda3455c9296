"""Runs that are interrupted, killed or pointed at someone else's folder: SIGINT/SIGTERM
mid-epoch then ``--resume`` equals the uninterrupted run bit for bit; after a kill the run
folder is repaired from the checkpoint; locks; fresh runs never touch existing folders; a
diverging kinematic head stops cleanly; same seed and threads = same numbers. Tiny lifting
runs (3 steps per epoch): seconds each."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tensorpose.apps.demo import demo
from tensorpose.cli import main
from tensorpose.config import load_config
from tensorpose.io.atomic import LOCK_NAME, FolderInUseError, FolderLock
from tensorpose.tasks import unwrap
from tensorpose.tasks.lifting import LiftingTask
from tensorpose.train.checkpoint import load_checkpoint
from tensorpose.train.interrupt import SIGNAL_AFTER_STEP_ENV
from tensorpose.train.trainer import train

ROOT = Path(__file__).resolve().parents[2]
TINY = ["train.batch_size=64", "model.channels=16", "model.receptive_field=9", "data.fps=10",
        "data.train_cameras=1", "data.val_cameras=1", "train.device=cpu", "train.log_every=1",
        "train.tensorboard=false", "train.threads=1", "train.epochs=2"]  # fmt: skip


@pytest.fixture(autouse=True)
def _keep_threads():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def cfg(*extra: str):
    return load_config(ROOT / "configs" / "lift_cmu.yaml", [*TINY, *extra])


def weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(run_dir / "checkpoint.pt")["model"]


def same_weights(a: Path, b: Path) -> bool:
    wa, wb = weights(a), weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def logged(run_dir: Path) -> list[list[str]]:
    """step, epoch, loss, lr of every row of steps.csv (throughput differs run to run)."""
    with (run_dir / "steps.csv").open() as f:
        return [[r["step"], r["epoch"], r["loss"], r["lr"]] for r in csv.DictReader(f)]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The uninterrupted 2-epoch run (6 steps)."""
    run_dir = tmp_path_factory.mktemp("ref") / "full"
    out = train(cfg(), run_dir, progress=False)
    assert out["steps"] == 6
    return run_dir


def test_sigint_mid_epoch_then_resume_equals_the_uninterrupted_run(
    tmp_path, reference, capsys, monkeypatch
):
    args = ["train", str(ROOT / "configs" / "lift_cmu.yaml"), *TINY,
            f"train.out_dir={tmp_path}", "train.name=run", "--quiet"]  # fmt: skip
    monkeypatch.setenv(SIGNAL_AFTER_STEP_ENV, "INT:2")  # epoch 1, batch 2 of 3
    assert main(args) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"tensorpose train --resume {tmp_path / 'run'}" in err[0]
    stopped = load_checkpoint(tmp_path / "run" / "checkpoint.pt")
    assert (stopped["step"], stopped["epoch"], stopped["position"]["batch"]) == (2, 0, 2)
    assert not (tmp_path / "run" / LOCK_NAME).exists()
    monkeypatch.delenv(SIGNAL_AFTER_STEP_ENV)
    assert main(["train", "--resume", str(tmp_path / "run"), "--quiet"]) == 0
    assert same_weights(reference, tmp_path / "run")
    assert logged(reference) == logged(tmp_path / "run")
    ref_hist = json.loads((reference / "history.json").read_text())
    hist = json.loads((tmp_path / "run" / "history.json").read_text())
    assert [h["train_loss"] for h in hist] == [h["train_loss"] for h in ref_hist]


def test_sigterm_in_a_subprocess_then_resume(tmp_path, reference):
    env = {**os.environ, "PYTHONPATH": str(ROOT), SIGNAL_AFTER_STEP_ENV: "TERM:4"}
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "tensorpose", "train", str(ROOT / "configs" / "lift_cmu.yaml"),
         *TINY, f"train.out_dir={tmp_path}", "train.name=run", "--quiet"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 128 + signal.SIGTERM == 143, proc.stderr
    assert "SIGTERM received" in proc.stderr and "Traceback" not in proc.stderr
    assert load_checkpoint(run_dir / "checkpoint.pt")["position"]["epoch"] == 1
    train(cfg(), run_dir, progress=False, resume=True)
    assert same_weights(reference, run_dir)
    assert logged(reference) == logged(run_dir)


def test_after_a_kill_the_folder_is_repaired_from_the_checkpoint(tmp_path, reference):
    run_dir = tmp_path / "run"
    train(cfg("train.epochs=1"), run_dir, progress=False)
    # what a SIGKILL in epoch 2 leaves: best.pt not yet (re)written, steps of the lost epoch
    # logged, a checkpoint temp file, the lock of the dead process
    (run_dir / "best.pt").unlink()
    with (run_dir / "steps.csv").open("a") as f:
        f.write("4,2,0.5,0.0009,100.0\n5,2,0.4,0.0009,100.0\n")
    tmp = run_dir / ".checkpoint.pt.abcd1234.tmp"
    tmp.write_bytes(b"partial")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (run_dir / LOCK_NAME).write_text(f"{dead.pid} {os.uname().nodename}\n")
    train(cfg("train.epochs=1"), run_dir, progress=False, resume=True)  # repair only
    best = load_checkpoint(run_dir / "best.pt")
    assert best["best"] == load_checkpoint(run_dir / "checkpoint.pt")["best"]
    assert best["best"]["epoch"] == 1 and not tmp.exists()
    assert [r[0] for r in logged(run_dir)] == ["1", "2", "3"]
    train(cfg(), run_dir, progress=False, resume=True)
    assert logged(reference) == logged(run_dir) and same_weights(reference, run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    history = json.loads((run_dir / "history.json").read_text())
    assert summary["best"] == load_checkpoint(run_dir / "best.pt")["best"]
    assert [h["epoch"] for h in history] == [1, 2]


def test_locks(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    lock = FolderLock(run_dir).acquire()
    assert (run_dir / LOCK_NAME).read_text().split()[0] == str(os.getpid())
    with pytest.raises(FolderInUseError, match=rf"in use by process {os.getpid()}"):
        FolderLock(run_dir).acquire()
    with pytest.raises(FolderInUseError, match="in use by process"):  # a second training
        train(cfg(), run_dir, progress=False, resume=True)
    lock.release()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (run_dir / LOCK_NAME).write_text(f"{dead.pid} {os.uname().nodename}\n")
    FolderLock(run_dir).acquire().release()
    assert f"stale lock of process {dead.pid}" in capsys.readouterr().out
    assert not (run_dir / LOCK_NAME).exists()


def test_diverging_kinematic_head_stops_cleanly(tmp_path, capsys, monkeypatch):
    forward = LiftingTask.forward
    calls = {"n": 0}

    def diverge(self, batch):
        calls["n"] += 1
        if calls["n"] == 4:  # epoch 2: the bone lengths blow up
            with torch.no_grad():
                unwrap(self.model).lengths_out.bias.fill_(float("nan"))
        return forward(self, batch)

    monkeypatch.setattr(LiftingTask, "forward", diverge)
    code = main(["train", str(ROOT / "configs" / "lift_cmu.yaml"), *TINY,
                 f"train.out_dir={tmp_path}", "train.name=run", "--quiet"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 3 and "loss is nan" in err and "non-finite values" not in err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["stopped"].startswith("loss is nan")
    assert load_checkpoint(tmp_path / "run" / "checkpoint.pt")["epoch"] == 1


def test_same_seed_and_threads_give_identical_runs(tmp_path, reference):
    again = train(cfg(), tmp_path / "again", progress=False)
    assert same_weights(reference, tmp_path / "again")
    ref = json.loads((reference / "history.json").read_text())
    assert [h["train_loss"] for h in again["history"]] == [h["train_loss"] for h in ref]


def test_demo_twice_never_touches_the_first_run(tmp_path):
    small = [*TINY, "train.epochs=1"]
    said: list[str] = []
    first = demo(small, out=tmp_path, progress=False, say=said.append)
    before = {p.name: p.read_bytes() for p in first["run_dir"].iterdir() if p.is_file()}
    second = demo(small, out=tmp_path, progress=False, say=said.append)
    assert first["run_dir"].name == "demo_kinematic"
    assert second["run_dir"].name == "demo_kinematic_2"
    assert any("writing" in s and "demo_kinematic_2" in s for s in said)
    assert {p.name: p.read_bytes() for p in first["run_dir"].iterdir() if p.is_file()} == before
    assert second["metrics"]["mpjpe_mm"] == first["metrics"]["mpjpe_mm"]  # same numbers


def test_2d_sigint_mid_epoch_then_resume_equals_the_uninterrupted_run(tmp_path, monkeypatch):
    """The 2D loader replays the interrupted epoch (same shuffle and CPU augmentation, seeded by
    seed and epoch) and skips the batches already trained: the same weights bit for bit."""
    tiny = ["task=heatmap", "model.depth=10", "model.width=8", "data.input_size=[64, 64]",
            "data.people=6", "train.batch_size=2", "train.epochs=2", "data.backend=cpu",
            "train.device=cpu", "train.log_every=1", "train.tensorboard=false",
            "train.threads=1", f"train.out_dir={tmp_path}"]  # fmt: skip
    ref = train(load_config(None, [*tiny, "train.name=full"]), progress=False)["run_dir"]
    monkeypatch.setenv(SIGNAL_AFTER_STEP_ENV, "INT:4")  # epoch 2, batch 1 of 3
    assert main(["train", *tiny, "train.name=run", "--quiet"]) == 130
    assert load_checkpoint(tmp_path / "run" / "checkpoint.pt")["position"]["batch"] == 1
    monkeypatch.delenv(SIGNAL_AFTER_STEP_ENV)
    assert main(["train", "--resume", str(tmp_path / "run"), "--quiet"]) == 0
    assert same_weights(ref, tmp_path / "run")
    assert logged(ref) == logged(tmp_path / "run")
