"""DeepPose: direct regression of ``K`` joint coordinates from a person crop.

:class:`AlexNetRegressor` is the network of the DeepPose articles (five convolutions, three
fully connected layers, ``K * 2`` outputs; 227x227 input, 224 also works);
:class:`ResNetRegressor` puts the same regression output on the small ResNet of
:mod:`tensorpose.models.backbones`.

Targets are crop coordinates normalised to the crop: ``u = (x + 0.5) / W - 0.5`` (the crop
area maps to ``[-0.5, 0.5]``); :func:`normalize_coords` / :func:`denormalize_coords` convert.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..ops._constants import constant
from .backbones import resnet

__all__ = [
    "AlexNetRegressor",
    "ResNetRegressor",
    "deeppose",
    "denormalize_coords",
    "normalize_coords",
]


def normalize_coords(keypoints: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Crop pixels ``(..., 2)`` -> ``[-0.5, 0.5]`` over the crop area ``(H, W)``."""
    wh = constant((float(size[1]), float(size[0])), keypoints.device, keypoints.dtype)
    return (keypoints + 0.5) / wh - 0.5


def denormalize_coords(coords: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Inverse of :func:`normalize_coords`."""
    wh = constant((float(size[1]), float(size[0])), coords.device, coords.dtype)
    return (coords + 0.5) * wh - 0.5


class AlexNetRegressor(nn.Module):
    """AlexNet regressing ``(B, K, 2)`` normalised joint coordinates.

    conv 96@11x11/4 - pool - conv 256@5x5 - pool - conv 384@3x3 - conv 384@3x3 -
    conv 256@3x3 - pool - fc ``fc_width`` - fc ``fc_width`` - fc ``K*2`` (ReLU after each conv and
    the hidden fcs, dropout on the hidden fcs).

    Args:
        num_joints: ``K``.
        input_size: 227 (the articles) or 224; square crops.
        fc_width: hidden fc width (4096 in the articles; smaller for CPU experiments).
        dropout: dropout probability of the hidden fcs.
    """

    def __init__(
        self, num_joints: int, input_size: int = 227, fc_width: int = 4096, dropout: float = 0.5
    ) -> None:
        super().__init__()
        self.num_joints = num_joints
        self.input_size = input_size
        self.features = nn.Sequential(
            nn.Conv2d(3, 96, 11, stride=4),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2),
            nn.Conv2d(96, 256, 5, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2),
            nn.Conv2d(256, 384, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 384, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2),
        )
        side = self._feature_side(input_size)
        if side < 1:
            raise ValueError(f"input_size {input_size} is too small for AlexNet (use 227 or 224)")
        self.fc6 = nn.Linear(256 * side * side, fc_width)
        self.fc7 = nn.Linear(fc_width, fc_width)
        self.fc8 = nn.Linear(fc_width, num_joints * 2)
        self.dropout = dropout
        for m in [*self.features, self.fc6, self.fc7]:  # He init: trains from scratch
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                nn.init.zeros_(m.bias)
        nn.init.zeros_(self.fc8.bias)
        nn.init.normal_(self.fc8.weight, std=1e-3)

    @staticmethod
    def _feature_side(n: int) -> int:
        n = (n - 11) // 4 + 1  # conv1
        n = (n - 3) // 2 + 1  # pool1
        n = (n - 3) // 2 + 1  # pool2 (conv2 keeps the size)
        return (n - 3) // 2 + 1  # pool5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4 or x.shape[1] != 3 or x.shape[-2:] != (self.input_size,) * 2:
            s = self.input_size
            raise ValueError(f"x must have shape (B, 3, {s}, {s}), got {tuple(x.shape)}")
        h = self.features(x).flatten(1)
        h = F.dropout(torch.relu(self.fc6(h)), self.dropout, self.training)
        h = F.dropout(torch.relu(self.fc7(h)), self.dropout, self.training)
        return self.fc8(h).view(-1, self.num_joints, 2)


class ResNetRegressor(nn.Module):
    """The small ResNet, global average pooling, and one linear layer to ``(B, K, 2)``."""

    def __init__(self, num_joints: int, depth: int = 18, width: int = 64) -> None:
        super().__init__()
        self.num_joints = num_joints
        self.backbone = resnet(depth, width)
        self.head = nn.Linear(self.backbone.out_channels, num_joints * 2)
        nn.init.zeros_(self.head.bias)
        nn.init.normal_(self.head.weight, std=1e-3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.backbone(x).mean(dim=(2, 3))
        return self.head(h).view(-1, self.num_joints, 2)


def deeppose(num_joints: int, backbone: str = "alexnet", **kwargs) -> nn.Module:
    """A DeepPose regressor: ``backbone`` is ``"alexnet"`` (kwargs: ``input_size``,
    ``fc_width``, ``dropout``), ``"resnet10"`` or ``"resnet18"`` (kwarg: ``width``)."""
    if backbone == "alexnet":
        return AlexNetRegressor(num_joints, **kwargs)
    if backbone in ("resnet10", "resnet18"):
        return ResNetRegressor(num_joints, depth=int(backbone[6:]), **kwargs)
    raise ValueError(f"backbone must be 'alexnet', 'resnet10' or 'resnet18', got {backbone!r}")
