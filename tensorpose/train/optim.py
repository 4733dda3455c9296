"""Optimiser and learning-rate schedule from the ``train`` config section."""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

from ..config import TrainConfig

__all__ = ["build_optimizer", "build_scheduler"]


def build_optimizer(tc: TrainConfig, params: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
    """SGD with momentum, Adam or AdamW (``amsgrad`` for the Adam variants)."""
    if tc.optimizer == "sgd":
        return torch.optim.SGD(params, tc.lr, momentum=tc.momentum, weight_decay=tc.weight_decay)
    cls = torch.optim.Adam if tc.optimizer == "adam" else torch.optim.AdamW
    return cls(params, tc.lr, weight_decay=tc.weight_decay, amsgrad=tc.amsgrad)


def build_scheduler(
    tc: TrainConfig, opt: torch.optim.Optimizer, steps_per_epoch: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """Per-step factor: linear warm-up over ``warmup_steps``, times the epoch schedule."""
    total = max(tc.epochs * steps_per_epoch, 1)

    def factor(step: int) -> float:
        epoch = step // steps_per_epoch
        warm = min(1.0, (step + 1) / tc.warmup_steps) if tc.warmup_steps else 1.0
        if tc.lr_schedule == "exponential":
            return warm * tc.lr_decay**epoch
        if tc.lr_schedule == "step":
            return warm * tc.lr_decay ** (epoch // tc.lr_step)
        if tc.lr_schedule == "cosine":
            return warm * 0.5 * (1 + math.cos(math.pi * min(step / total, 1.0)))
        return warm

    return torch.optim.lr_scheduler.LambdaLR(opt, factor)
