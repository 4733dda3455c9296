"""Every registered task trains a step, evaluates and round-trips through a checkpoint on tiny
bundled data; a task defined here plugs in through the registry alone; the registry, the batch
contract and eval-mode prediction."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tensorpose.cli import main
from tensorpose.config import ConfigError, load_config
from tensorpose.inference import evaluate, load_model
from tensorpose.tasks import (
    Field,
    Task,
    UnknownTaskError,
    build_task,
    check_batch,
    eval_mode,
    get_task,
    register_task,
    registry,
    task_names,
)
from tensorpose.train.checkpoint import load_checkpoint
from tensorpose.train.trainer import train

COMMON = ["train.device=cpu", "train.tensorboard=false", "train.epochs=1", "train.max_steps=1"]
TINY = {
    "lift": ["model.channels=16", "model.receptive_field=9", "data.fps=10",
             "data.train_cameras=1", "data.val_cameras=1", "train.batch_size=32"],
    "deeppose": ["model.backbone=resnet10", "model.width=8", "data.input_size=[64, 64]",
                 "data.people=4", "train.batch_size=4"],
    "heatmap": ["model.depth=10", "model.width=8", "data.input_size=[64, 64]", "data.people=4",
                "train.batch_size=4"],
    "centernet": ["model.depth=10", "model.width=8", "data.input_size=[64, 64]",
                  "data.max_images=2",
                  "train.batch_size=2", "data.workers=0"],
}  # fmt: skip
BUILT_IN = task_names()


# ---------------------------------------------------------------------- every task
@pytest.mark.parametrize("name", BUILT_IN)
def test_every_task_trains_evaluates_and_round_trips(name, tmp_path):
    assert name in TINY, f"give task {name!r} tiny settings in TINY"
    cfg = load_config(None, [f"task={name}", *TINY[name], *COMMON])
    result = train(cfg, tmp_path / name, progress=False)
    assert result["steps"] == 1 and result["task"] == name
    assert torch.isfinite(torch.tensor(result["first_loss"]))
    metric = get_task(name).best_metric[0]
    assert metric in result["history"][0] and result["best"]["metric"] == metric

    ckpt = tmp_path / name / "checkpoint.pt"
    task, model, cfg2, _ = load_model(ckpt, "cpu")
    assert cfg2 == cfg and type(task) is get_task(name) and not model.training
    stored = load_checkpoint(ckpt)["model"]
    assert all(torch.equal(v, stored[k]) for k, v in model.state_dict().items())
    # the checkpoint evaluates to the numbers the trainer validated with
    again = evaluate(ckpt, "cpu")
    assert again["task"] == name
    assert {k: again[k] for k in result["val"]} == result["val"]
    with pytest.raises(ValueError, match=rf"task '{name}' takes the evaluation options .*'nope'"):
        evaluate(ckpt, "cpu", nope=1)


# ---------------------------------------------------------------------- the example task
@dataclass
class LinearData:
    samples: int = 64
    features: int = 3
    seed: int = 0


@dataclass
class LinearModel:
    bias: bool = True


class LinearTask(Task):
    """``y = x . (1, 2, 3) + 0.5`` on seeded random ``x``, fitted by a linear layer."""

    data_config, model_config = LinearData, LinearModel
    contract: ClassVar = {
        "x": Field(("B", "F"), torch.float32),
        "y": Field(("B", 1), torch.float32),
    }
    best_metric = ("val_mse", "min")

    @classmethod
    def build_model(cls, cfg):
        return nn.Linear(cfg.data.features, 1, bias=cfg.model.bias)

    def setup(self, device, rank=0, world=1):
        d, bs = self.cfg.data, self.cfg.train.batch_size
        x = torch.randn(d.samples, d.features, generator=torch.Generator().manual_seed(d.seed))
        y = x @ torch.arange(1.0, d.features + 1)[:, None] + 0.5
        self.train_batches = [
            {"x": x[i : i + bs], "y": y[i : i + bs]} for i in range(0, len(x), bs)
        ]
        self.val = (x.to(device), y.to(device))

    def forward(self, batch):
        pred = self.model(batch["x"])
        return {"loss": F.mse_loss(pred, batch["y"]), "pred": pred}

    @torch.no_grad()
    def evaluate(self, data=None):
        x, y = data or self.val
        with eval_mode(self.model):
            return {"mse": float(F.mse_loss(self.model(x), y))}


@pytest.fixture
def linear_task():
    register_task("linear", LinearTask)
    yield LinearTask
    registry.TASKS.pop("linear")


def test_example_task_plugs_in_through_the_registry(linear_task, tmp_path, capsys):
    args = ["task=linear", "train.epochs=20", "train.batch_size=16", "train.optimizer=sgd",
            "train.lr=0.1", "train.momentum=0", "train.lr_schedule=constant", "train.device=cpu",
            "train.tensorboard=false", f"train.out_dir={tmp_path}", "--quiet"]  # fmt: skip
    assert main(["train", *args]) == 0
    assert "mse" in capsys.readouterr().out
    run = tmp_path / "linear"  # the default run name is the task's
    model = load_model(run / "checkpoint.pt", "cpu")[1]
    torch.testing.assert_close(model.weight, torch.tensor([[1.0, 2.0, 3.0]]), atol=0.05, rtol=0)
    torch.testing.assert_close(model.bias, torch.tensor([0.5]), atol=0.05, rtol=0)
    history = json.loads((run / "history.json").read_text())
    assert history[-1]["val_mse"] < 1e-3 < history[0]["train_loss"]
    assert json.loads((run / "metrics.json").read_text())["mse"] == history[-1]["val_mse"]
    with pytest.raises(ConfigError, match="unknown config key 'data.sampels'.*task: linear"):
        load_config(None, ["task=linear", "data.sampels=3"])


def test_resume_of_the_example_task_is_exact(linear_task, tmp_path):
    def cfg(epochs):
        return load_config(None, ["task=linear", f"train.epochs={epochs}", "train.batch_size=16",
                                  "train.device=cpu", "train.tensorboard=false"])  # fmt: skip

    full = train(cfg(4), tmp_path / "full", progress=False)
    train(cfg(2), tmp_path / "part", progress=False)
    part = train(cfg(4), tmp_path / "part", progress=False, resume=True)
    assert [h["train_loss"] for h in part["history"]] == [h["train_loss"] for h in full["history"]]


# ---------------------------------------------------------------------- registry
def test_unknown_task_is_one_line_and_exit_2(capsys):
    with pytest.raises(
        UnknownTaskError, match=r"unknown task 'nope'; known tasks: centernet, deeppose, "
    ):
        get_task("nope")
    assert main(["train", "task=nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "tensorpose train: error: unknown task 'nope'; known tasks: " + ", ".join(
        BUILT_IN
    )


def test_register_task_checks_its_arguments(linear_task):
    register_task("linear", LinearTask)  # the same again: fine
    with pytest.raises(ValueError, match="already registered"):
        register_task("linear", "somewhere:Else")
    with pytest.raises(ValueError, match="identifier"):
        register_task("my task", LinearTask)
    with pytest.raises(ValueError, match="module:Class"):
        register_task("other", "no_colon")


def test_importing_the_config_is_light():
    code = (
        "import sys, tensorpose.config as c; c.load_config(None, ['task=heatmap']); "
        "print(sorted(m for m in ('cv2', 'tensorpose.augment.crops', 'tensorpose.train.trainer', "
        "'tensorpose.viz.draw') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------- contract, eval mode
def test_check_batch_names_key_and_expectation():
    contract = {"x": Field(("B", 3, "H"), torch.float32), "i": Field(("B",), torch.int64)}
    good = {"x": torch.zeros(2, 3, 5), "i": torch.zeros(2, dtype=torch.long), "extra": 1}
    assert check_batch(good, contract, H=5) is good
    with pytest.raises(ValueError, match=r"batch has no 'i'"):
        check_batch({"x": good["x"]}, contract)
    with pytest.raises(ValueError, match=r"batch\['x'\] must have shape \(B, 3, H\) with H=4"):
        check_batch(good, contract, H=4)
    with pytest.raises(ValueError, match=r"batch\['i'\] must have shape \(B,\) with B=2"):
        check_batch({**good, "i": torch.zeros(3, dtype=torch.long)}, contract)
    with pytest.raises(TypeError, match=r"batch\['i'\] must have dtype torch.int64"):
        check_batch({**good, "i": torch.zeros(2)}, contract)
    with pytest.raises(ValueError, match=r"batch\['x'\] must have shape \(B, 3, H\), got \(2, 3\)"):
        check_batch({**good, "x": torch.zeros(2, 3)}, contract)


@pytest.fixture(scope="module")
def lift_task():
    cfg = load_config(None, [*TINY["lift"], "model.dropout=0.5", "train.device=cpu"])
    task = build_task(cfg)
    return task, task.load_split(["131_03"], 1)


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_lifting_predict_runs_in_eval_mode_and_restores_the_model_mode(lift_task, mode):
    task, data = lift_task
    model = task.model
    model.train(mode == "train")
    bn = next(m for m in model.modules() if isinstance(m, nn.BatchNorm1d))
    before = bn.running_mean.clone()
    first = task.predict(data)  # the task Module itself is in train mode (fresh)
    assert model.training == (mode == "train") and task.training
    second = task.predict(data)
    assert torch.equal(bn.running_mean, before)  # statistics used, not updated
    for a, b in zip(first, second, strict=True):  # dropout off: deterministic
        assert torch.equal(a["pred"], b["pred"])


def test_eval_mode_restores_each_submodule():
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2), nn.Dropout(0.5))
    model[1].eval()  # a frozen BatchNorm inside a training model
    with eval_mode(model):
        assert not any(m.training for m in model.modules())
    assert [m.training for m in model.modules()] == [True, True, False, True]


def test_capabilities_match_what_the_commands_support():
    from tensorpose.models.onnx import DECODINGS
    from tensorpose.pose2d import KINDS
    from tensorpose.tasks import CAPABILITIES, require_capability, tasks_with

    for name in task_names():
        assert get_task(name).capabilities <= CAPABILITIES
    assert set(tasks_with("predict")) == set(KINDS)
    assert set(tasks_with("export")) == {"heatmap", "deeppose", "centernet"}
    assert {get_task(n).export_decoding for n in tasks_with("export")} <= set(DECODINGS)
    assert tasks_with("lift") == ["lift"]
    assert tasks_with("profile_data") == ["heatmap", "deeppose"]
    assert require_capability("heatmap", "profile_data", "x") is get_task("heatmap")
    with pytest.raises(ValueError, match=r"^x: lift needs a lift checkpoint, got 'heatmap'$"):
        require_capability("heatmap", "lift", "x: lift", "checkpoint")
    with pytest.raises(ValueError, match="capability must be one of"):
        require_capability("lift", "train", "x")
