"""The trainer: exact resume, faults (NaN loss, corrupt/missing/mismatched checkpoints, SIGKILL
during a checkpoint write, failing data), freezing and prefixes, and DDP with 2 gloo processes
equal to 1 process. Tiny models: seconds on 2 CPU cores."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch import nn

from tensorpose.config import config_to_dict, load_config
from tensorpose.io.coco import bundled_coco
from tensorpose.tasks import build_model, unwrap
from tensorpose.tasks.lifting import LiftingTask
from tensorpose.train.checkpoint import (
    CheckpointError,
    load_checkpoint,
    load_weights,
    save_checkpoint,
)
from tensorpose.train.profiler import verdict
from tensorpose.train.state_dict import clean_state_dict, freeze
from tensorpose.train.trainer import TrainingStopped, train

ROOT = Path(__file__).resolve().parents[2]
TINY_LIFT = [
    "train.batch_size=64",
    "model.channels=16",
    "model.receptive_field=9",
    "data.fps=10",
    "data.train_cameras=1",
    "data.val_cameras=1",
    "train.device=cpu",
    "train.log_every=2",
    "train.tensorboard=false",
]


def lift_cfg(*extra):
    return load_config(ROOT / "configs" / "lift_cmu.yaml", [*TINY_LIFT, *extra])


def weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(run_dir / "checkpoint.pt")["model"]


def test_resume_gives_the_same_losses_and_weights(tmp_path):
    full = train(lift_cfg("train.epochs=2"), tmp_path / "full", progress=False)
    part = tmp_path / "part"
    train(lift_cfg("train.epochs=1"), part, progress=False)
    resumed = train(lift_cfg("train.epochs=2"), part, progress=False, resume=True)
    assert [h["train_loss"] for h in resumed["history"]] == [
        h["train_loss"] for h in full["history"]
    ]
    a, b = weights(tmp_path / "full"), weights(part)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    def losses(run):  # step, epoch, loss, lr of every log interval
        return [r.split(",")[:4] for r in (run / "steps.csv").read_text().splitlines()]

    assert losses(tmp_path / "full") == losses(part)
    summary = json.loads((part / "summary.json").read_text())
    assert set(summary["profile"]["share"]) == {
        "data", "h2d", "prepare", "forward", "backward", "optimizer"
    }  # fmt: skip
    assert (part / "best.pt").exists() and (part / "history.csv").exists()


def test_resume_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="checkpoint.pt"):
        train(lift_cfg("train.epochs=1"), tmp_path / "nothing", progress=False, resume=True)
    run = tmp_path / "run"
    train(lift_cfg("train.epochs=1"), run, progress=False)
    with pytest.raises(
        CheckpointError, match=r"another config: model\.channels: checkpoint has 16"
    ):
        train(lift_cfg("train.epochs=2", "model.channels=32"), run, progress=False, resume=True)
    data = (run / "checkpoint.pt").read_bytes()
    (run / "checkpoint.pt").write_bytes(data[: len(data) // 2])  # truncated
    with pytest.raises(CheckpointError, match=r"checkpoint.pt: not a readable"):
        train(lift_cfg("train.epochs=2"), run, progress=False, resume=True)


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    per_epoch = train(lift_cfg("train.epochs=1"), tmp_path / "probe", progress=False)["steps"]
    calls = {"n": 0}
    forward = LiftingTask.forward

    def poisoned(self, batch):
        out = forward(self, batch)
        calls["n"] += 1
        if calls["n"] > per_epoch:  # from the first step of epoch 2
            out["loss"] = out["loss"] * float("nan")
        return out

    monkeypatch.setattr(LiftingTask, "forward", poisoned)
    with pytest.raises(
        TrainingStopped, match=r"loss is nan.*last good checkpoint is .*checkpoint\.pt"
    ):
        train(lift_cfg("train.epochs=3"), tmp_path / "run", progress=False)
    payload = load_checkpoint(tmp_path / "run" / "checkpoint.pt")
    assert payload["epoch"] == 1
    assert all(torch.isfinite(v).all() for v in payload["model"].values() if v.is_floating_point())


CHILD = r"""
import sys, time, torch
from tensorpose.train.checkpoint import save_checkpoint
path = sys.argv[1]
model = torch.nn.Linear(4, 4)
save_checkpoint(path, model, {"good": 1})
real_save = torch.save
def slow_save(obj, f):  # write part of the file, then hang: the parent kills us here
    f.write(b"x" * 4096); f.flush()
    print("writing", flush=True)
    time.sleep(60)
torch.save = slow_save
save_checkpoint(path, torch.nn.Linear(4, 4), {"good": 2})
"""


def test_sigkill_during_a_checkpoint_write_keeps_the_previous_one(tmp_path):
    path = tmp_path / "checkpoint.pt"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE,
                            env=env, text=True)  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "writing"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert load_checkpoint(path)["config"] == {"good": 1}  # the last good one
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "checkpoint.pt"]
    assert all(n.startswith(".checkpoint.pt.") and n.endswith(".tmp") for n in leftovers)


def test_prefixes_never_reach_files_and_are_accepted(tmp_path):
    cfg = lift_cfg()
    model = build_model(cfg)

    class Wrapped(nn.Module):  # what DDP / torch.compile look like from outside
        def __init__(self, m):
            super().__init__()
            self.module = m

    wrapped = Wrapped(Wrapped(model))
    assert all(k.startswith("module.module.") for k in wrapped.state_dict())
    state = clean_state_dict(wrapped.state_dict())
    assert state.keys() == model.state_dict().keys()
    path = save_checkpoint(tmp_path / "c.pt", wrapped, config_to_dict(cfg))
    assert not any(k.startswith("module.") for k in load_checkpoint(path)["model"])
    old = {f"_orig_mod.module.{k}": v for k, v in model.state_dict().items()}
    fresh = build_model(cfg)
    assert load_weights(fresh, old) == ([], [])
    missing, unexpected = load_weights(fresh, {**old, "extra.weight": torch.ones(1)}, strict=False)
    assert unexpected == ["extra.weight"] and missing == []
    with pytest.raises(CheckpointError, match="missing"):
        load_weights(fresh, {k: v for k, v in list(old.items())[1:]})


def test_freeze_by_name_with_and_without_wrappers():
    cfg = lift_cfg()
    plain, wrapped = build_model(cfg), nn.Module()
    wrapped.module = build_model(cfg)
    a = freeze(plain, ["expand_conv.*"])
    b = freeze(wrapped, ["expand_conv.*"])
    assert a == b == ["expand_conv.weight"]
    assert not wrapped.module.expand_conv.weight.requires_grad
    with pytest.raises(ValueError, match="matches no parameter"):
        freeze(plain, ["nope.*"])


def test_unwrap():
    m = nn.Linear(2, 2)
    assert unwrap(m) is m


def test_verdict_says_when_starved():
    starved = {"data": 0.62, "h2d": 0.0, "prepare": 0.05, "forward": 0.1, "backward": 0.2,
               "optimizer": 0.03}  # fmt: skip
    assert verdict(starved).startswith("data wait is 62% of step time: ")
    assert "raise data.workers" in verdict(starved).lower()
    assert verdict({**starved, "data": 0.01}).startswith("compute-bound")


def coco_copy(tmp_path: Path, corrupt: int | None = None) -> Path:
    src = bundled_coco()
    root = tmp_path / "coco"
    shutil.copytree(src.parent / "images", root / "images")
    shutil.copy(src, root / "person_keypoints.json")
    if corrupt is not None:
        data = json.loads(src.read_text())
        name = data["images"][corrupt]["file_name"]
        (root / "images" / name).write_bytes(b"not a jpeg")
    return root / "person_keypoints.json"


TINY_2D = [
    "task=heatmap",
    "model.depth=10",
    "model.width=8",
    "data.input_size=[64, 64]",
    "train.batch_size=4",
    "train.device=cpu",
    "train.tensorboard=false",
    "train.epochs=1",
]


def test_failing_data_worker_stops_cleanly_with_sample_id(tmp_path):
    ann = coco_copy(tmp_path, corrupt=0)
    cfg = load_config(None, [*TINY_2D, f"data.annotations={ann}", "data.on_error=raise",
                             "data.workers=1", "data.cache_images=false"])  # fmt: skip
    with pytest.raises(TrainingStopped, match=r"sample \d+ \(annotation \d+, image .*jpg\)"):
        train(cfg, tmp_path / "run", progress=False)
    assert load_checkpoint(tmp_path / "run" / "interrupted.pt")["epoch"] == 0


def test_skipped_samples_are_logged(tmp_path):
    ann = coco_copy(tmp_path, corrupt=0)
    cfg = load_config(None, [*TINY_2D, f"data.annotations={ann}", "data.people=8"])
    with pytest.warns(UserWarning, match="skipped"):
        out = train(cfg, tmp_path / "run", progress=False)
    log = (tmp_path / "run" / "errors.log").read_text().splitlines()
    bad = json.loads(ann.read_text())["images"][0]["file_name"]  # what coco_copy corrupted
    assert len(log) == 1 and "cannot decode" in log[0] and bad in log[0]  # once per file
    assert (tmp_path / "run" / "augment.png").exists()
    assert {"pck", "epe_px", "oks"} <= set(out["val"])


DDP = [
    "task=deeppose",
    "model.fc_width=32",
    "model.dropout=0",
    "data.input_size=[227, 227]",
    "data.people=8",
    "data.scale=0",
    "data.rotation=0",
    "data.flip_prob=0",
    "data.brightness=0",
    "data.contrast=0",
    "data.saturation=0",
    "data.hue=0",
    "data.noise=0",
    "data.shadow_prob=0",
    "train.batch_size=4",
    "train.max_steps=3",
    "train.epochs=2",
    "train.lr=1e-4",
    "train.optimizer=sgd",
    "train.threads=1",
    "train.device=cpu",
    "train.log_every=1",
    "train.tensorboard=false",
]


def _torchrun(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
         "--master_port", str(29500 + (os.getpid() + len(args)) % 1000), "-m", "tensorpose",
         "train", *args, "--quiet"],
        env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip


def test_ddp_two_gloo_processes_equal_one_process(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    base = [f"train.out_dir={tmp_path}", *DDP]
    t0 = time.perf_counter()
    run = _torchrun(env, *base, "train.name=ddp")
    assert run.returncode == 0, run.stderr[-3000:]
    single = subprocess.run(
        [sys.executable, "-m", "tensorpose", "train", *base, "train.name=one", "--quiet"],
        env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert single.returncode == 0, single.stderr[-3000:]
    a, b = weights(tmp_path / "ddp"), weights(tmp_path / "one")
    diff = max(float((a[k] - b[k]).abs().max()) for k in a)
    scale = max(float(b[k].abs().max()) for k in b)
    assert diff <= 1e-5 * scale, (diff, scale)
    sa = json.loads((tmp_path / "ddp" / "summary.json").read_text())
    assert sa["world_size"] == 2 and sa["steps"] == 3
    print(f"DDP vs 1 process: max weight difference {diff:.2e} ({time.perf_counter() - t0:.0f} s)")


def test_ddp_signal_on_one_rank_stops_every_rank_after_the_same_step(tmp_path):
    from tensorpose.train.interrupt import SIGNAL_AFTER_STEP_ENV

    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    keep = [o for o in DDP if not o.startswith(("train.max_steps", "train.epochs", "train.log"))]
    base = [f"train.out_dir={tmp_path}", *keep, "train.batch_size=2", "train.epochs=1",
            "train.log_every=3"]  # fmt: skip
    ref = _torchrun(env, *base, "train.name=ref")
    assert ref.returncode == 0, ref.stderr[-3000:]
    # only rank 1 is signalled, after step 2: both ranks stop after log step 3 (no hang)
    cut = _torchrun({**env, SIGNAL_AFTER_STEP_ENV: "INT:2@1"}, *base, "train.name=cut")
    assert cut.returncode != 0 and "SIGINT received: stopped after step 3" in cut.stderr
    ck = load_checkpoint(tmp_path / "cut" / "checkpoint.pt")
    assert ck["position"]["batch"] == 3
    done = _torchrun(env, "--resume", str(tmp_path / "cut"))
    assert done.returncode == 0, done.stderr[-3000:]
    a, b = weights(tmp_path / "cut"), weights(tmp_path / "ref")
    assert all(torch.equal(a[k], b[k]) for k in b)
