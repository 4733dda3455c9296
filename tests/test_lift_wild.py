"""The lifting task's 2D normalisation (screen | intrinsics) and kinematic augmentation."""

from __future__ import annotations

import copy
import dataclasses
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tensorpose.config import ConfigError, config_to_dict, load_config
from tensorpose.data.synth import SynthConfig, SyntheticLiftingBatches
from tensorpose.inference import load_model
from tensorpose.ops.camera import normalize_screen
from tensorpose.tasks import build_task
from tensorpose.tasks.lifting import LiftingTask, LiftSynthConfig
from tensorpose.train.checkpoint import save_checkpoint
from tensorpose.train.trainer import train

ROOT = Path(__file__).resolve().parents[1]
TINY = ["model.channels=16", "model.receptive_field=9", "data.fps=10", "data.train_cameras=1",
        "data.val_cameras=1", "train.batch_size=32", "train.device=cpu"]  # fmt: skip
COMMON = ["train.tensorboard=false", "train.epochs=1", "train.max_steps=1"]


def naive_rays(pixels: np.ndarray, K: np.ndarray) -> np.ndarray:
    """K^-1 [u, v, 1], divided by its z, one point at a time."""
    out = np.zeros_like(pixels)
    Kinv = np.linalg.inv(K)
    for idx in np.ndindex(pixels.shape[:-1]):
        h = Kinv @ np.array([pixels[idx][0], pixels[idx][1], 1.0])
        out[idx] = h[:2] / h[2]
    return out


class NaiveSet:
    """A LiftingSet seen through the naive per-point normalisation."""

    def __init__(self, data, K: np.ndarray) -> None:
        self.data, self.K = data, K
        self.clips, self.skeleton, self.fps = data.clips, data.skeleton, data.fps

    def clip_groups(self):
        return self.data.clip_groups()

    def clip_arrays(self, i: int) -> dict[str, torch.Tensor]:
        c = self.data.clips[i]
        px = self.data.pixels[c.start : c.start + c.length].double().numpy()
        out = dict(self.data.clip_arrays(i))
        out["keypoints"] = torch.from_numpy(naive_rays(px, self.K)).float()
        return out


@pytest.fixture(scope="module")
def intrinsics_task():
    cfg = load_config(None, [*TINY, "data.normalization=intrinsics", "data.focal=900",
                             "data.width=1280", "data.height=720"])  # fmt: skip
    task = build_task(cfg)
    return task, task.load_split(["131_03"], 2)


def test_intrinsics_inputs_equal_a_naive_per_point_inverse(intrinsics_task):
    task, data = intrinsics_task
    K = task.cfg.data.camera_spec().K(torch.float64).numpy()
    px = data.pixels[:40].double().numpy()
    got = data.clip_arrays(0)["keypoints"][:40].double().numpy()
    np.testing.assert_allclose(got, naive_rays(px, K), atol=1e-6)
    # training windows: same normalisation (no flip), gathered around the frames
    frames = data.target_frames[:5]
    batch = data.batch(frames, 9)
    idx = data.window_indices(frames, 9).numpy()
    want = naive_rays(data.pixels.double().numpy()[idx], K)
    np.testing.assert_allclose(batch["keypoints"].double().numpy(), want, atol=1e-6)


def test_intrinsics_evaluation_equals_naive_normalisation(intrinsics_task):
    task, data = intrinsics_task
    K = task.cfg.data.camera_spec().K(torch.float64).numpy()
    got = task.evaluate(data)
    want = task.evaluate(NaiveSet(data, K))
    for key in ("mpjpe_mm", "p_mpjpe_mm", "n_mpjpe_mm", "mpjve_mm", "frames"):
        assert got[key] == pytest.approx(want[key], rel=1e-4, abs=1e-4), key


def test_screen_is_the_default_and_unchanged():
    cfg = load_config(None, TINY)
    assert cfg.data.normalization == "screen" and cfg.data.augment == "none"
    task = build_task(cfg)
    data = task.load_split(["131_03"], 1)
    assert data.intrinsics is None
    c = data.clips[0]
    want = normalize_screen(data.pixels[c.start : c.start + c.length], data.width, data.height)
    assert torch.equal(data.clip_arrays(0)["keypoints"], want)


def test_synth_section_mirrors_synth_config():
    section = {f.name for f in dataclasses.fields(LiftSynthConfig)}
    assert section == {f.name for f in dataclasses.fields(SynthConfig)} - {"normalize"}
    cfg = load_config(None, ["data.augment=kinematic", "data.normalization=intrinsics"])
    want = dataclasses.replace(SynthConfig(), normalize="intrinsics")
    assert cfg.data.synth.synth_config("intrinsics") == want


def test_synth_overrides_and_errors():
    cfg = load_config(None, ["data.synth.pitch_deg=45", "data.synth.speed=[0.5, 2]"])
    s = cfg.data.synth.synth_config("screen")
    assert s.pitch_deg == 45.0 and s.speed == (0.5, 2.0)
    with pytest.raises(ConfigError, match=r"data\.synth: speed"):
        load_config(None, ["data.augment=kinematic", "data.synth.speed=[2, 1]"])
    with pytest.raises(ConfigError, match="data.normalization must be one of"):
        load_config(None, ["data.normalization=pixels"])
    with pytest.raises(ConfigError, match="unknown config key"):
        load_config(None, ["data.synth.pitch=4"])


def test_lift_wild_recipe_loads():
    cfg = load_config(ROOT / "configs" / "lift_wild.yaml")
    assert cfg.data.augment == "kinematic" and cfg.data.normalization == "intrinsics"
    with open(ROOT / "configs" / "synth_lift.yaml") as f:
        import yaml

        recommended = yaml.safe_load(f)["synth"]
    got = config_to_dict(cfg)["data"]["synth"]
    differ = sorted(k for k in got if got[k] != recommended[k])
    assert differ == ["joint_scale", "pitch_deg", "roll_deg"]


def test_kinematic_task_trains_one_step_and_evaluates(tmp_path, monkeypatch):
    over = [*TINY, *COMMON, "data.augment=kinematic", "data.normalization=intrinsics",
            "data.steps_per_epoch=2", "data.synth.pitch_deg=45", "data.train=[131_03]",
            "data.val=[131_01]"]  # fmt: skip
    cfg = load_config(None, over)
    result = train(cfg, tmp_path / "run", progress=False)
    assert result["steps"] == 1 and np.isfinite(result["first_loss"])
    assert np.isfinite(result["history"][0]["val_mpjpe_mm"])
    task, _, cfg2, extra = load_model(tmp_path / "run" / "checkpoint.pt", "cpu")
    assert cfg2.data.normalization == "intrinsics" and cfg2.data.synth.pitch_deg == 45.0
    assert extra["mean_pose"].shape == (17, 3)
    m = task.evaluate(task.eval_data(torch.device("cpu")))
    assert np.isfinite(m["p_mpjpe_mm"]) and m["frames"] > 0
    # shipped with another default evaluation set: the same weights, data.val replaced
    out = tmp_path / "shipped.pt"
    argv = ["ship_checkpoint.py", str(tmp_path / "run" / "checkpoint.pt"), str(out), "--val",
            "131_03", "131_02"]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    runpy.run_path(str(ROOT / "scripts" / "ship_checkpoint.py"), run_name="__main__")
    _, shipped, cfg3, _ = load_model(out, "cpu")
    _, trained, _, _ = load_model(tmp_path / "run" / "checkpoint.pt", "cpu")
    assert cfg3.data.val == ["131_03", "131_02"] and cfg2.data.val == ["131_01"]
    for k, v in trained.state_dict().items():
        assert torch.equal(v, shipped.state_dict()[k])


def test_kinematic_batches_pass_through_prepare():
    cfg = load_config(
        None, [*TINY, "data.augment=kinematic", "data.steps_per_epoch=3", "data.train=[131_03]",
               "data.val=[131_01]"]
    )  # fmt: skip
    task = build_task(cfg)
    task.setup(torch.device("cpu"))
    assert isinstance(task.train_batches, SyntheticLiftingBatches) and len(task.train_batches) == 3
    batch = next(iter(task.train_batches))
    out = task.prepare(batch)
    assert out["keypoints"] is batch["keypoints"] and out["target"] is batch["target"]
    assert tuple(out["keypoints"].shape) == (32, 9, 17, 2)
    # screen normalisation in the sampler follows data.normalization
    assert task.train_batches.config.normalize == "screen"
    res = task(out)
    res["loss"].backward()
    assert torch.isfinite(res["loss"])


def test_half_stored_weights_load_as_float32(tmp_path):
    """A checkpoint written from a float16 copy of a model (ship_checkpoint.py --half) loads
    into the float32 model with the float16-rounded weights: its predictions equal those of
    the float32 model given the same rounded weights, and differ from the unrounded model's
    by the rounding only."""
    cfg = load_config(None, ["model.channels=32", "model.receptive_field=9"])
    torch.manual_seed(0)
    model = LiftingTask.build_model(cfg).eval()
    half = save_checkpoint(tmp_path / "h.pt", copy.deepcopy(model).half(), config_to_dict(cfg))
    _, loaded, _, _ = load_model(half, "cpu")
    assert all(p.dtype == torch.float32 for p in loaded.parameters())
    rounded = copy.deepcopy(model)
    with torch.no_grad():
        for p in rounded.parameters():
            p.copy_(p.half().float())
        for b in rounded.buffers():
            if b.is_floating_point():
                b.copy_(b.half().float())
    x = torch.rand(2, 20, 17, 2) - 0.5
    with torch.no_grad():
        got, want, exact = (m.predict(x) for m in (loaded, rounded, model))
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert 0 < (got - exact).abs().max() < 1e-2 * exact.abs().max()


def test_bundled_wild_lifter_loads():
    path = ROOT / "tensorpose" / "assets" / "models" / "lifter_wild.pt"
    assert path.stat().st_size <= 20e6
    _, model, cfg, extra = load_model(path, "cpu")
    assert cfg.task == "lift" and cfg.data.normalization == "intrinsics"
    assert cfg.data.augment == "kinematic" and not model.training
    # the documented recipe (configs/lift_wild_mocap.yaml), scored by default on a bundled take
    assert cfg.data.proportions == "walking" and cfg.data.proportions_height == "kind"
    assert cfg.data.val == ["131_03"] and len(cfg.data.ignore_joints) == 2
    assert extra["mean_pose"].shape == (17, 3)
    payload = torch.load(path, map_location="cpu", weights_only=True)
    assert not {"optimizer", "scheduler", "rng", "history"} & set(payload)
    # stored as float16 (scripts/ship_checkpoint.py --half), run in float32
    assert {v.dtype for v in payload["model"].values() if v.is_floating_point()} == {torch.float16}
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert path.stat().st_size <= 10e6  # the limit for a lifter that ships
