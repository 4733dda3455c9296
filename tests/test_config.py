from __future__ import annotations

import re
from pathlib import Path

import pytest

from tensorpose.config import (
    Config,
    ConfigError,
    config_from_dict,
    config_to_dict,
    load_config,
    save_config,
)

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def test_recipes_are_the_defaults():
    """``tensorpose demo`` runs the defaults: they must be the lift_cmu recipe, and the direct
    recipe must differ only in the head (same data and epochs)."""
    kin = load_config(CONFIGS / "lift_cmu.yaml")
    direct = load_config(CONFIGS / "lift_cmu_direct.yaml")
    default = Config()
    default.train.name = "lift_cmu"
    assert kin == default
    a, b = config_to_dict(kin), config_to_dict(direct)
    assert b["model"].pop("head") == "direct" and a["model"].pop("head") == "kinematic"
    assert b["train"].pop("name") == "lift_cmu_direct"
    a["train"].pop("name")
    assert a == b


def test_overrides_are_typed():
    cfg = load_config(
        None,
        [
            "train.epochs=3",
            "train.lr=2e-4",
            "model.head=direct",
            "data.train=[131_01, 131_03]",
            "data.elevation_deg=[0, 10]",
            "data.flip=0",
        ],
    )
    assert cfg.train.epochs == 3 and cfg.train.lr == pytest.approx(2e-4)
    assert cfg.model.head == "direct"
    assert cfg.data.train == ["131_01", "131_03"]  # names stay strings (no YAML 13101)
    assert cfg.data.elevation_deg == [0.0, 10.0] and cfg.data.flip == 0.0


@pytest.mark.parametrize(
    "override, message",
    [
        ("train.epoch=3", "unknown config key 'train.epoch'; did you mean 'epochs'"),
        ("trian.epochs=3", "unknown config key 'trian'"),
        ("train.epochs=three", "train.epochs expects int, got str 'three'"),
        ("train.epochs=2.5", "train.epochs expects int, got float"),
        ("train.lr=fast", "train.lr expects float"),
        ("model.head=skeletal", "model.head must be one of kinematic, direct"),
        ("model.receptive_field=28", "receptive_field must be one of 1, 3, 9, 27, 81, 243"),
        ("data.flip=1.5", "data.flip must be in [0, 1], got 1.5"),
        ("train=3", "train is a section"),
        ("train.epochs", "must look like section.key=value"),
        ("data.elevation_deg=[30, -10]", "low <= high"),
    ],
)
def test_bad_overrides_are_clear_errors(override, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(None, [override])


def test_yaml_errors_name_the_file_and_key(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("model:\n  head: kinematic\n  chanels: 64\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: unknown config key 'model.chanels'"):
        load_config(p)
    p.write_text("data:\n  train: [131_01]\n")
    with pytest.raises(ConfigError, match=r"data.train\[0\] expects str, got int 13101.*quote"):
        load_config(p)
    with pytest.raises(FileNotFoundError):
        load_config(tmp_path / "missing.yaml")


def test_round_trip(tmp_path):
    cfg = load_config(None, ["model.channels=64", "data.val=[131_02]"])
    save_config(cfg, tmp_path / "config.yaml")
    assert load_config(tmp_path / "config.yaml") == cfg
    assert config_from_dict(config_to_dict(cfg)) == cfg


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["task=heatmap", "data.input_size=[100, 100]"], "data.input_size must be multiples of 32"),
        (["task=heatmap", "model.depth=34"], "model.depth must be 10 or 18"),
        (["task=deeppose", "data.input_size=[256, 192]"], "alexnet needs data.input_size"),
        (
            ["task=deeppose", "data.flip_prob=2"],
            re.escape("data.flip_prob must be in [0, 1], got 2"),
        ),
        (["task=deeppose", "data.head=x"], r"unknown config key 'data.head'.*\[task: deeppose\]"),
        (["task=lift", "data.input_size=[64, 64]"], r"\[task: lift\]"),
        (
            ["task=bottomup"],
            "unknown task 'bottomup'; known tasks: centernet, deeppose, heatmap, lift",
        ),
    ],
)
def test_task_sections_check_themselves(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


def test_2d_data_section_has_the_augmentation_ranges():
    """The 2D ``data`` keys include every augmentation range, with AugmentConfig's defaults,
    and a recipe's values reach the task's AugmentConfig."""
    from dataclasses import fields

    from tensorpose.augment.crops import AugmentConfig
    from tensorpose.tasks import build_task

    cfg = load_config(None, ["task=heatmap"])
    ranges = {f.name for f in fields(AugmentConfig)} - {"output_size", "shadow_strength"}
    assert {k: getattr(cfg.data, k) for k in ranges} == {
        k: getattr(AugmentConfig(), k) for k in ranges
    }
    recipe = load_config(CONFIGS / "heatmap_coco.yaml", ["data.shift=0.07"])
    aug = build_task(recipe).augment_config()
    assert (aug.scale, aug.rotation, aug.shift, aug.output_size) == (0.1, 10.0, 0.07, (128, 96))


def test_switching_task_takes_its_sections():
    cfg = load_config(None, ["task=deeppose", "model.backbone=resnet10", "task=heatmap"])
    assert cfg.task == "heatmap" and not hasattr(cfg.model, "backbone")
    assert config_from_dict(config_to_dict(cfg)) == cfg


def test_training_doc_lists_every_range_as_the_metadata_says():
    from tensorpose.config import ranges_table

    text = (Path(__file__).resolve().parents[1] / "docs" / "training.md").read_text()
    table = text.split("<!-- ranges:begin -->\n", 1)[1].split("\n<!-- ranges:end -->", 1)[0]
    assert table == ranges_table()


@pytest.mark.parametrize(
    "text",
    [
        "train: {lr: .nan}",
        "train: {lr: .inf}",
        "train: {epochs: 1e400}",
        "train: {epochs: 100000000000000000000000000}",
        "train: {batch_size: -3}",
        "train: {lr_decay: -1}",
        "train: {grad_clip: .nan}",
        "train: {best_metric: accuracy}",
        "train: [1, 2]",
        "train: {epochs: {a: {b: [1, {c: 2}]}}}",
        "data: {focal: 0}",
        "data: {elevation_deg: [.nan, 3]}",
        "model: {dropout: 1.0}",
        "nonsense: 3",
        "train: {name: ../../etc}",
        "train: {epochs: [1, 2",
        "- a\n- b",
        "train: !!python/object/apply:os.system ['true']",
    ],
)
def test_hostile_config_files_are_one_line_config_errors(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert "\n" not in str(e.value).strip() or str(path) in str(e.value).splitlines()[0]
    assert str(path) in str(e.value)
