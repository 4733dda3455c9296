"""Run configuration: dataclasses, YAML files and ``section.key=value`` overrides.

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

__all__ = [
    "Config",
    "ConfigError",
    "DataConfig",
    "ModelConfig",
    "TrainConfig",
    "config_to_dict",
    "load_config",
    "save_config",
]


class ConfigError(ValueError):
    """A configuration key or value is not acceptable; the message says which and why."""


def _choices(*values: str) -> dict:
    return {"choices": values}


@dataclass
class DataConfig:
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
class ModelConfig:
    """The lifter (stored in checkpoints; ``eval`` rebuilds the model from it)."""

    head: str = field(default="kinematic", metadata=_choices("kinematic", "direct"))
    receptive_field: int = 27
    channels: int = 256
    dropout: float = 0.25
    skeleton: str = "h36m17"


@dataclass
class TrainConfig:
    """The optimisation loop."""

    epochs: int = 20
    batch_size: int = 256
    lr: float = 1e-3
    lr_decay: float = 0.9
    """Learning-rate factor per epoch."""
    bone_weight: float = 1.0
    direction_weight: float = 0.1
    seed: int = 0
    device: str = "auto"
    """``auto`` (CUDA when available), ``cpu``, ``cuda``, ``cuda:1``..."""
    threads: int = 0
    """CPU threads for torch; 0 leaves torch's default."""
    log_every: int = 10
    """Steps between progress-bar updates (the only host reads of the loss)."""
    out_dir: str = "runs"
    name: str = ""
    """Run folder name under ``out_dir``; empty: ``lift_<head>``."""


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


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
        raise _unknown(full, list(fields))
    f, tp = fields[head]
    if dataclasses.is_dataclass(tp):
        sub = getattr(obj, head)
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
    setattr(obj, head, v)


def _validate(cfg: Config) -> None:
    from .models.lifter import filter_widths_for

    try:
        filter_widths_for(cfg.model.receptive_field)
    except ValueError as e:
        raise ConfigError(f"model.receptive_field: {e}") from None
    for key, value, lo in (
        ("model.channels", cfg.model.channels, 1),
        ("train.epochs", cfg.train.epochs, 0),
        ("train.batch_size", cfg.train.batch_size, 1),
        ("train.log_every", cfg.train.log_every, 1),
        ("data.train_cameras", cfg.data.train_cameras, 1),
        ("data.val_cameras", cfg.data.val_cameras, 1),
        ("data.width", cfg.data.width, 1),
        ("data.height", cfg.data.height, 1),
    ):
        if value < lo:
            raise ConfigError(f"{key} must be >= {lo}, got {value}")
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


def load_config(path: str | Path | None = None, overrides: list[str] | tuple = ()) -> Config:
    """Defaults, then the YAML file at ``path`` (if any), then ``key=value`` overrides."""
    cfg = Config()
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
    """A :class:`Config` from :func:`config_to_dict` output (e.g. read from a checkpoint)."""
    cfg = Config()
    for k, v in raw.items():
        _set(cfg, str(k), v, False)
    _validate(cfg)
    return cfg


def save_config(cfg: Config, path: str | Path) -> None:
    """Write the resolved configuration as YAML."""
    Path(path).write_text(yaml.safe_dump(config_to_dict(cfg), sort_keys=False))
