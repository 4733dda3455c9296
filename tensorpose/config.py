"""Run configuration: dataclasses, YAML files and ``section.key=value`` overrides.

``task`` selects the problem; the task's class supplies the dataclasses of the ``data`` and
``model`` sections and their checks (a section's ``validate(cfg)`` method); ``train`` is the same
for every task. Unknown keys and values of the wrong type are rejected with an error naming the
key, the expected type and the value. The defaults are the ``configs/lift_cmu.yaml`` recipe (what
``tensorpose demo`` runs). The resolved configuration is written into every run folder.

This module imports nothing of :mod:`tensorpose.tasks`: the task registry
(:mod:`tensorpose.tasks.registry`, imported with the package) hands it the lookup of a task by
name through :func:`set_task_lookup`, so imports point one way, tasks -> config.

Example:
    >>> cfg = load_config(None, ["model.head=direct", "train.epochs=2"])
    >>> cfg.model.head, cfg.train.epochs
    ('direct', 2)
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import InputError, MissingFileError
from .io.files import read_text

__all__ = [
    "DEFAULT_TASK",
    "Config",
    "ConfigError",
    "TrainConfig",
    "check_min",
    "check_ranges",
    "check_run_name",
    "choices",
    "config_for",
    "config_from_dict",
    "config_to_dict",
    "load_config",
    "ranges_table",
    "save_config",
    "set_task_lookup",
    "valid",
]

DEFAULT_TASK = "lift"
"""The task of a config that names none."""


class ConfigError(InputError):
    """A configuration key or value is not acceptable; the message says which and why."""


def choices(*values: str) -> dict:
    """Field metadata restricting a config value to ``values``:
    ``field(default="a", metadata=choices("a", "b"))``."""
    return {"choices": values}


def valid(lo: float | None, hi: float | None, kind: str = "closed") -> dict:
    """Field metadata giving a numeric config value its valid range, checked when the config is
    built: ``field(default=1e-3, metadata=valid(0, 10, "left-open"))`` means ``0 < v <= 10``.

    Args:
        lo, hi: bounds (``None``: unbounded on that side).
        kind: ``closed`` ``[lo, hi]``, ``open`` ``(lo, hi)``, ``left-open`` ``(lo, hi]`` or
            ``right-open`` ``[lo, hi)``.

    NaN and infinity are never valid. For a list field the range applies to every item.
    """
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {', '.join(_KINDS)}, got {kind!r}")
    return {"range": (lo, hi, kind)}


_KINDS = {"closed": "[]", "open": "()", "left-open": "(]", "right-open": "[)"}


def _num(v: float) -> str:
    return str(v) if isinstance(v, int) else f"{v:g}"


def _range_text(lo: float | None, hi: float | None, kind: str) -> str:
    left, right = _KINDS[kind]
    a = "-inf" if lo is None else _num(lo)
    b = "inf" if hi is None else _num(hi)
    return f"{left if lo is not None else '('}{a}, {b}{right if hi is not None else ')'}"


def _check_value(key: str, v: Any, rng: tuple | None) -> None:
    import math

    if isinstance(v, list):
        for i, item in enumerate(v):
            _check_value(f"{key}[{i}]", item, rng)
        return
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return
    if isinstance(v, float) and not math.isfinite(v):
        raise ConfigError(f"{key} must be a finite number, got {v}")
    if rng is None:
        return
    lo, hi, kind = rng
    left, right = _KINDS[kind]
    ok = (lo is None or (v > lo if left == "(" else v >= lo)) and (
        hi is None or (v < hi if right == ")" else v <= hi)
    )
    if not ok:
        raise ConfigError(f"{key} must be in {_range_text(lo, hi, kind)}, got {v}")


# ---------------------------------------------------------------------- the tasks' sections
_lookup: Callable[[str], Any] | None = None
_names: Callable[[], list[str]] | None = None


def set_task_lookup(lookup: Callable[[str], Any], names: Callable[[], list[str]]) -> None:
    """Tell the config how to find tasks (called once by :mod:`tensorpose.tasks.registry`).

    Args:
        lookup: task name -> task class (with ``data_config``, ``model_config`` and
            ``metric_names``); an unknown name raises :class:`ConfigError` (one line naming
            the known tasks).
        names: the registered task names, sorted.
    """
    global _lookup, _names
    _lookup, _names = lookup, names


def _task(name: str) -> Any:
    """The class of task ``name`` through the registered lookup."""
    if _lookup is None:
        raise RuntimeError("no task registry: import tensorpose.tasks before building a config")
    return _lookup(name)


def _task_names() -> list[str]:
    if _names is None:
        raise RuntimeError("no task registry: import tensorpose.tasks before building a config")
    return _names()


def check_ranges(section: Any, prefix: str) -> None:
    """Check every field of the dataclass ``section`` against its :func:`valid` range (and
    every float, in lists too, for NaN/infinity); raise :class:`ConfigError` naming the key."""
    for f in dataclasses.fields(section):
        _check_value(prefix + f.name, getattr(section, f.name), f.metadata.get("range"))


def ranges_table(task: str | None = None) -> str:
    """A Markdown table of every numeric key of ``task`` (default: every registered task) with
    its default and valid range, generated from the field metadata (docs/training.md's table)."""
    rows: dict[tuple[str, int], list] = {}
    names = [task] if task else _task_names()
    for name in names:
        data, model = _sections(name)
        for prefix, cls in (("train", TrainConfig), ("data", data), ("model", model)):
            for f, tp in _fields(cls).values():
                base = typing.get_args(tp)[0] if typing.get_origin(tp) is list else tp
                if base not in (int, float):
                    continue
                row = rows.setdefault((f"{prefix}.{f.name}", id(f)), [f, tp, []])
                row[2].append(name)
    lines = ["| key | tasks | type | default | valid |", "|---|---|---|---|---|"]
    for (key, _), (f, tp, tasks) in rows.items():
        rng = f.metadata.get("range")
        text = _range_text(*rng) if rng else "finite; checked by the task"
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        used = "all" if len(tasks) == len(names) else ", ".join(tasks)
        lines.append(f"| `{key}` | {used} | {_type_name(tp)} | {default} | {text} |")
    return "\n".join(lines)


def check_min(items: Iterable[tuple[str, float, float]]) -> None:
    """Raise :class:`ConfigError` for the first ``(key, value, lowest)`` with ``value < lowest``."""
    for key, value, lo in items:
        if value < lo:
            raise ConfigError(f"{key} must be >= {lo}, got {value}")


def _sections(task: str) -> tuple[type, type]:
    """The ``data`` and ``model`` section dataclasses of ``task``."""
    cls = _task(task)
    return cls.data_config, cls.model_config


# ---------------------------------------------------------------------- the loop (any task)
@dataclass
class TrainConfig:
    """The optimisation loop (the same for every task)."""

    epochs: int = field(default=20, metadata=valid(0, 100_000))
    batch_size: int = field(default=256, metadata=valid(1, 1 << 20))
    """Global batch: split evenly over DDP processes."""
    optimizer: str = field(default="adam", metadata=choices("sgd", "adam", "adamw"))
    lr: float = field(default=1e-3, metadata=valid(0, 10, "left-open"))
    momentum: float = field(default=0.9, metadata=valid(0, 1, "right-open"))
    """SGD momentum (the articles' MomentumSGD)."""
    weight_decay: float = field(default=0.0, metadata=valid(0, 1))
    amsgrad: bool = True
    """Adam/AdamW variant."""
    lr_schedule: str = field(
        default="exponential", metadata=choices("constant", "exponential", "step", "cosine")
    )
    lr_decay: float = field(default=0.9, metadata=valid(0, 1, "left-open"))
    """``exponential``: factor per epoch; ``step``: factor every ``lr_step`` epochs."""
    lr_step: int = field(default=10, metadata=valid(1, 100_000))
    warmup_steps: int = field(default=0, metadata=valid(0, 10**9))
    """Linear warm-up from 0 over this many optimiser steps."""
    grad_clip: float = field(default=0.0, metadata=valid(0, 1e6))
    """Clip the global gradient norm to this (0: off)."""
    amp: str = field(default="none", metadata=choices("none", "bf16", "fp16"))
    """Mixed precision on CUDA (``fp16`` uses a gradient scaler); CPU runs need ``none``."""
    channels_last: bool = False
    compile: bool = False
    """``torch.compile`` the model (opt-in)."""
    deterministic: bool = False
    """Deterministic algorithms (cuDNN benchmark off, ``use_deterministic_algorithms``)."""
    seed: int = field(default=0, metadata=valid(0, 2**31 - 1))
    device: str = "auto"
    """``auto`` (CUDA when available), ``cpu``, ``cuda``, ``cuda:1``..."""
    threads: int = field(default=0, metadata=valid(0, 1024))
    """CPU threads for torch; 0: half the available CPUs, at least one (``tensorpose.threads``)."""
    log_every: int = field(default=10, metadata=valid(1, 10**9))
    """Steps between host reads of the loss and timers (progress bar, CSV, NaN check)."""
    val_every: int = field(default=1, metadata=valid(1, 100_000))
    """Epochs between validations (the last epoch always validates)."""
    ckpt_every: int = field(default=1, metadata=valid(1, 100_000))
    """Epochs between checkpoints (the last epoch always writes one)."""
    best_metric: str = ""
    """Validation metric that selects ``best.pt``; empty: the task's default."""
    max_steps: int = field(default=0, metadata=valid(0, 10**12))
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


def check_run_name(name: str, key: str = "train.name") -> str:
    """``name`` if it is one folder name (no separators, not ``.``/``..``, not absolute).

    Raises:
        InputError: naming ``key`` and the value.
    """
    bad = (
        not isinstance(name, str)
        or name in (".", "..")
        or "/" in name
        or "\\" in name
        or "\0" in name
        or Path(name).is_absolute()
        or any(ord(c) < 32 for c in name)
    )
    if bad:
        raise InputError(
            f"{key} must be a single folder name inside the output folder (no '/', '..' or "
            f"absolute path), got {name!r}"
        )
    return name


def _check_keys(cfg: Config) -> None:
    """The checks of single keys: ranges of every section (:func:`valid` metadata; NaN/inf
    never), the run name, ``best_metric`` among the task's metrics."""
    for prefix, section in (("train.", cfg.train), ("data.", cfg.data), ("model.", cfg.model)):
        check_ranges(section, prefix)
    t = cfg.train
    if t.name:
        try:
            check_run_name(t.name)
        except ValueError as e:
            raise ConfigError(str(e)) from None
    if t.best_metric:
        names = _task(cfg.task).metric_names
        if t.best_metric not in names:
            raise ConfigError(
                f"train.best_metric {t.best_metric!r} is not a metric of task {cfg.task!r} "
                f"(it reports: {', '.join(names)})"
            )


def _validate(cfg: Config) -> None:
    """:func:`_check_keys`, the ``train`` checks here, then each task section's own
    ``validate(cfg)``."""
    _check_keys(cfg)
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
        if not path.exists():
            raise MissingFileError(f"config file {str(path)!r} not found")
        text = read_text(path, 16 << 20, "config file")
        try:
            raw = yaml.safe_load(text) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: not valid YAML: {e}") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: expected a mapping of sections, got {type(raw).__name__}")
    cfg = config_for(_task_of(raw, overrides))
    if raw:
        try:
            for k, v in raw.items():
                _apply(cfg, str(k), v, False)
            _check_keys(cfg)  # the file's own values (cross-key checks: after the overrides)
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
