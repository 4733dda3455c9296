"""Temporal 3D pose lifter: 2D keypoint sequences -> root-relative 3D joints.

VideoPose3D's fully convolutional temporal model (dilated 1D convolutions in residual blocks,
:class:`TemporalConvNet`) with two heads in :class:`TemporalLifter`:

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

:class:`VideoPose3DLifter` is the same trunk with VideoPose3D's own linear head (``shrink``): its
module names and shapes are VideoPose3D's ``TemporalModel``, so that model's checkpoints load
as they are (see :mod:`tensorpose.lifting.videopose3d`).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from ..ops.kinematics import compose
from ..skeleton import Skeleton

__all__ = ["HEADS", "TemporalConvNet", "TemporalLifter", "VideoPose3DLifter", "filter_widths_for"]

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


def _check_keypoints(keypoints: torch.Tensor, joints: int, features: int) -> None:
    if keypoints.dim() != 4 or keypoints.shape[-2:] != (joints, features):
        raise ValueError(
            f"keypoints must have shape (B, T, {joints}, {features}), got {tuple(keypoints.shape)}"
        )


class TemporalConvNet(nn.Module):
    """VideoPose3D's temporal convolution trunk: ``(B, C_in, T)`` -> ``(B, channels, T_out)``.

    An expanding convolution of width ``filter_widths[0]``, then one residual block per further
    width ``w``: a convolution of width ``w`` dilated by the product of the widths before it and
    a 1x1 convolution, each followed by BatchNorm, ReLU and dropout. Module names and parameter
    shapes are those of VideoPose3D's ``TemporalModel`` (``expand_conv``, ``expand_bn``,
    ``layers_conv.{i}``, ``layers_bn.{i}``), so its state dicts map one to one.

    Args:
        in_channels: input channels (joints x features per joint).
        channels: width of every convolution.
        filter_widths: odd convolution widths, one per block; the receptive field is
            ``1 + sum((w_i - 1) * prod(w_0..w_{i-1}))`` (``[3, 3, 3]`` -> 27).
        dropout: dropout probability after each convolution.
        causal: each output frame depends only on the ``receptive_field`` frames ending at it
            (the residual of each block is aligned to the last frame of its window), as
            VideoPose3D's ``--causal``.
        dense: VideoPose3D's ``--dense`` ablation: undilated convolutions of width
            ``(w - 1) * dilation + 1`` instead of the dilated ones (other weight shapes; the
            strided path does not apply).
    """

    def __init__(
        self,
        in_channels: int,
        channels: int,
        filter_widths: list[int] | tuple[int, ...],
        dropout: float = 0.25,
        causal: bool = False,
        dense: bool = False,
    ) -> None:
        super().__init__()
        fw = list(filter_widths)
        if not fw or any(not isinstance(w, int) or w < 1 or w % 2 == 0 for w in fw):
            raise ValueError(f"filter_widths must be odd positive ints, got {filter_widths!r}")
        if channels < 1:
            raise ValueError(f"channels must be positive, got {channels}")
        if in_channels < 1:
            raise ValueError(f"in_channels must be positive, got {in_channels}")
        self.filter_widths = fw
        self.causal = bool(causal)
        self.dense = bool(dense)
        self.expand_conv = nn.Conv1d(in_channels, channels, fw[0], bias=False)
        self.expand_bn = nn.BatchNorm1d(channels, momentum=0.1)
        self.drop = nn.Dropout(dropout)
        convs, bns = [], []
        self.dilations: list[int] = []
        dilation = fw[0]
        for w in fw[1:]:
            self.dilations.append(dilation)
            if dense:
                conv = nn.Conv1d(channels, channels, (w - 1) * dilation + 1, bias=False)
            else:
                conv = nn.Conv1d(channels, channels, w, dilation=dilation, bias=False)
            convs += [conv, nn.Conv1d(channels, channels, 1, bias=False)]
            bns += [nn.BatchNorm1d(channels, momentum=0.1), nn.BatchNorm1d(channels, momentum=0.1)]
            dilation *= w
        self.layers_conv = nn.ModuleList(convs)
        self.layers_bn = nn.ModuleList(bns)

    def receptive_field(self) -> int:
        """Input frames that one output frame depends on."""
        rf, dilation = 1, 1
        for w in self.filter_widths:
            rf += (w - 1) * dilation
            dilation *= w
        return rf

    def edge_pad(self, keypoints: torch.Tensor) -> torch.Tensor:
        """Repeat the first/last frames of ``keypoints (B, T, ...)`` so that the valid forward
        gives ``T`` frames: ``receptive_field // 2`` on each side, or ``receptive_field - 1``
        before and none after when causal (VideoPose3D's evaluation padding)."""
        T = keypoints.shape[1]
        if T < 1:
            raise ValueError(f"keypoints must have at least one frame, got T={T}")
        pad = self.receptive_field() // 2
        before, after = (2 * pad, 0) if self.causal else (pad, pad)
        idx = torch.arange(-before, T + after, device=keypoints.device).clamp_(0, T - 1)
        return keypoints.index_select(1, idx)

    def temporal_features(self, x: torch.Tensor, strided: bool = False) -> torch.Tensor:
        """``x (B, in_channels, T)`` -> ``(B, channels, T - receptive_field + 1)``.

        With ``strided=True`` (windows of exactly ``receptive_field`` frames, one output frame)
        each convolution strides by its width instead of dilating: VideoPose3D's
        ``TemporalModelOptimized1f``, same weights, same result.
        """
        rf = self.receptive_field()
        T = x.shape[2]
        if strided and self.dense:
            raise ValueError("strided mode needs dilated convolutions; this trunk is dense")
        if strided and T != rf:
            raise ValueError(f"strided mode needs windows of exactly {rf} frames, got T={T}")
        if T < rf:
            raise ValueError(f"need at least receptive_field={rf} frames, got T={T} (use predict)")
        fw = self.filter_widths
        if strided:
            x = F.conv1d(x, self.expand_conv.weight, stride=fw[0])
        else:
            x = self.expand_conv(x)
        x = self.drop(F.relu(self.expand_bn(x)))
        # One iteration per residual block (network depth), not per sample or frame.
        for i, w in enumerate(fw[1:]):
            conv, conv1 = self.layers_conv[2 * i], self.layers_conv[2 * i + 1]
            if strided:
                res = x[:, :, (w - 1 if self.causal else w // 2) :: w]
                x = F.conv1d(x, conv.weight, stride=w)
            else:
                pad = (w - 1) * self.dilations[i] // 2
                shift = pad if self.causal else 0
                res = x[:, :, pad + shift : x.shape[2] - pad + shift]
                x = conv(x)
            x = self.drop(F.relu(self.layers_bn[2 * i](x)))
            x = res + self.drop(F.relu(self.layers_bn[2 * i + 1](conv1(x))))
        return x


class TemporalLifter(TemporalConvNet):
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
        >>> from tensorpose.skeleton import get_skeleton
        >>> m = TemporalLifter(get_skeleton("h36m17"), receptive_field=27, channels=32).eval()
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
        if head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, got {head!r}")
        J = skeleton.num_joints
        super().__init__(J * in_features, channels, filter_widths_for(receptive_field), dropout)
        self.skeleton = skeleton
        self.head = head
        self.num_joints = J
        self.in_features = in_features
        S = skeleton.num_bones
        if head == "direct":
            self.joints_out = nn.Conv1d(channels, J * 3, 1)
        else:
            self.directions_out = nn.Conv1d(channels, S * 3, 1)
            self.lengths_out = nn.Linear(channels, S)
            # Start near a plausible bone length (softplus(b) = 0.2 m) instead of 0.69 m.
            nn.init.constant_(self.lengths_out.bias, math.log(math.expm1(0.2)))

    # ------------------------------------------------------------------ trunk
    def features(self, keypoints: torch.Tensor, strided: bool = False) -> torch.Tensor:
        """``(B, T, J, in_features)`` -> ``(B, channels, T_out)``."""
        _check_keypoints(keypoints, self.num_joints, self.in_features)
        return self.temporal_features(keypoints.flatten(2).transpose(1, 2), strided)

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
        # training: no finiteness check here, a divergence surfaces as a non-finite loss
        joints = compose(lengths, dirs, self.skeleton, check_values=not self.training)
        return {"joints": joints, "lengths": lengths, "directions": dirs}

    def predict(self, keypoints: torch.Tensor, flip: bool = False) -> torch.Tensor:
        """Dense prediction for every frame of ``keypoints (B, T, J, 2)`` -> ``(B, T, J, 3)``.

        Edges are padded by repeating the first and last frames (``receptive_field // 2`` each
        side), so any ``T >= 1`` works, including sequences shorter than the receptive field.
        For the kinematic head the bone lengths are pooled over the whole sequence.

        With ``flip=True`` (test-time flip augmentation, as VideoPose3D's evaluation) the
        mirrored input (normalised ``x`` negated, left/right joints swapped by the skeleton's
        ``flip_index``) is lifted in the same batch, its prediction mirrored back (camera ``X``
        negated, joints swapped) and averaged with the plain one.
        """
        x = self.edge_pad(keypoints)
        if not flip:
            return self(x)["joints"]
        idx = self.skeleton.tensor("flip_index", x.device)
        mirror_in = x.new_ones(self.in_features)
        mirror_in[0] = -1
        B = x.shape[0]
        both = self(torch.cat([x, x.index_select(2, idx) * mirror_in]))["joints"]
        back = both[B:].index_select(2, idx) * both.new_tensor([-1.0, 1.0, 1.0])
        return (both[:B] + back) / 2


class VideoPose3DLifter(TemporalConvNet):
    """VideoPose3D's ``TemporalModel``: the trunk plus a linear 1x1 head (``shrink``).

    Same module names and parameter shapes as VideoPose3D, so ``model_pos`` of its checkpoints
    loads with ``load_state_dict`` (:func:`tensorpose.lifting.videopose3d.load_videopose3d` infers
    the
    arguments from the state dict). The output is the head's raw ``(x, y, z)`` per joint: camera
    frame, metres, trained root-relative (joint 0 comes out near zero, it is not forced to it).

    Args:
        joints_in: input joints (17 for both published models: Human3.6M order for
            ``pretrained_h36m_cpn``, COCO order for ``pretrained_h36m_detectron_coco``).
        joints_out: output joints (17, Human3.6M order).
        filter_widths: odd convolution widths (``[3, 3, 3, 3, 3]``: 243 frames).
        channels: convolution width (1024 in the published models).
        in_features: features per input joint (2).
        dropout: dropout probability (training only).
        causal: causal convolutions (VideoPose3D's ``--causal``).
        dense: undilated convolutions (VideoPose3D's ``--dense``).

    Example:
        >>> m = VideoPose3DLifter(17, 17, [3, 3, 3], channels=32).eval()
        >>> m(torch.randn(2, 30, 17, 2)).shape  # valid: T - receptive_field + 1 frames
        torch.Size([2, 4, 17, 3])
        >>> m.predict(torch.randn(2, 30, 17, 2)).shape  # edge-padded: every frame
        torch.Size([2, 30, 17, 3])
    """

    def __init__(
        self,
        joints_in: int,
        joints_out: int,
        filter_widths: list[int] | tuple[int, ...],
        channels: int = 1024,
        in_features: int = 2,
        dropout: float = 0.25,
        causal: bool = False,
        dense: bool = False,
    ) -> None:
        for name, v in (("joints_in", joints_in), ("joints_out", joints_out)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        if not isinstance(in_features, int) or in_features < 1:
            raise ValueError(f"in_features must be a positive int, got {in_features!r}")
        super().__init__(joints_in * in_features, channels, filter_widths, dropout, causal, dense)
        self.joints_in = joints_in
        self.joints_out = joints_out
        self.in_features = in_features
        self.shrink = nn.Conv1d(channels, joints_out * 3, 1)

    def forward(self, keypoints: torch.Tensor, strided: bool = False) -> torch.Tensor:
        """Valid (unpadded) forward: ``keypoints (B, T, J_in, F)`` -> ``(B, T - rf + 1, J_out, 3)``.

        ``strided=True`` takes windows of exactly ``receptive_field`` frames (one output frame
        each), as VideoPose3D's training model.
        """
        _check_keypoints(keypoints, self.joints_in, self.in_features)
        x = self.temporal_features(keypoints.flatten(2).transpose(1, 2), strided)
        out = self.shrink(x).transpose(1, 2)  # (B, T_out, J_out * 3)
        return out.reshape(out.shape[0], out.shape[1], self.joints_out, 3)

    def predict(
        self,
        keypoints: torch.Tensor,
        flip_index_in: torch.Tensor | list[int] | None = None,
        flip_index_out: torch.Tensor | list[int] | None = None,
    ) -> torch.Tensor:
        """Every frame of ``keypoints (B, T, J_in, F)`` -> ``(B, T, J_out, 3)``, as VideoPose3D
        evaluates: the input edge-padded by :meth:`edge_pad`, then the valid forward.

        With ``flip_index_in (J_in,)`` and ``flip_index_out (J_out,)`` (left/right joint
        permutations, e.g. ``Skeleton.flip_index``), also lifts the mirrored input (``x``
        negated, joints swapped), mirrors that prediction back and averages the two:
        VideoPose3D's test-time augmentation.
        """
        _check_keypoints(keypoints, self.joints_in, self.in_features)
        if (flip_index_in is None) != (flip_index_out is None):
            raise ValueError("flip_index_in and flip_index_out must be given together")
        x = self.edge_pad(keypoints)
        if flip_index_in is None:
            return self(x)
        fin = torch.as_tensor(flip_index_in, dtype=torch.long, device=x.device)
        fout = torch.as_tensor(flip_index_out, dtype=torch.long, device=x.device)
        for name, idx, n in (
            ("flip_index_in", fin, self.joints_in),
            ("flip_index_out", fout, self.joints_out),
        ):
            if idx.shape != (n,) or not torch.equal(
                idx.sort().values, torch.arange(n, device=idx.device)
            ):
                raise ValueError(f"{name} must be a permutation of {n} joints, got {idx.tolist()}")
        mirror_in = x.new_ones(self.in_features)
        mirror_in[0] = -1
        mirror_out = x.new_tensor([-1.0, 1.0, 1.0])
        B = x.shape[0]
        both = self(torch.cat([x, x.index_select(2, fin) * mirror_in]))
        return (both[:B] + both[B:].index_select(2, fout) * mirror_out) / 2
