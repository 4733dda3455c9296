"""SimpleBaseline heatmaps: MSRA gaussian targets at stride 4, weighted heatmap MSE
(``task: heatmap``).

Data path: :mod:`.topdown` (COCO people -> augmented crops ``x``) -> ``heatmaps``/``weights``
(:func:`~tensorpose.ops.heatmap.gaussian_heatmaps`) ->
:func:`~tensorpose.models.heads.heatmap_pose_net` -> :func:`~tensorpose.losses.heatmap_mse` ->
:func:`~tensorpose.ops.heatmap.decode_heatmaps` -> metrics of :meth:`.TopDownTask.evaluate`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import nn

from .. import losses
from ..config import Config, ConfigError, choices, valid
from ..models.heads import heatmap_pose_net
from ..ops.heatmap import decode_heatmaps, gaussian_heatmaps
from ..skeleton import get_skeleton
from .base import Field
from .topdown import TopDownTask

__all__ = ["HeatmapModelConfig", "HeatmapTask"]

STRIDE = 4
"""Input pixels per heatmap pixel."""


@dataclass
class HeatmapModelConfig:
    """SimpleBaseline heatmap network on the small ResNet, weighted heatmap MSE loss."""

    depth: int = 18
    """ResNet depth: 10 or 18."""
    width: int = field(default=64, metadata=valid(1, 4096))
    skeleton: str = "coco17"
    sigma: float = field(default=2.0, metadata=valid(0, 100, "left-open"))
    """Gaussian target sigma in heatmap pixels (stride 4)."""
    decode: str = field(default="quarter", metadata=choices("quarter", "subpixel"))

    def validate(self, cfg: Config) -> None:
        if self.depth not in (10, 18):
            raise ConfigError(f"model.depth must be 10 or 18, got {self.depth}")
        size = cfg.data.input_size
        if size[0] % 32 or size[1] % 32:
            raise ConfigError(f"data.input_size must be multiples of 32, got {size}")
        if self.sigma <= 0:
            raise ConfigError(f"model.sigma must be positive, got {self.sigma}")


class HeatmapTask(TopDownTask):
    """SimpleBaseline: MSRA gaussian heatmaps at stride 4, weighted heatmap MSE."""

    model_config = HeatmapModelConfig
    capabilities: ClassVar[frozenset[str]] = frozenset({"predict", "export", "profile_data"})
    export_decoding = "heatmap"
    contract: ClassVar[dict[str, Field]] = {
        **TopDownTask.contract,
        "heatmaps": Field(("B", "K", "h", "w"), torch.float32),
        "weights": Field(("B", "K"), torch.float32),
    }

    @classmethod
    def profile_targets(cls, cfg: Config) -> Callable[[dict], object]:
        """Gaussian heatmaps at stride 4 of a batch of crops."""
        H, W = (int(v) for v in cfg.data.input_size)
        m = cfg.model

        def targets(b: dict) -> object:
            return gaussian_heatmaps(b["keypoints"], b["visibility"], (H // 4, W // 4), m.sigma,
                                     4.0)  # fmt: skip

        return targets

    @classmethod
    def build_model(cls, cfg: Config) -> nn.Module:
        m = cfg.model
        return heatmap_pose_net(get_skeleton(m.skeleton).num_joints, m.depth, m.width)

    def sizes(self) -> dict[str, int]:
        H, W = self.size
        return {**super().sizes(), "h": H // STRIDE, "w": W // STRIDE}

    def targets(self, batch: dict) -> dict:
        H, W = self.size
        hm, w = gaussian_heatmaps(batch["keypoints"], batch["visibility"],
                                  (H // STRIDE, W // STRIDE), self.cfg.model.sigma,
                                  float(STRIDE))  # fmt: skip
        batch["heatmaps"], batch["weights"] = hm, w
        return batch

    def step_outputs(self, model: nn.Module, batch: dict) -> dict:
        out = model(batch["x"])
        return {"loss": losses.heatmap_mse(out.float(), batch["heatmaps"], batch["weights"]),
                "raw": out}  # fmt: skip

    def decode(self, raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return decode_heatmaps(raw.detach().float(), self.cfg.model.decode, stride=float(STRIDE))
