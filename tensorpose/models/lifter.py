"""Temporal 3D pose lifter: 2D keypoint sequences -> root-relative 3D joints.

VideoPose3D's fully convolutional temporal model (dilated 1D convolutions in residual blocks)
with two heads:

- ``"direct"``: per-frame joint coordinates, made root-relative;
- ``"kinematic"`` (after "Deep Kinematics Analysis for Monocular 3D Human Pose Estimation"):
  bone lengths once per sequence from temporally pooled features (softplus, so positive) and unit
  bone directions per frame, composed into joints by :func:`tensorpose.ops.kinematics.compose`.
  Bone lengths are constant over time by construction.

Two ways to run the same weights:

- dense (``strided=False``): dilated convolutions over a whole sequence, ``T`` frames in,
  ``T - receptive_field + 1`` out (:meth:`TemporalLifter.predict` pads the edges so every frame
  gets a prediction);
- strided (``strided=True``): each convolution strides by its filter width instead of dilating,
  so a window of exactly ``receptive_field`` frames gives one output frame at a fraction of the
  cost: the training path, one target frame per window.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from ..ops.kinematics import compose
from ..skeleton import Skeleton

__all__ = ["HEADS", "TemporalLifter", "filter_widths_for"]

HEADS = ("kinematic", "direct")


def filter_widths_for(receptive_field: int) -> list[int]:
    """Filter widths ``[3, 3, ...]`` giving ``receptive_field`` (a power of 3: 1, 3, ..., 243)."""
    if not isinstance(receptive_field, int) or receptive_field < 1:
        raise ValueError(f"receptive_field must be a positive int, got {receptive_field!r}")
    n = round(math.log(receptive_field, 3))
    if 3**n != receptive_field or n > 5:
        raise ValueError(
            f"receptive_field must be one of 1, 3, 9, 27, 81, 243, got {receptive_field}"
        )
    return [3] * n if n > 0 else [1]


class TemporalLifter(nn.Module):
    """Dilated temporal convolutions over 2D keypoints, lifting each frame to 3D.

    Args:
        skeleton: the joint tree (``J`` joints in and out; the kinematic head composes along it).
        receptive_field: frames seen per output frame: 1, 3, 9, 27, 81 or 243.
        channels: width of every convolution.
        dropout: dropout probability after each block.
        head: ``"kinematic"`` or ``"direct"``.
        in_features: coordinates per input joint (2).

    Input ``keypoints (B, T, J, in_features)``; :meth:`forward` returns a dict with
    ``joints (B, T_out, J, 3)`` root-relative, and for the kinematic head ``lengths (B, 1, S, 1)``
    and ``directions (B, T_out, S, 3)``.

    Example:
        >>> from tensorpose import skeletons
        >>> m = TemporalLifter(skeletons.get("h36m17"), receptive_field=27, channels=32).eval()
        >>> m(torch.randn(2, 27, 17, 2), strided=True)["joints"].shape
        torch.Size([2, 1, 17, 3])
        >>> m.predict(torch.randn(2, 10, 17, 2)).shape
        torch.Size([2, 10, 17, 3])
    """

    def __init__(
        self,
        skeleton: Skeleton,
        receptive_field: int = 27,
        channels: int = 256,
        dropout: float = 0.25,
        head: str = "kinematic",
        in_features: int = 2,
    ) -> None:
        super().__init__()
        if head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, got {head!r}")
        if channels < 1:
            raise ValueError(f"channels must be positive, got {channels}")
        self.skeleton = skeleton
        self.head = head
        self.filter_widths = filter_widths_for(receptive_field)
        self.num_joints = J = skeleton.num_joints
        self.in_features = in_features
        fw = self.filter_widths
        self.expand_conv = nn.Conv1d(J * in_features, channels, fw[0], bias=False)
        self.expand_bn = nn.BatchNorm1d(channels, momentum=0.1)
        self.drop = nn.Dropout(dropout)
        convs, bns = [], []
        self.dilations = []
        dilation = fw[0]
        for w in fw[1:]:
            self.dilations.append(dilation)
            convs += [nn.Conv1d(channels, channels, w, dilation=dilation, bias=False)]
            convs += [nn.Conv1d(channels, channels, 1, bias=False)]
            bns += [nn.BatchNorm1d(channels, momentum=0.1), nn.BatchNorm1d(channels, momentum=0.1)]
            dilation *= w
        self.layers_conv = nn.ModuleList(convs)
        self.layers_bn = nn.ModuleList(bns)
        S = skeleton.num_bones
        if head == "direct":
            self.joints_out = nn.Conv1d(channels, J * 3, 1)
        else:
            self.directions_out = nn.Conv1d(channels, S * 3, 1)
            self.lengths_out = nn.Linear(channels, S)
            # Start near a plausible bone length (softplus(b) = 0.2 m) instead of 0.69 m.
            nn.init.constant_(self.lengths_out.bias, math.log(math.expm1(0.2)))

    def receptive_field(self) -> int:
        """Input frames that one output frame depends on."""
        rf, dilation = 1, 1
        for w in self.filter_widths:
            rf += (w - 1) * dilation
            dilation *= w
        return rf

    # ------------------------------------------------------------------ trunk
    def features(self, keypoints: torch.Tensor, strided: bool = False) -> torch.Tensor:
        """``(B, T, J, in_features)`` -> ``(B, channels, T_out)``."""
        if keypoints.dim() != 4 or keypoints.shape[-2:] != (self.num_joints, self.in_features):
            raise ValueError(
                f"keypoints must have shape (B, T, {self.num_joints}, {self.in_features}), got "
                f"{tuple(keypoints.shape)}"
            )
        rf = self.receptive_field()
        T = keypoints.shape[1]
        if strided and T != rf:
            raise ValueError(f"strided mode needs windows of exactly {rf} frames, got T={T}")
        if T < rf:
            raise ValueError(f"need at least receptive_field={rf} frames, got T={T} (use predict)")
        x = keypoints.flatten(2).transpose(1, 2)  # (B, J*F, T)
        fw = self.filter_widths
        if strided:
            x = F.conv1d(x, self.expand_conv.weight, stride=fw[0])
        else:
            x = self.expand_conv(x)
        x = self.drop(F.relu(self.expand_bn(x)))
        for i, w in enumerate(fw[1:]):
            conv, conv1 = self.layers_conv[2 * i], self.layers_conv[2 * i + 1]
            if strided:
                res = x[:, :, w // 2 :: w]
                x = F.conv1d(x, conv.weight, stride=w)
            else:
                pad = (w - 1) * self.dilations[i] // 2
                res = x[:, :, pad : x.shape[2] - pad]
                x = conv(x)
            x = self.drop(F.relu(self.layers_bn[2 * i](x)))
            x = res + self.drop(F.relu(self.layers_bn[2 * i + 1](conv1(x))))
        return x

    # ------------------------------------------------------------------ heads
    def forward(self, keypoints: torch.Tensor, strided: bool = False) -> dict[str, torch.Tensor]:
        """Lift ``keypoints (B, T, J, 2)``; see the class docstring for the outputs."""
        feats = self.features(keypoints, strided)  # (B, C, T_out)
        B, _, T_out = feats.shape
        J = self.num_joints
        if self.head == "direct":
            joints = self.joints_out(feats).transpose(1, 2).reshape(B, T_out, J, 3)
            root = joints[:, :, self.skeleton.root : self.skeleton.root + 1]
            return {"joints": joints - root}
        S = self.skeleton.num_bones
        dirs = self.directions_out(feats).transpose(1, 2).reshape(B, T_out, S, 3)
        dirs = F.normalize(dirs, dim=-1, eps=1e-6)
        lengths = F.softplus(self.lengths_out(feats.mean(-1))).reshape(B, 1, S, 1)
        joints = compose(lengths, dirs, self.skeleton)
        return {"joints": joints, "lengths": lengths, "directions": dirs}

    def predict(self, keypoints: torch.Tensor) -> torch.Tensor:
        """Dense prediction for every frame of ``keypoints (B, T, J, 2)`` -> ``(B, T, J, 3)``.

        Edges are padded by repeating the first and last frames (``receptive_field // 2`` each
        side), so any ``T >= 1`` works, including sequences shorter than the receptive field.
        For the kinematic head the bone lengths are pooled over the whole sequence.
        """
        T = keypoints.shape[1]
        pad = self.receptive_field() // 2
        idx = torch.arange(-pad, T + pad, device=keypoints.device).clamp_(0, T - 1)
        return self(keypoints.index_select(1, idx))["joints"]
