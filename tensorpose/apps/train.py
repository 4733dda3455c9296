"""``tensorpose train``: train any task from a YAML recipe (or resume a run), then evaluate
its checkpoint on the run's validation data and write ``metrics.json`` into the run folder."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..config import Config, load_config
from ..errors import MissingFileError
from ..inference import evaluate
from ..tasks import get_task
from ..train.atomic_save import write_text_atomic
from ..train.trainer import train

__all__ = ["train_and_evaluate", "train_command"]


def train_and_evaluate(
    cfg: Config, resume: str | Path | None = None, progress: bool = True, profile: bool = False
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Train ``cfg`` (or resume the run folder ``resume``), then write the evaluation of its
    checkpoint on the run's validation data, ``metrics.json``, into the run folder (atomically):
    the trainer's validation of the last epoch (the checkpoint's weights), or, when no epoch ran
    (a finished run resumed), :func:`~tensorpose.inference.evaluate` of the checkpoint.

    Returns:
        ``(train result, evaluation)``; the evaluation is ``None`` on DDP ranks other than 0.
    """
    result = train(cfg, resume, progress=progress, resume=resume is not None, profile=profile)
    if result["world_size"] > 1 and int(os.environ.get("RANK", "0")) != 0:
        return result, None
    m = result.get("evaluation") or evaluate(result["checkpoint"], device=cfg.train.device)
    metrics = get_task(cfg.task).metrics_json(m)
    write_text_atomic(result["run_dir"] / "metrics.json", json.dumps(metrics, indent=1))
    return result, m


def train_command(
    config: str | None,
    overrides: list[str],
    resume: str | None = None,
    progress: bool = True,
    profile: bool = False,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``tensorpose train [CONFIG] [key=value ...] [--resume RUN_DIR]``: the config file (or
    only overrides; or the resumed run's stored config), then :func:`train_and_evaluate`."""
    if config and "=" in config:  # no config file, only overrides
        config, overrides = None, [config, *overrides]
    if resume:
        stored = Path(resume) / "config.yaml"
        if not stored.is_file():
            raise MissingFileError(f"--resume {resume}: no config.yaml in that run folder")
        config = config or stored
    cfg = load_config(config, overrides)  # no file: the defaults (the lifting recipe)
    return train_and_evaluate(cfg, resume, progress, profile)
