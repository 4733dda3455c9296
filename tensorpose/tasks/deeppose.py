"""DeepPose: 2D joint regression with a visibility-masked MSE (``task: deeppose``).

Data path: :mod:`.topdown` (COCO people -> augmented crops ``x``) -> ``y``: keypoints
normalised to the crop (:func:`~tensorpose.models.deeppose.normalize_coords`) ->
:func:`~tensorpose.models.deeppose.deeppose` (AlexNet or small ResNet regressor) ->
:func:`~tensorpose.losses.masked_mse` -> metrics of :meth:`.TopDownTask.evaluate`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import torch
import torch.distributed as dist
from torch import nn

from .. import losses
from ..config import Config, ConfigError, check_min, choices, valid
from ..models.deeppose import deeppose, denormalize_coords, normalize_coords
from ..skeleton import get_skeleton
from .base import Field
from .topdown import TopDownTask

__all__ = ["DeepPoseModelConfig", "DeepPoseTask"]


@dataclass
class DeepPoseModelConfig:
    """DeepPose regressor (AlexNet of the articles or the small ResNet), masked MSE loss."""

    backbone: str = field(default="alexnet", metadata=choices("alexnet", "resnet10", "resnet18"))
    fc_width: int = field(default=4096, metadata=valid(1, 65_536))
    dropout: float = field(default=0.5, metadata=valid(0, 1, "right-open"))
    width: int = field(default=64, metadata=valid(1, 4096))
    """ResNet stem channels."""
    skeleton: str = "coco17"
    explicit_backward: bool = False
    """Masked MSE through the hand-written ``autograd.Function`` (same values and gradients)."""

    def validate(self, cfg: Config) -> None:
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"model.dropout must be in [0, 1), got {self.dropout}")
        check_min((("model.fc_width", self.fc_width, 1), ("model.width", self.width, 1)))
        size = cfg.data.input_size
        if self.backbone == "alexnet" and (size[0] != size[1] or size[0] not in (224, 227)):
            raise ConfigError(
                f"model.backbone alexnet needs data.input_size [227, 227] or [224, 224], got {size}"
            )


class DeepPoseTask(TopDownTask):
    """DeepPose: ``(B, K, 2)`` coordinates normalised to the crop, visibility-masked MSE."""

    model_config = DeepPoseModelConfig
    capabilities: ClassVar[frozenset[str]] = frozenset({"predict", "export", "profile_data"})
    export_decoding = "regression"
    contract: ClassVar[dict[str, Field]] = {
        **TopDownTask.contract,
        "y": Field(("B", "K", 2), torch.float32),
    }

    @classmethod
    def profile_targets(cls, cfg: Config) -> Callable[[dict], object]:
        """Keypoints normalised to the crop of a batch of crops."""
        H, W = (int(v) for v in cfg.data.input_size)

        def targets(b: dict) -> object:
            return normalize_coords(b["keypoints"], (H, W))

        return targets

    @classmethod
    def build_model(cls, cfg: Config) -> nn.Module:
        m = cfg.model
        K = get_skeleton(m.skeleton).num_joints
        if m.backbone == "alexnet":
            kw = {"input_size": cfg.data.input_size[0], "fc_width": m.fc_width,
                  "dropout": m.dropout}  # fmt: skip
        else:
            kw = {"width": m.width}
        return deeppose(K, m.backbone, **kw)

    def targets(self, batch: dict) -> dict:
        batch["y"] = normalize_coords(batch["keypoints"], self.size)
        return batch

    def step_outputs(self, model: nn.Module, batch: dict) -> dict:
        out = model(batch["x"])
        fn = losses.masked_mse_explicit if self.cfg.model.explicit_backward else losses.masked_mse
        loss = fn(out.float(), batch["y"], batch["visibility"])
        if model.training and dist.is_initialized() and dist.get_world_size() > 1:
            # normalise by the visible joints of the GLOBAL batch (DDP averages gradients over
            # ranks): one all-reduce of a count on the device, no host sync
            local = (batch["visibility"] > 0).sum().to(loss.dtype)
            total = local.clone()
            dist.all_reduce(total)
            loss = loss * local.clamp_min(1) * dist.get_world_size() / total.clamp_min(1)
        return {"loss": loss, "raw": out}

    def decode_train(self, raw: torch.Tensor) -> torch.Tensor:
        return denormalize_coords(raw.detach().float(), self.size)

    def decode(self, raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pred = self.decode_train(raw)
        return pred, torch.ones(pred.shape[:2], device=pred.device)
