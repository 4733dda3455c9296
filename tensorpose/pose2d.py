"""2D pose models on batches of frames: the device work behind ``tensorpose predict``.

Models come in already loaded, with the config values prediction needs
(:class:`PoseModel`): ``kind`` ``"heatmap"`` or ``"deeppose"`` (top-down: one crop per person
box) or ``"centernet"`` (whole image, no boxes). :func:`load_pose_model` builds one from a
training checkpoint. Frames are padded into one uint8 tensor (:func:`pad_frames`) and copied
to the model's device; crops, letterboxes, forward passes and decoding run batched there
(:func:`centernet_people`, :func:`topdown_people`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from .centernet.model import IMAGENET_MEAN, IMAGENET_STD
from .centernet.pipeline import CenterNet
from .errors import InputError
from .ops.affine import invert_affine, transform_points
from .ops.heatmap import decode_heatmaps
from .ops.roi import crop_boxes
from .skeleton import get_skeleton

__all__ = [
    "KINDS",
    "PoseModel",
    "UnsupportedCheckpointError",
    "centernet_people",
    "load_pose_model",
    "pad_frames",
    "topdown_people",
]

KINDS = ("heatmap", "deeppose", "centernet")


@dataclass
class PoseModel:
    """An already-loaded model and the config values prediction needs.

    Attributes:
        model: the network (its device is where prediction runs).
        kind: ``"heatmap"``, ``"deeppose"`` (top-down crops) or ``"centernet"`` (whole image).
        input_size: ``(H, W)`` of the crops; CenterNet: ``(S, S)``.
        mean, std: input normalisation, fractions of 255.
        decode: heatmap decoding (``"quarter"``, ``"subpixel"``, ``"argmax"``).
        padding: top-down crop enlargement around the box.
        skeleton: joint names (``"coco17"``).
        top_k, joint_threshold, nms_threshold: CenterNet decoding (see
            :class:`~tensorpose.tasks.centernet.CenterNet`).
    """

    model: nn.Module
    kind: str
    input_size: tuple[int, int]
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    decode: str = "quarter"
    padding: float = 1.25
    skeleton: str = "coco17"
    top_k: int = 20
    joint_threshold: float = 0.1
    nms_threshold: float = 0.9

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        try:
            H, W = (int(v) for v in self.input_size)
        except (TypeError, ValueError):
            raise ValueError(f"input_size must be (H, W), got {self.input_size!r}") from None
        if H < 16 or W < 16:
            raise ValueError(f"input_size must be at least 16 x 16, got {self.input_size!r}")
        if self.kind == "centernet" and H != W:
            raise ValueError(f"a centernet model needs a square input_size, got {(H, W)}")
        self.input_size = (H, W)
        if self.kind == "centernet":
            self.centernet = CenterNet(
                self.skeleton, H, mean=self.mean, std=self.std, top_k=self.top_k,
                joint_threshold=self.joint_threshold, nms_threshold=self.nms_threshold,
            )  # fmt: skip

    counts_people: ClassVar[bool] = False
    """Whether it is told how many people to find (``--max-people``): CenterNet keeps its
    ``top_k``, a top-down model one person per box."""
    tracks_video: ClassVar[bool] = False
    """Whether the model has a video mode (one frame's people give the next frame's crops)."""
    landmark_layout: ClassVar[str | None] = None
    """The layout of its keypoints when they are not the skeleton's (``None``: they are)."""

    @property
    def finds_people(self) -> bool:
        """Whether the model finds people itself (whole images: CenterNet); a top-down model
        needs person boxes."""
        return self.kind == "centernet"

    def find_people(self, frames, images: torch.Tensor, size: torch.Tensor, max_people: int,
                    min_score: float = 0.0) -> list[dict]:  # fmt: skip
        """Every person in each padded frame of ``images`` (a model that
        :attr:`finds_people`); per frame ``boxes (n, 4)`` xywh, ``scores (n,)``,
        ``keypoints (n, K, 3)``. ``frames`` (the batch read) and ``max_people`` are unused: a
        CenterNet model keeps its ``top_k`` people above ``min_score``."""
        if not self.finds_people:
            raise ValueError(f"a top-down {self.kind} model needs person boxes")
        return centernet_people(self, images, size, min_score)

    @property
    def device(self) -> torch.device:
        p = next(iter(self.model.parameters()), None)
        return p.device if p is not None else torch.device("cpu")

    def normalize(self, images: torch.Tensor) -> torch.Tensor:
        """``(B, 3, H, W)`` in ``[0, 255]`` -> network input."""
        mean = torch.tensor(self.mean, device=images.device).view(1, 3, 1, 1) * 255
        std = torch.tensor(self.std, device=images.device).view(1, 3, 1, 1) * 255
        return ((images.float() - mean) / std).contiguous()


class UnsupportedCheckpointError(InputError):
    """A checkpoint of a task that does not predict from pictures (e.g. lifting); names it."""


def load_pose_model(checkpoint: str | Path, device: str | torch.device = "auto") -> PoseModel:
    """A :class:`PoseModel` from a training checkpoint (:func:`tensorpose.inference.load_model`):
    the kind is the checkpoint's task, the input geometry and decoding its config's.

    Raises:
        UnsupportedCheckpointError: a checkpoint of a task other than ``heatmap``,
            ``deeppose`` or ``centernet`` (one line naming the file and the task).
    """
    from .inference import load_model

    task, model, cfg, _ = load_model(checkpoint, device)
    if "predict" not in task.capabilities:
        hint = " (2D -> 3D: use `tensorpose lift`)" if "lift" in task.capabilities else ""
        raise UnsupportedCheckpointError(
            f"{checkpoint}: a {cfg.task!r} checkpoint cannot predict poses from images; predict "
            f"takes {', '.join(KINDS)} checkpoints{hint}"
        )
    d, m = cfg.data, cfg.model
    kw: dict = {"mean": tuple(d.mean), "std": tuple(d.std), "skeleton": m.skeleton}
    # the prediction settings the config's sections have (decoding, crop padding)
    kw.update({k: getattr(m, k) for k in _MODEL_KEYS if hasattr(m, k)})
    if hasattr(d, "padding"):
        kw["padding"] = d.padding
    return PoseModel(model.eval(), cfg.task, tuple(d.input_size), **kw)


_MODEL_KEYS = ("decode", "top_k", "joint_threshold", "nms_threshold")


def _topdown(pose: PoseModel, images: torch.Tensor, frame_index: torch.Tensor,
             boxes: torch.Tensor, chunk: int) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """Keypoints ``(P, K, 2)`` image pixels and scores ``(P, K)`` of the boxes' people."""
    kps, scores = [], []
    H, W = pose.input_size
    for s in range(0, boxes.shape[0], chunk):  # a loop over chunks of people (memory)
        b = boxes[s : s + chunk].float()
        rois = torch.cat(
            [frame_index[s : s + chunk, None].float(), b[:, :2], b[:, :2] + b[:, 2:]], 1
        )
        crops, M = crop_boxes(images, rois, (H, W), pose.padding)
        out = pose.model(pose.normalize(crops)).float()
        if pose.kind == "heatmap":
            stride = (W / out.shape[-1], H / out.shape[-2])
            xy, sc = decode_heatmaps(out, pose.decode, stride=stride)
        else:
            from .models.deeppose import denormalize_coords

            xy, sc = denormalize_coords(out, (H, W)), torch.ones(out.shape[:2], device=out.device)
        kps.append(transform_points(xy.double(), invert_affine(M.double())).float())
        scores.append(sc)
    if not kps:
        K = get_skeleton(pose.skeleton).num_joints
        empty = torch.zeros(0, K, 2, device=images.device)
        return empty, empty[..., 0]
    return torch.cat(kps), torch.cat(scores)


def pad_frames(frames: list[np.ndarray], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``(B, H, W, 3)`` uint8 on ``device`` (frames zero-padded to the largest) and their
    ``(B, 2)`` sizes ``(w, h)``. Frames of one size are stacked without padding; one frame on
    a CPU is not copied at all (the tensor shares the array's memory: read it, do not write)."""
    size = torch.tensor([[f.shape[1], f.shape[0]] for f in frames], dtype=torch.long)
    if len({f.shape for f in frames}) == 1:  # no padding: no zeroed buffer to fill
        host = torch.from_numpy(np.ascontiguousarray(frames[0])[None] if len(frames) == 1
                                else np.stack(frames))  # fmt: skip
    else:
        Hm = max(f.shape[0] for f in frames)
        Wm = max(f.shape[1] for f in frames)
        host = torch.zeros(len(frames), Hm, Wm, 3, dtype=torch.uint8)
        for i, f in enumerate(frames):  # a copy per frame: assembling the batch
            host[i, : f.shape[0], : f.shape[1]] = torch.from_numpy(f)
    if device.type == "cuda":
        host = host.pin_memory()
    return host.to(device, non_blocking=True), size.to(device)


def centernet_people(net: PoseModel, images, size, min_score: float) -> list[dict]:
    """People found by a CenterNet model in padded ``images`` of sizes ``size``; per frame
    ``boxes (n, 4)`` xywh, ``scores (n,)``, ``keypoints (n, K, 3)`` (host)."""
    x, M = net.centernet.letterbox(images, size)
    return _split(net.centernet.decode(net.model(x), M), min_score)


def _split(dec: dict, min_score: float) -> list[dict]:
    """Per frame: ``boxes (n, 4)`` xywh, ``scores (n,)``, ``keypoints (n, K, 3)`` (host)."""
    keep = (dec["keep"] & (dec["scores"] >= min_score)).cpu()
    b, s = dec["boxes"].cpu(), dec["scores"].cpu()
    kp = torch.cat([dec["keypoints"], dec["keypoint_scores"].unsqueeze(-1)], -1).cpu()
    out = []
    for i in range(keep.shape[0]):  # per frame, host-side bookkeeping of the results
        m = keep[i]
        xyxy = b[i][m]
        xywh = torch.cat([xyxy[:, :2], xyxy[:, 2:] - xyxy[:, :2]], -1)
        out.append({"boxes": xywh.double(), "scores": s[i][m].double(), "keypoints": kp[i][m]})
    return out


def topdown_people(pose: PoseModel, images: torch.Tensor, per_frame: list[torch.Tensor],
                    chunk: int) -> list[dict]:  # fmt: skip
    """Run the top-down model on every box of the batch; per frame ``boxes (n, 4)`` xywh,
    ``scores (n,)`` (box score x mean keypoint score), ``keypoints (n, K, 3)``."""
    counts = [len(b) for b in per_frame]
    allb = torch.cat(per_frame) if per_frame else torch.zeros(0, 5, dtype=torch.float64)
    frame_index = torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts))
    kp, sc = _topdown(pose, images, frame_index.to(images.device),
                      allb[:, :4].to(images.device), chunk)  # fmt: skip
    kp, sc = kp.cpu(), sc.cpu().clamp(0, 1)
    person = allb[:, 4] * sc.double().mean(-1) if len(sc) else allb[:, 4]
    out, s = [], 0
    for n in counts:  # per frame, host-side bookkeeping
        out.append({
            "boxes": allb[s : s + n, :4], "scores": person[s : s + n],
            "keypoints": torch.cat([kp[s : s + n], sc[s : s + n, :, None]], -1),
        })  # fmt: skip
        s += n
    return out
