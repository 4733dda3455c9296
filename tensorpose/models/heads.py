"""Heads on a stride-32 backbone: SimpleBaseline's deconvolution heatmap head and a
CenterNet-style multi-person pose head (on the same deconvolution neck, stride 4).
"""

from __future__ import annotations

import torch
from torch import nn

from .backbones import resnet

__all__ = [
    "CenterNetHead",
    "HeatmapHead",
    "PoseNet",
    "centernet_pose_net",
    "deconv_neck",
    "heatmap_pose_net",
]


def deconv_neck(cin: int, layers: int = 3, channels: int = 256) -> nn.Sequential:
    """``layers`` x (4x4 stride-2 transposed conv - BN - ReLU): stride 32 -> 4 for 3 layers."""
    mods: list[nn.Module] = []
    for _ in range(layers):
        mods += [
            nn.ConvTranspose2d(cin, channels, 4, 2, 1, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(inplace=True),
        ]
        cin = channels
    return nn.Sequential(*mods)


class HeatmapHead(nn.Module):
    """SimpleBaseline: deconvolution neck and a 1x1 conv to ``K`` heatmaps (stride 4)."""

    def __init__(self, cin: int, num_joints: int, layers: int = 3, channels: int = 256) -> None:
        super().__init__()
        self.neck = deconv_neck(cin, layers, channels)
        self.final = nn.Conv2d(channels, num_joints, 1)
        nn.init.normal_(self.final.weight, std=1e-3)
        nn.init.zeros_(self.final.bias)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.final(self.neck(features))


class CenterNetHead(nn.Module):
    """CenterNet multi-pose outputs, each a 3x3 conv - ReLU - 1x1 conv branch on stride-4
    features: ``heatmap`` (1, logits), ``size`` (2), ``offset`` (2), ``joint_offset`` (2K),
    ``joint_heatmaps`` (K, logits), ``joint_sub_offset`` (2). Heatmap biases start at -2.19
    (probability 0.1), as in the paper."""

    def __init__(self, cin: int, num_joints: int, head_conv: int = 64) -> None:
        super().__init__()
        outs = {
            "heatmap": 1,
            "size": 2,
            "offset": 2,
            "joint_offset": 2 * num_joints,
            "joint_heatmaps": num_joints,
            "joint_sub_offset": 2,
        }
        self.branches = nn.ModuleDict()
        for name, c in outs.items():
            branch = nn.Sequential(
                nn.Conv2d(cin, head_conv, 3, padding=1),
                nn.ReLU(inplace=True),
                nn.Conv2d(head_conv, c, 1),
            )
            if name in ("heatmap", "joint_heatmaps"):
                nn.init.constant_(branch[-1].bias, -2.19)
            self.branches[name] = branch

    def forward(self, features: torch.Tensor) -> dict[str, torch.Tensor]:
        return {name: branch(features) for name, branch in self.branches.items()}


class PoseNet(nn.Module):
    """``head(neck(backbone(x)))``: the composition every 2D model here is."""

    def __init__(self, backbone: nn.Module, head: nn.Module, neck: nn.Module | None = None):
        super().__init__()
        self.backbone = backbone
        self.neck = neck if neck is not None else nn.Identity()
        self.head = head

    def forward(self, x: torch.Tensor):
        return self.head(self.neck(self.backbone(x)))


def heatmap_pose_net(num_joints: int, depth: int = 18, width: int = 64) -> PoseNet:
    """SimpleBaseline on the small ResNet: ``(B, 3, H, W) -> (B, K, H / 4, W / 4)``."""
    bb = resnet(depth, width)
    return PoseNet(bb, HeatmapHead(bb.out_channels, num_joints, channels=min(256, 4 * width)))


def centernet_pose_net(num_joints: int, depth: int = 18, width: int = 64) -> PoseNet:
    """CenterNet multi-person pose on the small ResNet with the deconvolution neck (stride 4)."""
    bb = resnet(depth, width)
    ch = min(256, 4 * width)
    return PoseNet(
        bb,
        CenterNetHead(ch, num_joints, head_conv=max(32, width)),
        deconv_neck(bb.out_channels, 3, ch),
    )
