"""nn.Modules: backbones, heads, regressors (thin wrappers over ops)."""

from .backbones import ResNet, resnet
from .deeppose import AlexNetRegressor, ResNetRegressor, deeppose
from .heads import CenterNetHead, HeatmapHead, PoseNet, centernet_pose_net, heatmap_pose_net

__all__ = [
    "AlexNetRegressor",
    "CenterNetHead",
    "HeatmapHead",
    "PoseNet",
    "ResNet",
    "ResNetRegressor",
    "centernet_pose_net",
    "deeppose",
    "heatmap_pose_net",
    "resnet",
]
