"""``tensorpose profile-data``: time each input stage of a top-down 2D config against one model
step and say what bounds the pipeline (:mod:`tensorpose.train.diagnose`)."""

from __future__ import annotations

from collections.abc import Sequence

from ..config import Config, load_config
from ..tasks import build_model, require_capability
from ..train.diagnose import DataProfile, model_step_time, profile_config
from ..train.distributed import resolve_device

__all__ = ["profile_data", "summary"]


def profile_data(
    config: str,
    overrides: Sequence[str] = (),
    workers: Sequence[int] = (0, 1, 2),
    batches: int = 4,
    sample: int = 64,
    model_step: bool = True,
) -> tuple[Config, DataProfile]:
    """The config's input pipeline profiled (and one model step timed unless ``model_step`` is
    false: the verdict then ignores the model).

    Raises:
        ValueError: a config whose task has no top-down image pipeline to profile.
    """
    cfg = load_config(config, overrides)
    require_capability(cfg.task, "profile_data", f"{config}: profile-data")
    step = None
    if model_step:
        step = model_step_time(build_model(cfg), cfg.train.batch_size,
                               tuple(cfg.data.input_size),
                               resolve_device(cfg.train.device))  # fmt: skip
    return cfg, profile_config(cfg, workers, batches, sample, step)


def summary(config: str, cfg: Config, prof: DataProfile) -> list[str]:
    """The lines ``tensorpose profile-data`` prints."""
    return [f"{config} ({cfg.task}):", prof.table()]
