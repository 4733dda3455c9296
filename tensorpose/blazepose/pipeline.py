"""BlazePose (MediaPipe's "full" pose model) on batches of frames: detect -> rotated ROI ->
landmarks -> image pixels, as batched tensor code on the networks' device.

- Image mode (:func:`image_people`): every frame on its own, as MediaPipe's
  ``static_image_mode=True``: the detector, MediaPipe's weighted NMS, up to ``max_people``
  ROIs per frame, one landmark pass over every ROI of the batch.
- Video mode (:class:`BlazePoseTracker`): one frame of each of ``S`` streams (the cameras of a
  recording) per call; a person's next ROI comes from its landmarks (the auxiliary alignment
  points 33 and 34), a person whose pose presence falls below ``min_presence`` is lost, and
  a stream runs the detector while it tracks fewer than ``max_people`` people (MediaPipe's
  ``PoseLandmarker`` in video mode: with one person, only when it tracks nobody); with
  MediaPipe's landmark smoothing (One-Euro filters, :meth:`BlazePoseTracker._smoothed`)
  unless ``smooth=False``.

Frames come as ``(B, H, W, 3)`` uint8 RGB (``pad_frames``: zero-padded to the largest, with
their ``(B, 2)`` sizes ``(w, h)``). People come back per frame as ``keypoints (n, 33, 3)``
(``x, y`` pixels, visibility), ``scores (n,)`` (the pose flag) and ``boxes (n, 4)`` (``x, y,
w, h`` around the 33 landmarks), on the host, as :mod:`tensorpose.pose2d` returns them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import cv2
import numpy as np
import torch
from torch import nn

from ..errors import InputError
from ..ops.affine import fixed_point_samples, warp_affine_fixed_point
from .geometry import (
    DETECTOR_SIZE,
    LANDMARK_SIZE,
    alignment_roi,
    decode_detections,
    decode_landmarks,
    detection_to_image,
    head_down,
    letterbox_roi,
    one_euro_step,
    roi_matrix,
    split_torso,
    ssd_anchors,
    tile_rois,
    torso_distance,
    weighted_nms,
)
from .networks import load_blazepose_networks

__all__ = [
    "BlazePose",
    "BlazePoseTracker",
    "check_frame_size",
    "crop_rois",
    "detect_people",
    "detect_rois",
    "image_people",
    "landmarks_in_rois",
]

NUM_LANDMARKS = 33
MIN_SIDE = 64
"""The smallest longer side (pixels) of a frame BlazePose takes: below it the detector, whose
input is 224 pixels, finds people rarely and ghosts sometimes (a bundled COCO picture: its
person is found at 64 and at 128 pixels wide, not at 48, 32 or 24, a ghost at 16)."""


def check_frame_size(shape: tuple[int, ...], name: str) -> None:
    """Raise a one-line ``ValueError`` naming ``name`` when a frame of ``shape (H, W, ...)`` is
    too small for the detector (longer side under :data:`MIN_SIDE`)."""
    h, w = shape[:2]
    if max(h, w) < MIN_SIDE:
        raise InputError(f"{name}: {w}x{h} pixels is too small for BlazePose's person detector "
                         f"(at least {MIN_SIDE} pixels on the longer side)")  # fmt: skip


@dataclass
class BlazePose:
    """The two networks, their anchors, and MediaPipe's thresholds (its Python defaults)."""

    detector: nn.Module
    landmark: nn.Module
    min_detection: float = 0.5
    min_presence: float = 0.5
    nms_iou: float = 0.3
    roi_scale: float = 1.25
    anchors: torch.Tensor = field(init=False)
    kind: str = field(default="blazepose", init=False)
    skeleton: str = field(default="coco17", init=False)
    finds_people: ClassVar[bool] = True
    """It finds people itself (its own detector): no person boxes."""
    counts_people: ClassVar[bool] = True
    """It finds up to ``max_people`` people per frame (``--max-people``)."""
    tracks_video: ClassVar[bool] = True
    """Video mode: :class:`BlazePoseTracker`."""
    landmark_layout: ClassVar[str] = "BLAZEPOSE_33"
    """Its keypoints are MediaPipe's 33 landmarks."""

    def __post_init__(self) -> None:
        self.anchors = ssd_anchors().to(self.device)

    @property
    def device(self) -> torch.device:
        t = next(iter([*self.detector.parameters(), *self.detector.buffers()]), None)
        return t.device if t is not None else torch.device("cpu")

    @classmethod
    def load(cls, device: str | torch.device = "cpu", variant: str = "full", **kw) -> BlazePose:
        """The networks on ``device``: the shipped detector and the ``variant`` landmark
        network (``"full"``, shipped; ``"heavy"``, installed by ``tensorpose
        convert-blazepose``: :func:`~tensorpose.blazepose.networks.load_blazepose_networks`,
        whose ``InputError`` names that command when it is missing); its ``kind`` is
        ``blazepose`` or ``blazepose-heavy``. The process's allocator is left as it is: a
        program that runs batched CPU inference may call
        :func:`tensorpose.blazepose.memory.keep_freed_memory` itself (``tensorpose predict``
        does), else glibc hands a batch's activations back and faults them in again each call."""
        det, lm = load_blazepose_networks(device, variant)
        bp = cls(det, lm, **kw)
        if variant != "full":
            bp.kind = f"blazepose-{variant}"
        return bp

    def tracker(self, streams: int, max_people: int = 1) -> BlazePoseTracker:
        """Video mode over ``streams`` videos side by side (:class:`BlazePoseTracker`)."""
        return BlazePoseTracker(self, streams, max_people)

    def find_people(self, frames, images: torch.Tensor, sizes: torch.Tensor, max_people: int,
                    min_score: float = 0.0) -> list[dict]:  # fmt: skip
        """Image mode (:func:`image_people`) on padded ``images`` of ``sizes``, after checking
        each frame of ``frames`` (a batch read: ``images`` and ``names``) is large enough;
        ``min_score`` is unused (MediaPipe's thresholds are the model's)."""
        for img, name in zip(frames.images, frames.names, strict=True):
            check_frame_size(img.shape, name)
        return image_people(self, images, sizes, max_people)


def _nchw(images: torch.Tensor) -> torch.Tensor:
    return images.permute(0, 3, 1, 2)


def crop_rois(images: torch.Tensor, M: torch.Tensor, size: int, frame_index: torch.Tensor,
              sizes: torch.Tensor, border: str) -> torch.Tensor:  # fmt: skip
    """MediaPipe's crops (OpenCV 4's fixed-point bilinear, :func:`~tensorpose.ops.affine.
    warp_affine_fixed_point`) of frames ``images (B, H, W, 3)`` uint8 of ``sizes (B, 2)``:
    ``(K, 3, size, size)`` uint8, crop ``k`` through ``M[k]`` from frame ``frame_index[k]``.

    On a CPU the same integer arithmetic runs in ``cv2.remap`` (its fixed-point maps, one call
    per crop over the frame's own pixels: about 6x faster than the tensor gather); elsewhere
    in one batched gather. The crops come in channels-last memory, so the networks'
    convolutions run channels-last (on a CPU about 1.5x faster than NCHW).
    """
    if images.device.type != "cpu":
        return warp_affine_fixed_point(_nchw(images), M, (size, size), frame_index,
                                       sizes[frame_index], border)  # fmt: skip
    qx, qy = (q.numpy() for q in fixed_point_samples(M, (size, size)))
    xy = np.empty((*qx.shape, 2), np.int16)  # the maps cv2.remap takes: CV_16SC2 and
    np.clip(qx >> 5, -32768, 32767, out=xy[..., 0], casting="unsafe")  # frac_y * 32 + frac_x
    np.clip(qy >> 5, -32768, 32767, out=xy[..., 1], casting="unsafe")
    table = ((qy & 31) << 5 | (qx & 31)).astype(np.uint16)
    out = np.empty((len(M), size, size, 3), np.uint8)
    frames, wh = images.numpy(), sizes.tolist()
    mode = cv2.BORDER_REPLICATE if border == "replicate" else cv2.BORDER_CONSTANT
    for k, b in enumerate(frame_index.tolist()):  # one OpenCV call per crop
        w, h = wh[b]
        cv2.remap(frames[b, :h, :w], xy[k], table[k], cv2.INTER_LINEAR, dst=out[k],
                  borderMode=mode)  # fmt: skip
    return torch.from_numpy(out).permute(0, 3, 1, 2)


def detect_rois(bp: BlazePose, images: torch.Tensor, sizes: torch.Tensor, max_people: int):
    """The detector on ``images (B, H, W, 3)``: up to ``max_people`` ROIs per frame.

    Returns ``center (B, N, 2)``, ``side (B, N)``, ``rotation (B, N)`` (image pixels, radians)
    and ``valid (B, N)``.
    """
    center, side, rot = letterbox_roi(sizes)
    M = roi_matrix(center, side, rot, DETECTOR_SIZE)
    x = crop_rois(images, M, DETECTOR_SIZE, torch.arange(len(M), device=M.device), sizes,
                  "constant")  # fmt: skip
    raw, logits = bp.detector(x.float().mul_(2 / 255).sub_(1.0))
    boxes, kps, scores = decode_detections(raw, logits, bp.anchors)
    _, kps, _, valid = weighted_nms(boxes, kps, scores, max_people, bp.nms_iou, bp.min_detection)
    kps = detection_to_image(kps.flatten(1, 2), sizes).unflatten(1, kps.shape[1:3])
    c, s, r = alignment_roi(kps[:, :, 0], kps[:, :, 1], bp.roi_scale)
    return c, s, r, valid


def detect_people(bp: BlazePose, images: torch.Tensor, sizes: torch.Tensor, max_people: int,
                  tiles: bool = True) -> dict[str, torch.Tensor]:  # fmt: skip
    """The detector on each whole frame of ``images (B, H, W, 3)`` and, with ``tiles``, on the
    overlapping squares of a tall or wide frame (:func:`~.geometry.tile_rois`), all crops in
    one batch: up to ``max_people`` detections per crop, those of one person in several crops
    kept once (the best scored of those whose torsos lie within half a torso length,
    :func:`~.geometry.torso_distance`).

    Returns per frame ``D = max_people * crops`` rows, best scored first: ``center (B, D,
    2)``, ``side``, ``rotation``, ``score`` ``(B, D)`` (the ROI as :func:`detect_rois`),
    ``torso (B, D, 2, 2)`` (hip centre and shoulder centre, the detector's keypoints 0 and 2,
    pixels) and ``valid (B, D)``.
    """
    dev = images.device
    rois, owner = [], []
    for b, (w, h) in enumerate(sizes.tolist()):  # a few crops per frame (host geometry)
        whole = torch.tensor([[w / 2, h / 2, float(max(w, h))]])
        crops = torch.cat([whole, tile_rois((w, h)) if tiles else whole[:0]])
        rois.append(crops)
        owner += [b] * len(crops)
    R = max(len(r) for r in rois)
    roi = torch.cat(rois).to(dev)
    fi = torch.tensor(owner, device=dev)
    zero = torch.zeros(len(roi), device=dev)
    M = roi_matrix(roi[:, :2], roi[:, 2], zero, DETECTOR_SIZE)
    x = crop_rois(images, M, DETECTOR_SIZE, fi, sizes, "constant")
    raw, logits = bp.detector(x.float().mul_(2 / 255).sub_(1.0))
    boxes, kps, scores = decode_detections(raw, logits, bp.anchors)
    _, kps, score, ok = weighted_nms(boxes, kps, scores, max_people, bp.nms_iou, bp.min_detection)
    kps = (kps - 0.5) * roi[:, None, None, 2:] + roi[:, None, None, :2]  # crop -> frame pixels
    c, s, r = alignment_roi(kps[:, :, 0], kps[:, :, 1], bp.roi_scale)
    # crops of one frame side by side: (B, R * N), padded with invalid rows
    B, N = len(sizes), max_people
    pos = torch.cat([torch.arange(len(rr)) for rr in rois]).to(dev)
    out = {"center": c.new_zeros(B, R, N, 2), "side": s.new_zeros(B, R, N),
           "rotation": r.new_zeros(B, R, N), "score": score.new_zeros(B, R, N),
           "torso": kps.new_zeros(B, R, N, 2, 2), "valid": ok.new_zeros(B, R, N)}  # fmt: skip
    for k, v in (("center", c), ("side", s), ("rotation", r), ("score", score),
                 ("torso", kps[:, :, [0, 2]]), ("valid", ok)):  # fmt: skip
        out[k][fi, pos] = v
    out = {k: v.flatten(1, 2) for k, v in out.items()}
    order = torch.where(out["valid"], out["score"], -1.0).argsort(-1, descending=True)
    out = {k: v.gather(1, order.view(*order.shape, *[1] * (v.dim() - 2)).expand_as(v))
           for k, v in out.items()}  # fmt: skip
    # one person seen in several crops: a row within half a torso of a better one is dropped
    near = torso_distance(out["torso"][:, :, None], out["torso"][:, None]) < 0.5  # (B, D, D)
    pair = out["valid"][:, :, None] & out["valid"][:, None]
    better = torch.ones_like(near[0]).tril(-1)  # row i, column j < i: j scored better
    out["valid"] = out["valid"] & ~(near & pair & better).any(-1)
    return out


def landmarks_in_rois(bp, images, frame_index, center, side, rotation,
                      sizes=None) -> dict[str, torch.Tensor]:  # fmt: skip
    """The landmark network on ``K`` ROIs (``center (K, 2)``, ``side (K,)``, ``rotation
    (K,)``) of frames ``frame_index (K,)`` (of ``sizes (B, 2)``, default the whole image):
    ``xy (K, 39, 2)`` pixels, ``visibility`` and ``presence`` ``(K, 39)``, ``flag (K,)``
    (pose presence).

    The crop is MediaPipe's (OpenCV's fixed-point bilinear, replicated border, rounded to
    uint8, then scaled to ``[0, 1]``).
    """
    M = roi_matrix(center, side, rotation, LANDMARK_SIZE)
    if sizes is None:
        sizes = torch.tensor(images.shape[2:0:-1], device=images.device).expand(len(images), 2)
    crops = crop_rois(images, M, LANDMARK_SIZE, frame_index, sizes, "replicate")
    # landmarks, pose flag, heatmaps (not the segmentation nor the world landmarks)
    raw, flag, _, heatmaps, _ = bp.landmark(crops.float().mul_(1 / 255), outputs=(0, 1, 3))
    out = decode_landmarks(raw, center, side, rotation, heatmaps, matrix=M)
    out["flag"] = flag.reshape(-1)
    return out


def _people(out: dict, frame_index: torch.Tensor, B: int) -> list[dict]:
    """Per frame: ``keypoints (n, 33, 3)``, ``scores (n,)``, ``boxes (n, 4)`` (host)."""
    xy = out["xy"][:, :NUM_LANDMARKS].cpu().double()
    vis = out["visibility"][:, :NUM_LANDMARKS].cpu().double()
    kp = torch.cat([xy, vis[..., None]], -1)
    lo, hi = xy.amin(1), xy.amax(1)
    boxes = torch.cat([lo, hi - lo], -1)
    scores = out["flag"].cpu().double()
    fi = frame_index.cpu()
    return [{"keypoints": kp[fi == b], "scores": scores[fi == b], "boxes": boxes[fi == b]}
            for b in range(B)]  # fmt: skip


_EMPTY = {"xy": (0, 39, 2), "visibility": (0, 39), "flag": (0,)}


@torch.no_grad()
def image_people(bp: BlazePose, images: torch.Tensor, sizes: torch.Tensor,
                 max_people: int = 1) -> list[dict]:  # fmt: skip
    """Image mode: every person found in each frame (see the module docstring).

    The work runs under ``torch.inference_mode`` (less bookkeeping per operation: some 4% of
    a frame on one CPU thread); the people come back as ordinary tensors."""
    with torch.inference_mode():
        c, s, r, valid = detect_rois(bp, images, sizes, max_people)
        fi, slot = valid.nonzero(as_tuple=True)
        if len(fi) == 0:
            out = {k: torch.zeros(shape) for k, shape in _EMPTY.items()}
        else:
            out = landmarks_in_rois(bp, images, fi, c[fi, slot], s[fi, slot], r[fi, slot], sizes)
            keep = out["flag"] >= bp.min_presence
            out, fi = {k: v[keep] for k, v in out.items()}, fi[keep]
    return _people(out, fi, images.shape[0])


class BlazePoseTracker:
    """Video mode over ``streams`` videos at once; call :meth:`step` with one frame of each.

    Person ``j`` of a stream keeps slot ``j`` (its track id) while it is tracked; its next
    ROI comes from its auxiliary landmarks.

    With ``find_everyone`` off (the default for ``max_people=1``: MediaPipe's
    ``PoseLandmarker`` in video mode) a stream runs the detector on the whole frame while it
    tracks fewer than ``max_people`` people, and a new detection whose centre lies within a
    quarter side of a tracked person's ROI is the same person and is dropped.

    With ``find_everyone`` (the default for ``max_people > 1``) the tracker looks for everyone
    and keeps them apart:

    - the detector runs on the whole frame and its overlapping squares
      (:func:`detect_people`) every ``detect_every`` frames, while fewer than ``max_people``
      are tracked, and on the frame after a tracked person's pose flag fell under
      ``recheck_presence``, its ROI jumped (its centre by more than half its side, or its side
      by a factor 1.5), or a track was dropped;
    - detections are matched to tracks by their hip and shoulder centres against each track's
      predicted by its motion (:func:`~.geometry.torso_distance` under 0.5, cheapest first): a
      detection on a tracked person is no new track;
    - a track whose hip centre lies on one detection and shoulder centre on another
      (:func:`~.geometry.split_torso`: a skeleton merged from two people) is dropped, and the
      people are taken from the detections again;
    - two tracks on one person (torsos within 0.3 torso lengths, or hip centres within 0.25)
      are merged: the one that was
      there stays (the other moved further from where its motion predicted it: it slid over
      from someone else), a new track before an older one;
    - a track whose hip and shoulder centres lie within ``min_trunk`` times its ROI's side, or
      whose shoulders lie below its hips (:func:`~.geometry.head_down`: a skeleton read from
      someone's legs or arm; people's trunks measure about a fifth of the side), is dropped,
      and a head-down detection starts no track;
    - a new person takes the free slot whose last position, carried on by its motion, is
      nearest (within ``recall_frames``), so an identity lost while people cross comes back.

    The rules are batched over streams and people; the matching loops over the few detections
    and tracks of a stream that ran the detector (at most ``max_people`` times the crops).
    """

    def __init__(self, bp: BlazePose, streams: int, max_people: int = 1, smooth: bool = True,
                 fps: float = 30.0, find_everyone: bool | None = None, detect_every: int = 10,
                 recheck_presence: float = 0.8, recall_frames: int = 30,
                 min_trunk: float = 0.15) -> None:  # fmt: skip
        self.bp, self.S, self.N = bp, streams, max_people
        self.smooth, self.fps = smooth, fps
        self.everyone = max_people > 1 if find_everyone is None else find_everyone
        self.detect_every, self.recheck = detect_every, recheck_presence
        self.recall_frames, self.min_trunk = recall_frames, min_trunk
        dev = bp.device
        # the smoothing filters' state per slot (MediaPipe's pose_landmark_filtering)
        self.started = torch.zeros(streams, max_people, dtype=torch.bool, device=dev)
        zeros = lambda n: torch.zeros(streams, max_people, n, 2, device=dev)  # noqa: E731
        self.filters = {part: {k: zeros(n) for k in ("raw", "out", "speed")}
                        for part, n in (("body", NUM_LANDMARKS), ("aux", 2))}  # fmt: skip
        self.visibility = torch.zeros(streams, max_people, NUM_LANDMARKS, device=dev)
        self.center = torch.zeros(streams, max_people, 2, device=dev)
        self.side = torch.zeros(streams, max_people, device=dev)
        self.rotation = torch.zeros(streams, max_people, device=dev)
        self.live = torch.zeros(streams, max_people, dtype=torch.bool, device=dev)
        self.redetect = torch.ones(streams, dtype=torch.bool)
        self.detections = 0
        # find_everyone: each slot's torso (hip, shoulder centres), its motion per frame, the
        # frame it was last seen and the frame its identity began
        self.torso = torch.zeros(streams, max_people, 2, 2, device=dev)
        self.motion = torch.zeros(streams, max_people, 2, 2, device=dev)
        self.seen = torch.full((streams, max_people), -(10**9), dtype=torch.long, device=dev)
        self.birth = torch.zeros(streams, max_people, dtype=torch.long, device=dev)
        self.frame = 0
        self.dropped = {"merged skeleton": 0, "same person": 0, "no trunk": 0}

    def _detect(self, images: torch.Tensor, sizes: torch.Tensor) -> None:
        need = self.redetect.nonzero().flatten()
        if len(need) == 0:
            return
        self.detections += len(need)
        idx = need.to(images.device)
        if self.everyone:
            self._find_everyone(detect_people(self.bp, images[idx], sizes[idx], self.N), need)
            return
        c, s, r, ok = detect_rois(self.bp, images[idx], sizes[idx], self.N)
        for k, st in enumerate(need.tolist()):  # per re-detecting stream: fill free slots
            for j in ok[k].nonzero().flatten().tolist():
                live = self.live[st]
                d = torch.linalg.vector_norm(self.center[st] - c[k, j], dim=-1)
                if (live & (d < self.side[st] / 4)).any() or live.all():
                    continue
                slot = int((~live).nonzero()[0])
                self._start(st, slot, c[k, j], s[k, j], r[k, j])

    def _start(self, st: int, slot: int, center, side, rotation) -> None:
        self.center[st, slot], self.side[st, slot] = center, side
        self.rotation[st, slot], self.live[st, slot] = rotation, True
        self.started[st, slot] = False  # a new person: its filters restart

    def _find_everyone(self, det: dict[str, torch.Tensor], streams: torch.Tensor) -> None:
        """Match the detections ``det`` (:func:`detect_people`, rows per stream of
        ``streams``) to the tracks, drop merged skeletons, start the unmatched people."""
        st = streams.to(self.live.device)
        det = {**det, "valid": det["valid"] & ~head_down(det["torso"])}  # read from legs
        gap = (self.frame - self.seen[st]).clamp_min(0).to(self.torso.dtype)
        pred = self.torso[st] + self.motion[st] * gap[..., None, None]  # (S', N, 2, 2)
        torsos = torch.where(det["valid"][..., None, None], det["torso"], float("nan"))
        merged = split_torso(pred, torsos.unsqueeze(1)) & self.live[st]  # (S', N)
        cost = torso_distance(pred[:, None], det["torso"][:, :, None])  # (S', D, N)
        cost = torch.where(det["valid"][..., None], cost, float("inf")).cpu()
        merged_host, live, free_cost = merged.cpu(), self.live[st].cpu(), cost.clone()
        for k, s in enumerate(streams.tolist()):  # per re-detecting stream: a few rows each
            for j in merged_host[k].nonzero().flatten().tolist():
                self.live[s, j] = False
                self.dropped["merged skeleton"] += 1
            on = live[k] & ~merged_host[k]
            c = torch.where(on[None], cost[k], float("inf"))
            taken = torch.zeros(c.shape[0], dtype=torch.bool)
            while True:  # cheapest pair first: a detection on a tracked person is no new track
                v, flat = c.min(), c.argmin()
                if not v < 0.5:
                    break
                d, j = divmod(int(flat), c.shape[1])
                taken[d] = True
                c[d, :], c[:, j] = float("inf"), float("inf")
            rows = (det["valid"][k].cpu() & ~taken).nonzero().flatten()
            order = det["side"][k, rows.to(det["side"].device)].cpu().argsort(descending=True)
            for d in rows[order].tolist():  # the nearest people first
                free = ~self.live[s].cpu()
                if not free.any():
                    break
                # the free slot whose last torso, carried on, is nearest (recent ones only)
                recent = free & (self.frame - self.seen[s].cpu() <= self.recall_frames)
                near = torch.where(recent, free_cost[k, d], float("inf"))
                if near.min() < 1.0:  # a recent identity back
                    slot = int(near.argmin())
                else:  # a new identity, in the slot free longest
                    slot = int(torch.where(free, self.seen[s].cpu(), 2**62).argmin())
                    self.birth[s, slot] = self.frame
                self._start(s, slot, det["center"][k, d], det["side"][k, d],
                            det["rotation"][k, d])  # fmt: skip
                self.torso[s, slot] = det["torso"][k, d]
                self.motion[s, slot] = 0.0

    def _smoothed(self, out: dict, st: torch.Tensor, slot: torch.Tensor) -> dict:
        """MediaPipe's landmark smoothing (``pose_landmark_filtering``) of the people tracked
        in slots ``(st, slot)``: visibility low-passed (alpha 0.1); the 33 landmarks and the
        two auxiliary ones (which give the next ROI) One-Euro filtered in pixels (min cutoff
        0.05 / 0.01, beta 80 / 10, derivative cutoff 1: the options in MediaPipe 0.10.14's
        graph), the object scale being the side of the unscaled square on this frame's raw
        auxiliary points (its ``AlignmentPointsRectsCalculator`` roi), at ``fps``
        (MediaPipe's solution API: 30)."""
        side = 2 * torch.linalg.vector_norm(out["xy"][:, 34] - out["xy"][:, 33], dim=-1)
        started, scale = self.started[st, slot], 1.0 / side.clamp_min(1e-6)  # alignment_roi's
        xy = out["xy"].clone()
        for part, lo, hi, cutoff, beta in (("body", 0, NUM_LANDMARKS, 0.05, 80.0),
                                           ("aux", 33, 35, 0.01, 10.0)):  # fmt: skip
            prev = {k: v[st, slot] for k, v in self.filters[part].items()}
            xy[:, lo:hi], new = one_euro_step(out["xy"][:, lo:hi], prev, started, scale,
                                              self.fps, cutoff, beta)  # fmt: skip
            for k, v in new.items():
                self.filters[part][k][st, slot] = v
        vis = out["visibility"].clone()
        body = vis[:, :NUM_LANDMARKS]
        smooth = 0.1 * body + 0.9 * self.visibility[st, slot]
        vis[:, :NUM_LANDMARKS] = torch.where(started[:, None], smooth, body)
        self.visibility[st, slot] = vis[:, :NUM_LANDMARKS]
        return {**out, "xy": xy, "visibility": vis}

    @torch.no_grad()
    def step(self, images: torch.Tensor, sizes: torch.Tensor) -> list[dict]:
        """One frame per stream (``images (S, H, W, 3)``): per stream ``keypoints (N, 33, 3)``,
        ``scores (N,)``, ``boxes (N, 4)`` and ``track (N,)`` slot ids of the people tracked.

        The work runs under ``torch.inference_mode`` (less bookkeeping per operation: some 4%
        of a frame on one CPU thread); the people come back as ordinary tensors."""
        with torch.inference_mode():
            out, st, slot = self._advance(images, sizes)
        people = _people(out, st, self.S)
        tracks, stk = slot.cpu(), st.cpu()
        for b, p in enumerate(people):
            p["track"] = tracks[stk == b]
        return people

    def _advance(self, images: torch.Tensor, sizes: torch.Tensor) -> tuple[dict, ...]:
        """Detect where needed, then the landmarks of every tracked person, their next ROIs and
        the streams that detect next time: the kept people's outputs, streams and slots."""
        self._detect(images, sizes)
        st, slot = self.live.nonzero(as_tuple=True)
        if len(st) == 0:
            self.redetect[:] = True
            self.frame += 1
            return {k: torch.zeros(shape) for k, shape in _EMPTY.items()}, st, slot
        out = landmarks_in_rois(self.bp, images, st, self.center[st, slot], self.side[st, slot],
                                self.rotation[st, slot], sizes)  # fmt: skip
        keep = out["flag"] >= self.bp.min_presence
        if self.smooth:
            out = self._smoothed(out, st, slot)
        c, s, r = alignment_roi(out["xy"][:, 33], out["xy"][:, 34], self.bp.roi_scale)
        alarm = torch.zeros(self.S, dtype=torch.bool, device=keep.device)
        if self.everyone:
            keep, alarm = self._keep_apart(out, st, slot, keep, c, s)
        self.center[st, slot], self.side[st, slot], self.rotation[st, slot] = c, s, r
        self.live[st, slot] = keep
        self.started[st, slot] = keep  # a lost person's filters restart
        self.redetect = (self.live.sum(1) < self.N).cpu()
        self.frame += 1
        if self.everyone:
            self.redetect |= alarm.cpu() | (self.frame % self.detect_every == 0)
        return {k: v[keep] for k, v in out.items()}, st[keep], slot[keep]

    def _keep_apart(self, out, st, slot, keep, center, side) -> tuple[torch.Tensor, ...]:
        """find_everyone after a landmark pass over the tracked people ``(st, slot)``: their
        torsos and motion recorded, two tracks on one person merged (the one that slid there
        dropped), skeletons without a trunk dropped, and per stream whether to run the detector
        next frame (a pose flag under ``recheck_presence``, a jumped ROI or a dropped track).
        Returns the people kept and that ``(S,)`` alarm."""
        xy = out["xy"]
        torso = torch.stack([xy[:, [23, 24]].mean(1), xy[:, [11, 12]].mean(1)], 1)  # (K, 2, 2)
        gap = (self.frame - self.seen[st, slot]).clamp_min(1).to(torso.dtype)
        was = self.started[st, slot]
        expected = self.torso[st, slot] + self.motion[st, slot] * gap[:, None, None]
        moved = torch.where(was, torso_distance(torso, expected), float("inf"))
        step = (torso - self.torso[st, slot]) / gap[:, None, None]
        # two kept tracks of one stream on one person: the one that slid there goes (the one
        # further from where its motion predicted it; a new one before an older one)
        same = (st[:, None] == st[None]) & keep[:, None] & keep[None]
        length = torch.linalg.vector_norm(torso[:, 1] - torso[:, 0], dim=-1)
        hips = torch.cdist(torso[:, 0], torso[:, 0]) / torch.maximum(length[:, None], length)
        same &= (torso_distance(torso[:, None], torso[None]) < 0.3) | (hips < 0.25)
        b = self.birth[st, slot]
        order = (b[:, None] > b[None]) | ((b[:, None] == b[None]) & (slot[:, None] > slot[None]))
        slid = (moved[:, None] > moved[None]) | ((moved[:, None] == moved[None]) & order)
        dup = (same & slid).any(1)
        self.dropped["same person"] += int((dup & keep).sum())
        # a skeleton without a trunk (a detection on legs or an arm: people's torsos are about
        # a fifth of their region's side) goes too
        trunkless = keep & ~dup & ((length < self.min_trunk * side) | head_down(torso))
        self.dropped["no trunk"] += int(trunkless.sum())
        dup |= trunkless
        keep = keep & ~dup
        on = ~dup[:, None, None]  # a dropped duplicate's slot remembers where it was
        self.motion[st, slot] = torch.where(on & was[:, None, None], step, self.motion[st, slot])
        self.torso[st, slot] = torch.where(on, torso, self.torso[st, slot])
        self.seen[st[keep], slot[keep]] = self.frame
        moved = torch.linalg.vector_norm(center - self.center[st, slot], dim=-1)
        ratio = side / self.side[st, slot].clamp_min(1e-6)
        jump = was & ((moved > 0.5 * self.side[st, slot]) | (ratio > 1.5) | (ratio < 1 / 1.5))
        bad = (out["flag"] < self.recheck) | jump | ~keep
        alarm = torch.zeros(self.S, dtype=torch.bool, device=keep.device)
        alarm[st[bad]] = True
        return keep, alarm
