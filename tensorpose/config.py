"""Run configuration: dataclasses, YAML files and ``section.key=value`` overrides.

``task`` selects the problem; the task's class (found through :mod:`tensorpose.tasks.registry`)
supplies the dataclasses of the ``data`` and ``model`` sections and their checks (a section's
``validate(cfg)`` method); ``train`` is the same for every task. Unknown keys and values of the
wrong type are rejected with an error naming the key, the expected type and the value. The
defaults are the ``configs/lift_cmu.yaml`` recipe (what ``tensorpose demo`` runs). The resolved
configuration is written into every run folder.

Example:
    >>> cfg = load_config(None, ["model.head=direct", "train.epochs=2"])
    >>> cfg.model.head, cfg.train.epochs
    ('direct', 2)
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .tasks.registry import UnknownTaskError, get_task

__all__ = [
    "DEFAULT_TASK",
    "Config",
    "ConfigError",
    "TrainConfig",
    "check_min",
    "choices",
    "config_for",
    "config_from_dict",
    "config_to_dict",
    "load_config",
    "save_config",
]

DEFAULT_TASK = "lift"
"""The task of a config that names none."""


class ConfigError(ValueError):
    """A configuration key or value is not acceptable; the message says which and why."""


def choices(*values: str) -> dict:
    """Field metadata restricting a config value to ``values``:
    ``field(default="a", metadata=choices("a", "b"))``."""
    return {"choices": values}


def check_min(items: Iterable[tuple[str, float, float]]) -> None:
    """Raise :class:`ConfigError` for the first ``(key, value, lowest)`` with ``value < lowest``."""
    for key, value, lo in items:
        if value < lo:
            raise ConfigError(f"{key} must be >= {lo}, got {value}")


def _sections(task: str) -> tuple[type, type]:
    """The ``data`` and ``model`` section dataclasses of ``task``."""
    try:
        cls = get_task(task)
    except UnknownTaskError as e:
        raise ConfigError(str(e)) from None
    return cls.data_config, cls.model_config


# ---------------------------------------------------------------------- the loop (any task)
@dataclass
class TrainConfig:
    """The optimisation loop (the same for every task)."""

    epochs: int = 20
    batch_size: int = 256
    """Global batch: split evenly over DDP processes."""
    optimizer: str = field(default="adam", metadata=choices("sgd", "adam", "adamw"))
    lr: float = 1e-3
    momentum: float = 0.9
    """SGD momentum (the articles' MomentumSGD)."""
    weight_decay: float = 0.0
    amsgrad: bool = True
    """Adam/AdamW variant."""
    lr_schedule: str = field(
        default="exponential", metadata=choices("constant", "exponential", "step", "cosine")
    )
    lr_decay: float = 0.9
    """``exponential``: factor per epoch; ``step``: factor every ``lr_step`` epochs."""
    lr_step: int = 10
    warmup_steps: int = 0
    """Linear warm-up from 0 over this many optimiser steps."""
    grad_clip: float = 0.0
    """Clip the global gradient norm to this (0: off)."""
    amp: str = field(default="none", metadata=choices("none", "bf16", "fp16"))
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
    task: str = DEFAULT_TASK
    """The problem, a name registered in :mod:`tensorpose.tasks.registry` (``lift``: 3D lifting
    from 2D sequences, ``deeppose``: 2D regression, ``heatmap``: 2D heatmaps)."""
    data: Any = field(default_factory=lambda: _sections(DEFAULT_TASK)[0]())
    model: Any = field(default_factory=lambda: _sections(DEFAULT_TASK)[1]())
    train: TrainConfig = field(default_factory=TrainConfig)


def config_for(task: str) -> Config:
    """The defaults of ``task``."""
    if not isinstance(task, str):
        raise ConfigError(f"task must be a task name, got {task!r}")
    data, model = _sections(task)
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
        raise _unknown(full, list(fields))
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
    allowed = f.metadata.get("choices")
    if allowed and v not in allowed:
        raise ConfigError(f"{full} must be one of {', '.join(allowed)}, got {v!r}")
    if isinstance(obj, Config) and head == "task" and v != obj.task:
        fresh = config_for(v)  # the task's own data/model sections
        obj.data, obj.model = fresh.data, fresh.model
    setattr(obj, head, v)


def _apply(cfg: Config, key: str, value: Any, from_text: bool) -> None:
    """Set ``key``; an unknown key of a task's section names the task."""
    try:
        _set(cfg, key, value, from_text)
    except ConfigError as e:
        if key.partition(".")[0] in ("data", "model") and "unknown config key" in str(e):
            raise ConfigError(f"{e} [task: {cfg.task}]") from None
        raise


def _validate(cfg: Config) -> None:
    """The ``train`` checks here, then each task section's own ``validate(cfg)``."""
    t = cfg.train
    check_min(
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
    for section in (cfg.data, cfg.model):
        if hasattr(section, "validate"):
            section.validate(cfg)


def _task_of(raw: dict, overrides) -> str:
    task = raw.get("task", DEFAULT_TASK)
    for item in overrides:
        key, _, value = item.partition("=")
        if key.strip() == "task":
            task = value.strip()
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
                _apply(cfg, str(k), v, False)
        except ConfigError as e:
            raise ConfigError(f"{path}: {e}") from None
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r} must look like section.key=value")
        _apply(cfg, key.strip(), value, True)
    _validate(cfg)
    return cfg


def config_from_dict(raw: dict) -> Config:
    """A :class:`Config` from :func:`config_to_dict` output (e.g. read from a checkpoint).
    Configs written before ``task`` existed (lifting runs, loss weights in ``train``) are
    migrated."""
    raw = {k: dict(v) if isinstance(v, dict) else v for k, v in raw.items()}
    if "task" not in raw:
        for key in ("bone_weight", "direction_weight"):
            if key in raw.get("train", {}):
                raw.setdefault("model", {})[key] = raw["train"].pop(key)
    cfg = config_for(_task_of(raw, ()))
    for k, v in raw.items():
        _apply(cfg, str(k), v, False)
    _validate(cfg)
    return cfg


def save_config(cfg: Config, path: str | Path) -> None:
    """Write the resolved configuration as YAML."""
    Path(path).write_text(yaml.safe_dump(config_to_dict(cfg), sort_keys=False))
