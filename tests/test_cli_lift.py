"""End to end through the command line: a tiny train, then eval (table and --json), and the
documented errors. Small model, 10 fps, one camera: seconds on a CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tensorpose.cli import main

CONFIG = Path(__file__).resolve().parent.parent / "configs" / "lift_cmu.yaml"
TINY = [
    "train.epochs=1",
    "train.batch_size=64",
    "model.channels=16",
    "model.receptive_field=9",
    "data.fps=10",
    "data.train_cameras=1",
    "data.val_cameras=1",
    "train.device=cpu",
]
KEYS = {"mpjpe_mm", "p_mpjpe_mm", "n_mpjpe_mm", "mpjve_mm", "bone_std_mm", "frames"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    rc = main(["train", str(CONFIG), *TINY, f"train.out_dir={out}", "train.name=tiny", "--quiet"])
    assert rc == 0
    return out / "tiny"


def test_train_writes_run_folder(trained):
    names = {p.name for p in trained.iterdir()}
    assert {"config.yaml", "checkpoint.pt", "metrics.json", "history.json"} <= names
    metrics = json.loads((trained / "metrics.json").read_text())
    assert KEYS <= set(metrics)


def test_eval_json(trained, capsys):
    assert main(["eval", str(trained / "checkpoint.pt"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert KEYS <= set(out)
    assert out["frames"] == 92  # 1102 frames at 120 fps -> 10 fps, one camera
    assert out["bone_std_mm"] < 1e-2  # kinematic head: constant bone lengths
    assert out["mpjpe_mm"] > out["p_mpjpe_mm"] > 0


def test_eval_table_and_other_bvh(trained, capsys):
    rc = main(
        ["eval", str(trained / "checkpoint.pt"), "--bvh", "131_01", "--mapping", "cmu_3dsmax"]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "131_01" in text and "P-MPJPE" in text and "mean-pose MPJPE (baseline)" in text


def test_eval_errors(trained, capsys, tmp_path):
    ckpt = str(trained / "checkpoint.pt")
    assert main(["eval", ckpt, "--mapping", "cmu_unknown"]) == 2
    assert "unknown mapping 'cmu_unknown'" in capsys.readouterr().err
    assert main(["eval", ckpt, "--config", str(CONFIG)]) == 2  # channels 256 vs 16
    err = capsys.readouterr().err
    assert "another model config" in err and "channels: checkpoint has 16" in err
    assert main(["eval", str(tmp_path / "nope.pt")]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["train", str(CONFIG), "train.epoch=1"]) == 2
    assert "did you mean 'epochs'" in capsys.readouterr().err


def test_eval_other_subject_and_naming_convention(trained, capsys):
    """The real CMU subject-01 excerpt in the MotionBuilder-friendly naming evaluates (mapping
    detected), and the mean-pose baseline is reported next to it."""
    assert (
        main(["eval", str(trained / "checkpoint.pt"), "--bvh", "01_01_jump_30fps", "--json"]) == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["frames"] == 18 and "mean_pose_mpjpe_mm" in out  # 54 frames at 30 fps -> 10 fps


def test_keypoints_outside_the_given_size_are_said(tmp_path, capsys):
    """Keypoints of a 1088x1920 camera lifted with half that --size: a note naming the share
    outside and --size; with the right size, none."""
    from tensorpose.io.openpose import bundled_tracks

    cam = bundled_tracks()[2]
    argv = ["lift", str(cam), "--fps", "60", "--quiet"]
    assert main([*argv, "--size", "544x960", "--out", str(tmp_path / "half")]) == 0
    err = capsys.readouterr().err
    assert "note:" in err and "544x960" in err and "--size" in err
    assert main([*argv, "--size", "1088x1920", "--out", str(tmp_path / "whole")]) == 0
    assert "note:" not in capsys.readouterr().err
