"""Run configuration: dataclasses, YAML files and ``section.key=value`` overrides.

``task`` selects the problem (``lift``, ``deeppose``, ``heatmap``) and with it the dataclasses
of the ``data`` and ``model`` sections (:data:`TASKS`); ``train`` is the same for every task.
Unknown keys and values of the wrong type are rejected with an error naming the key, the
expected type and the value. The defaults are the ``configs/lift_cmu.yaml`` recipe (what
``tensorpose demo`` runs). The resolved configuration is written into every run folder.

Example:
    >>> cfg = load_config(None, ["model.head=direct", "train.epochs=2"])
    >>> cfg.model.head, cfg.train.epochs
    ('direct', 2)
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .augment import AugmentConfig

__all__ = [
    "TASKS",
    "Config",
    "ConfigError",
    "DataConfig",
    "DeepPoseModelConfig",
    "HeatmapModelConfig",
    "ImageDataConfig",
    "LiftDataConfig",
    "LiftModelConfig",
    "ModelConfig",
    "TrainConfig",
    "config_for",
    "config_to_dict",
    "load_config",
    "save_config",
]


class ConfigError(ValueError):
    """A configuration key or value is not acceptable; the message says which and why."""


def _choices(*values: str) -> dict:
    return {"choices": values}


# ---------------------------------------------------------------------- 3D lifting (task: lift)
@dataclass
class LiftDataConfig:
    """Where sequences come from and how they are seen."""

    source: str = field(default="bvh", metadata=_choices("bvh", "npz"))
    """``bvh``: files or bundled names in ``train``/``val``; ``npz``: VideoPose3D-layout file
    ``npz`` with ``subject`` or ``subject/action`` entries in ``train``/``val``."""
    train: list[str] = field(default_factory=lambda: ["131_01", "131_02"])
    val: list[str] = field(default_factory=lambda: ["131_03"])
    npz: str = ""
    mapping: str = ""
    """BVH joint-name mapping (``cmu_3dsmax``, ``cmu_motionbuilder``); empty: detect."""
    up_axis: str = field(default="y", metadata=_choices("y", "z"))
    """Up axis of world-coordinate npz data (BVH is Y up)."""
    fps: float = 30.0
    """Frame rate after subsampling BVH files (120 fps CMU -> every 4th frame)."""
    train_cameras: int = 32
    val_cameras: int = 4
    seed: int = 0
    """Seed of the virtual cameras (fixed per sequence-camera pair)."""
    width: int = 1000
    height: int = 1000
    focal: float = 1145.0
    elevation_deg: list[float] = field(default_factory=lambda: [-10.0, 30.0])
    distance_m: list[float] = field(default_factory=lambda: [3.0, 6.0])
    flip: float = 0.5
    """Probability of a left/right flip per training sample."""


@dataclass
class LiftModelConfig:
    """The lifter and its loss (stored in checkpoints; ``eval`` rebuilds the model from it)."""

    head: str = field(default="kinematic", metadata=_choices("kinematic", "direct"))
    receptive_field: int = 27
    channels: int = 256
    dropout: float = 0.25
    skeleton: str = "h36m17"
    bone_weight: float = 1.0
    """Kinematic head: weight of the bone-length loss."""
    direction_weight: float = 0.1
    """Kinematic head: weight of the bone-direction loss."""


# ---------------------------------------------------------------------- 2D (deeppose, heatmap)
@dataclass
class ImageDataConfig:
    """Top-down person crops from a COCO keypoint file and their augmentation."""

    annotations: str = ""
    """COCO person-keypoint JSON for training; empty: the bundled 16-image subset."""
    val_annotations: str = ""
    """Evaluation JSON; empty: the training file (the honest check on the tiny subset)."""
    people: int = 0
    """Use only the first N people (0: all)."""
    min_keypoints: int = 1
    input_size: list[int] = field(default_factory=lambda: [256, 192])
    """Crop ``[H, W]``."""
    padding: float = 1.25
    backend: str = field(default="auto", metadata=_choices("auto", "cpu", "device"))
    """Augmentation backend: ``cpu`` (OpenCV in DataLoader workers), ``device`` (batched on the
    device after the copy), ``auto`` (device on CUDA, cpu otherwise)."""
    workers: int = 0
    pin_memory: bool = True
    cache_images: bool = True
    on_error: str = field(default="skip", metadata=_choices("skip", "raise"))
    """Unreadable image: ``skip`` (dropped from its batch and logged) or ``raise`` (stop)."""
    mean: list[float] = field(default_factory=lambda: [0.485, 0.456, 0.406])
    std: list[float] = field(default_factory=lambda: [0.229, 0.224, 0.225])
    # Augmentation: the same names and defaults as tensorpose.augment.AugmentConfig.
    scale: float = AugmentConfig.scale
    rotation: float = AugmentConfig.rotation
    rotation_prob: float = AugmentConfig.rotation_prob
    shift: float = AugmentConfig.shift
    flip_prob: float = AugmentConfig.flip_prob
    brightness: float = AugmentConfig.brightness
    contrast: float = AugmentConfig.contrast
    saturation: float = AugmentConfig.saturation
    hue: float = AugmentConfig.hue
    noise: float = AugmentConfig.noise
    noise_prob: float = AugmentConfig.noise_prob
    shadow_prob: float = AugmentConfig.shadow_prob


@dataclass
class DeepPoseModelConfig:
    """DeepPose regressor (AlexNet of the articles or the small ResNet), masked MSE loss."""

    backbone: str = field(default="alexnet", metadata=_choices("alexnet", "resnet10", "resnet18"))
    fc_width: int = 4096
    dropout: float = 0.5
    width: int = 64
    """ResNet stem channels."""
    skeleton: str = "coco17"
    explicit_backward: bool = False
    """Masked MSE through the hand-written ``autograd.Function`` (same values and gradients)."""


@dataclass
class HeatmapModelConfig:
    """SimpleBaseline heatmap network on the small ResNet, weighted heatmap MSE loss."""

    depth: int = 18
    width: int = 64
    skeleton: str = "coco17"
    sigma: float = 2.0
    """Gaussian target sigma in heatmap pixels (stride 4)."""
    decode: str = field(default="quarter", metadata=_choices("quarter", "subpixel"))


TASKS: dict[str, tuple[type, type]] = {
    "lift": (LiftDataConfig, LiftModelConfig),
    "deeppose": (ImageDataConfig, DeepPoseModelConfig),
    "heatmap": (ImageDataConfig, HeatmapModelConfig),
}
"""Task name -> (data section, model section) dataclasses."""

DataConfig = LiftDataConfig  # the names of the lifting-only configuration
ModelConfig = LiftModelConfig


# ---------------------------------------------------------------------- the loop (any task)
@dataclass
class TrainConfig:
    """The optimisation loop (the same for every task)."""

    epochs: int = 20
    batch_size: int = 256
    """Global batch: split evenly over DDP processes."""
    optimizer: str = field(default="adam", metadata=_choices("sgd", "adam", "adamw"))
    lr: float = 1e-3
    momentum: float = 0.9
    """SGD momentum (the articles' MomentumSGD)."""
    weight_decay: float = 0.0
    amsgrad: bool = True
    """Adam/AdamW variant."""
    lr_schedule: str = field(
        default="exponential", metadata=_choices("constant", "exponential", "step", "cosine")
    )
    lr_decay: float = 0.9
    """``exponential``: factor per epoch; ``step``: factor every ``lr_step`` epochs."""
    lr_step: int = 10
    warmup_steps: int = 0
    """Linear warm-up from 0 over this many optimiser steps."""
    grad_clip: float = 0.0
    """Clip the global gradient norm to this (0: off)."""
    amp: str = field(default="none", metadata=_choices("none", "bf16", "fp16"))
    """Mixed precision on CUDA (``fp16`` uses a gradient scaler); CPU runs need ``none``."""
    channels_last: bool = False
    compile: bool = False
    """``torch.compile`` the model (opt-in)."""
    deterministic: bool = False
    """Deterministic algorithms (cuDNN benchmark off, ``use_deterministic_algorithms``)."""
    seed: int = 0
    device: str = "auto"
    """``auto`` (CUDA when available), ``cpu``, ``cuda``, ``cuda:1``..."""
    threads: int = 0
    """CPU threads for torch; 0 leaves torch's default."""
    log_every: int = 10
    """Steps between host reads of the loss and timers (progress bar, CSV, NaN check)."""
    val_every: int = 1
    """Epochs between validations (the last epoch always validates)."""
    ckpt_every: int = 1
    """Epochs between checkpoints (the last epoch always writes one)."""
    best_metric: str = ""
    """Validation metric that selects ``best.pt``; empty: the task's default."""
    max_steps: int = 0
    """Stop after this many optimiser steps (0: no limit)."""
    sync_bn: bool = False
    """SyncBatchNorm under DDP on CUDA."""
    freeze: list[str] = field(default_factory=list)
    """Parameter-name patterns (fnmatch, e.g. ``backbone.stem.*``) not to train."""
    init_from: str = ""
    """Checkpoint to initialise the model from (partial: missing/unexpected keys reported)."""
    tensorboard: bool = True
    """Write TensorBoard events when the package is installed."""
    out_dir: str = "runs"
    name: str = ""
    """Run folder name under ``out_dir``; empty: ``<task>`` (lift: ``lift_<head>``)."""


@dataclass
class Config:
    task: str = field(default="lift", metadata=_choices(*TASKS))
    """``lift`` (3D lifting from 2D sequences), ``deeppose`` (2D regression) or ``heatmap``."""
    data: Any = field(default_factory=LiftDataConfig)
    model: Any = field(default_factory=LiftModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


def config_for(task: str) -> Config:
    """The defaults of ``task``."""
    if task not in TASKS:
        raise ConfigError(f"task must be one of {', '.join(TASKS)}, got {task!r}")
    data, model = TASKS[task]
    return Config(task=task, data=data(), model=model())


# ---------------------------------------------------------------------- conversion
def config_to_dict(cfg: Any) -> dict:
    """A plain nested dict (YAML/JSON-friendly)."""
    return dataclasses.asdict(cfg)


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is list:
        return f"list[{_type_name(typing.get_args(tp)[0])}]"
    return getattr(tp, "__name__", str(tp))


def _coerce(key: str, tp: Any, value: Any, from_text: bool) -> Any:
    """Check/convert ``value`` for a field of type ``tp``; ``from_text``: it came from a
    ``key=value`` override (a string to parse)."""
    origin = typing.get_origin(tp)
    if origin is list:
        (item,) = typing.get_args(tp)
        if from_text:
            text = value.strip()
            if text.startswith("[") and text.endswith("]"):
                text = text[1:-1]
            parts = [p.strip().strip("'\"") for p in text.split(",")] if text.strip() else []
            return [_coerce(f"{key}[{i}]", item, p, True) for i, p in enumerate(parts)]
        if not isinstance(value, list):
            raise ConfigError(
                f"{key} expects {_type_name(tp)}, got {type(value).__name__} {value!r}"
            )
        return [_coerce(f"{key}[{i}]", item, v, False) for i, v in enumerate(value)]
    if tp is str:
        if isinstance(value, str):
            return value
        hint = ' (quote names such as "131_01": YAML reads 131_01 as the number 13101)'
        raise ConfigError(
            f"{key} expects str, got {type(value).__name__} {value!r}"
            + (hint if isinstance(value, int) else "")
        )
    if from_text:
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError:
            raise ConfigError(f"{key} expects {_type_name(tp)}, got {value!r}") from None
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, str):  # YAML 1.1 reads 1e-3 (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    else:  # pragma: no cover - only the types above are used
        raise ConfigError(f"{key}: unsupported field type {tp}")
    raise ConfigError(f"{key} expects {_type_name(tp)}, got {type(value).__name__} {value!r}")


def _fields(cls: type) -> dict[str, tuple[dataclasses.Field, Any]]:
    hints = typing.get_type_hints(cls)
    return {f.name: (f, hints[f.name]) for f in dataclasses.fields(cls)}


def _unknown(key: str, known: list[str]) -> ConfigError:
    close = difflib.get_close_matches(key.rsplit(".", 1)[-1], known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ConfigError(f"unknown config key {key!r}{hint} (known: {', '.join(known)})")


def _set(obj: Any, key: str, value: Any, from_text: bool, prefix: str = "") -> None:
    fields = _fields(type(obj))
    head, _, rest = key.partition(".")
    full = prefix + head
    if head not in fields:
        err = _unknown(full, list(fields))
        if prefix in ("data.", "model.") and isinstance(
            obj, (*[c for t in TASKS.values() for c in t],)
        ):
            task = next(t for t, cls in TASKS.items() if type(obj) in cls)
            err = ConfigError(f"{err} [task: {task}]")
        raise err
    f, tp = fields[head]
    sub = getattr(obj, head)
    if dataclasses.is_dataclass(sub):
        if rest:
            _set(sub, rest, value, from_text, full + ".")
            return
        if from_text or not isinstance(value, dict):
            raise ConfigError(f"{full} is a section; set its keys, e.g. {full}.<key>=...")
        for k, v in value.items():
            _set(sub, str(k), v, False, full + ".")
        return
    if rest:
        raise ConfigError(f"{full} is not a section, cannot set {prefix + key!r}")
    v = _coerce(full, tp, value, from_text)
    choices = f.metadata.get("choices")
    if choices and v not in choices:
        raise ConfigError(f"{full} must be one of {', '.join(choices)}, got {v!r}")
    if isinstance(obj, Config) and head == "task" and v != obj.task:
        fresh = config_for(v)  # the task's own data/model sections
        obj.data, obj.model = fresh.data, fresh.model
    setattr(obj, head, v)


def _check_min(items) -> None:
    for key, value, lo in items:
        if value < lo:
            raise ConfigError(f"{key} must be >= {lo}, got {value}")


def _validate_lift(cfg: Config) -> None:
    from .models.lifter import filter_widths_for

    try:
        filter_widths_for(cfg.model.receptive_field)
    except ValueError as e:
        raise ConfigError(f"model.receptive_field: {e}") from None
    _check_min(
        (
            ("model.channels", cfg.model.channels, 1),
            ("data.train_cameras", cfg.data.train_cameras, 1),
            ("data.val_cameras", cfg.data.val_cameras, 1),
            ("data.width", cfg.data.width, 1),
            ("data.height", cfg.data.height, 1),
        )
    )
    if not 0.0 <= cfg.model.dropout < 1.0:
        raise ConfigError(f"model.dropout must be in [0, 1), got {cfg.model.dropout}")
    if not 0.0 <= cfg.data.flip <= 1.0:
        raise ConfigError(f"data.flip must be a probability in [0, 1], got {cfg.data.flip}")
    for key in ("elevation_deg", "distance_m"):
        v = getattr(cfg.data, key)
        if len(v) != 2 or v[0] > v[1]:
            raise ConfigError(f"data.{key} must be [low, high] with low <= high, got {v}")
    if cfg.data.fps <= 0:
        raise ConfigError(f"data.fps must be positive, got {cfg.data.fps}")
    if cfg.data.source == "npz" and not cfg.data.npz:
        raise ConfigError("data.source is npz but data.npz (the file) is empty")


def _validate_2d(cfg: Config) -> None:
    d, m = cfg.data, cfg.model
    if len(d.input_size) != 2 or min(d.input_size) < 16:
        raise ConfigError(f"data.input_size must be [H, W] with H, W >= 16, got {d.input_size}")
    if len(d.mean) != 3 or len(d.std) != 3 or min(d.std) <= 0:
        raise ConfigError(f"data.mean/std must have 3 values (std > 0), got {d.mean}, {d.std}")
    _check_min((("data.workers", d.workers, 0), ("data.people", d.people, 0)))
    for key in ("flip_prob", "rotation_prob", "noise_prob", "shadow_prob"):
        if not 0.0 <= getattr(d, key) <= 1.0:
            raise ConfigError(f"data.{key} must be a probability in [0, 1], got {getattr(d, key)}")
    if cfg.task == "deeppose":
        if not 0.0 <= m.dropout < 1.0:
            raise ConfigError(f"model.dropout must be in [0, 1), got {m.dropout}")
        _check_min((("model.fc_width", m.fc_width, 1), ("model.width", m.width, 1)))
        if m.backbone == "alexnet" and (
            d.input_size[0] != d.input_size[1] or d.input_size[0] not in (224, 227)
        ):
            raise ConfigError(
                f"model.backbone alexnet needs data.input_size [227, 227] or [224, 224], "
                f"got {d.input_size}"
            )
    else:
        if m.depth not in (10, 18):
            raise ConfigError(f"model.depth must be 10 or 18, got {m.depth}")
        if d.input_size[0] % 32 or d.input_size[1] % 32:
            raise ConfigError(f"data.input_size must be multiples of 32, got {d.input_size}")
        if m.sigma <= 0:
            raise ConfigError(f"model.sigma must be positive, got {m.sigma}")


def _validate(cfg: Config) -> None:
    t = cfg.train
    _check_min(
        (
            ("train.epochs", t.epochs, 0),
            ("train.batch_size", t.batch_size, 1),
            ("train.log_every", t.log_every, 1),
            ("train.val_every", t.val_every, 1),
            ("train.ckpt_every", t.ckpt_every, 1),
            ("train.lr_step", t.lr_step, 1),
            ("train.warmup_steps", t.warmup_steps, 0),
            ("train.max_steps", t.max_steps, 0),
        )
    )
    if t.lr <= 0 or t.grad_clip < 0:
        raise ConfigError(
            f"train.lr must be > 0 and train.grad_clip >= 0, got {t.lr}, {t.grad_clip}"
        )
    (_validate_lift if cfg.task == "lift" else _validate_2d)(cfg)


def _task_of(raw: dict, overrides) -> str:
    task = raw.get("task", "lift")
    for item in overrides:
        key, _, value = item.partition("=")
        if key.strip() == "task":
            task = value.strip()
    if not isinstance(task, str) or task not in TASKS:
        raise ConfigError(f"task must be one of {', '.join(TASKS)}, got {task!r}")
    return task


def load_config(path: str | Path | None = None, overrides: list[str] | tuple = ()) -> Config:
    """Defaults, then the YAML file at ``path`` (if any), then ``key=value`` overrides."""
    raw: dict = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"config file {str(path)!r} not found")
        try:
            raw = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: not valid YAML: {e}") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: expected a mapping of sections, got {type(raw).__name__}")
    cfg = config_for(_task_of(raw, overrides))
    if raw:
        try:
            for k, v in raw.items():
                _set(cfg, str(k), v, False)
        except ConfigError as e:
            raise ConfigError(f"{path}: {e}") from None
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r} must look like section.key=value")
        _set(cfg, key.strip(), value, True)
    _validate(cfg)
    return cfg


def config_from_dict(raw: dict) -> Config:
    """A :class:`Config` from :func:`config_to_dict` output (e.g. read from a checkpoint).
    Configs of lifting runs from before the task selector (loss weights in ``train``) are
    migrated."""
    raw = {k: dict(v) if isinstance(v, dict) else v for k, v in raw.items()}
    if "task" not in raw:
        for key in ("bone_weight", "direction_weight"):
            if key in raw.get("train", {}):
                raw.setdefault("model", {})[key] = raw["train"].pop(key)
    cfg = config_for(_task_of(raw, ()))
    for k, v in raw.items():
        _set(cfg, str(k), v, False)
    _validate(cfg)
    return cfg


def save_config(cfg: Config, path: str | Path) -> None:
    """Write the resolved configuration as YAML."""
    Path(path).write_text(yaml.safe_dump(config_to_dict(cfg), sort_keys=False))
