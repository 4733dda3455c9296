"""A small ResNet written here (no torchvision): BasicBlock stages, stride 32.

``resnet(depth, width)``: depth 10 (one block per stage) or 18 (two per stage); ``width`` is
the first stage's channel count (64 for the classic ResNet-18; 16-32 for CPU-sized models).
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["BasicBlock", "ResNet", "resnet"]


class BasicBlock(nn.Module):
    """3x3 conv - BN - ReLU - 3x3 conv - BN, plus the (projected) input, then ReLU."""

    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class ResNet(nn.Module):
    """Stem (7x7 stride-2 conv, 3x3 stride-2 max-pool) and four BasicBlock stages.

    Input ``(B, 3, H, W)``; output ``(B, out_channels, H / 32, W / 32)``.
    """

    def __init__(self, blocks: tuple[int, ...] = (2, 2, 2, 2), width: int = 64) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 7, 2, 3, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        )
        stages, cin = [], width
        for i, n in enumerate(blocks):
            cout = width * 2**i
            layers = [BasicBlock(cin, cout, 1 if i == 0 else 2)]
            layers += [BasicBlock(cout, cout) for _ in range(n - 1)]
            stages.append(nn.Sequential(*layers))
            cin = cout
        self.stages = nn.Sequential(*stages)
        self.out_channels = cin
        self.stride = 32
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        for m in self.modules():  # residual branches start near identity
            if isinstance(m, BasicBlock):
                nn.init.zeros_(m.bn2.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.stages(self.stem(x))


def resnet(depth: int = 18, width: int = 64) -> ResNet:
    """ResNet-10 (1 block per stage) or ResNet-18 (2 per stage) with ``width`` stem channels."""
    blocks = {10: (1, 1, 1, 1), 18: (2, 2, 2, 2)}
    if depth not in blocks:
        raise ValueError(f"depth must be 10 or 18, got {depth}")
    return ResNet(blocks[depth], width)
