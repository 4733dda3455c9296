"""Pose prediction on images, folders of images and videos: the library behind
``tensorpose predict INPUT --checkpoint CK [--boxes FILE | --detector CK] [--out DIR]``.

Models come in already loaded, with the config values prediction needs
(:class:`PoseModel`): ``kind`` ``"heatmap"`` or ``"deeppose"`` (top-down: one crop per person
box) or ``"centernet"`` (whole image, no boxes). Top-down models take their boxes from a COCO
detections JSON (:func:`load_detections`) or from a CenterNet model used as the person detector.

Frames are decoded once, in batches (``cv2.imdecode`` per image file, ``cv2.VideoCapture`` for a
video), padded into one uint8 tensor and copied to the model's device; crops, letterboxes,
forward passes and decoding run batched there.

COCO image ids: from the boxes file when it is a COCO file with an ``images`` list (matched by
file name), otherwise the number in the file name (COCO's own ``000000000790.jpg`` is image
790); when some file has no number, or two share one, every file gets its position in the
sorted folder. Video frames are numbered from 0.

Outputs in ``out_dir`` (each written under a temporary name first and moved into place when the
whole input has been processed, so a partial output is never mistaken for a complete one; a
failure removes them):

- ``results.json``: COCO keypoint results (``COCO.loadRes`` input), every person;
- ``openpose/<name>_<frame:012d>_keypoints.json``: OpenPose per-frame JSON in the ``COCO_18``
  layout (COCO's 17 keypoints plus ``neck`` = the shoulders' midpoint with the smaller shoulder
  confidence), which :func:`tensorpose.io.openpose.load_openpose` reads (it has no 17-keypoint
  layout); people scoring at least ``min_score``; ``<name>`` is the image's or video's stem
  (frame 0 for an image);
- pictures: ``drawn/<image file name>`` for images, ``<video stem>.mp4`` (mp4v) for a video,
  people scoring at least ``min_score``: joints with confidence at least
  ``min_keypoint_score`` and their links, and the box with the score for people with at least
  three such joints.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
import torch
from torch import nn

from .data.images import read_image
from .io.coco import coco_results
from .io.openpose import LAYOUTS, write_openpose
from .models.centernet import IMAGENET_MEAN, IMAGENET_STD
from .ops.affine import (
    invert_affine,
    transform_points,
)
from .ops.heatmap import decode_heatmaps
from .ops.roi import crop_boxes
from .skeleton import coco17, get_skeleton
from .tasks.centernet import CenterNet

__all__ = [
    "COCO_LINKS",
    "IMAGE_EXTENSIONS",
    "KINDS",
    "VIDEO_EXTENSIONS",
    "FrameBatch",
    "PoseModel",
    "PredictResult",
    "UnsupportedCheckpointError",
    "image_ids_from_names",
    "iter_frames",
    "list_images",
    "load_detections",
    "load_pose_model",
    "predict",
    "to_coco18",
]

KINDS = ("heatmap", "deeppose", "centernet")
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
VIDEO_EXTENSIONS = (".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v", ".mpg", ".mpeg")
COCO_LINKS = (
    (15, 13), (13, 11), (16, 14), (14, 12), (11, 12), (5, 11), (6, 12), (5, 6), (5, 7),
    (6, 8), (7, 9), (8, 10), (1, 2), (0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 6),
)  # fmt: skip
"""The COCO person category's skeleton links, 0-based (for drawing)."""


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
            :class:`~tensorpose.centernet.CenterNet`).
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

    @property
    def device(self) -> torch.device:
        p = next(iter(self.model.parameters()), None)
        return p.device if p is not None else torch.device("cpu")

    def normalize(self, images: torch.Tensor) -> torch.Tensor:
        """``(B, 3, H, W)`` in ``[0, 255]`` -> network input."""
        mean = torch.tensor(self.mean, device=images.device).view(1, 3, 1, 1) * 255
        std = torch.tensor(self.std, device=images.device).view(1, 3, 1, 1) * 255
        return ((images.float() - mean) / std).contiguous()


class UnsupportedCheckpointError(ValueError):
    """A checkpoint of a task that does not predict from pictures (e.g. lifting); names it."""


def load_pose_model(checkpoint: str | Path, device: str | torch.device = "auto") -> PoseModel:
    """A :class:`PoseModel` from a training checkpoint (:func:`tensorpose.inference.load_model`):
    the kind is the checkpoint's task, the input geometry and decoding its config's.

    Raises:
        UnsupportedCheckpointError: a checkpoint of a task other than ``heatmap``,
            ``deeppose`` or ``centernet`` (one line naming the file and the task).
    """
    from .inference import load_model

    _, model, cfg, _ = load_model(checkpoint, device)
    if cfg.task not in KINDS:
        hint = " (2D -> 3D: use `tensorpose lift`)" if cfg.task == "lift" else ""
        raise UnsupportedCheckpointError(
            f"{checkpoint}: a {cfg.task!r} checkpoint cannot predict poses from images; predict "
            f"takes {', '.join(KINDS)} checkpoints{hint}"
        )
    d, m = cfg.data, cfg.model
    kw: dict = {"mean": tuple(d.mean), "std": tuple(d.std), "skeleton": m.skeleton}
    if cfg.task == "heatmap":
        kw["decode"] = m.decode
    if cfg.task == "centernet":
        kw.update(top_k=m.top_k, joint_threshold=m.joint_threshold, nms_threshold=m.nms_threshold)
    else:
        kw["padding"] = d.padding
    return PoseModel(model.eval(), cfg.task, tuple(d.input_size), **kw)


@dataclass
class PredictResult:
    """What :func:`predict` did: ``frames`` processed, ``people`` found (all scores),
    ``seconds`` of wall time, ``frames_per_s``, and the ``outputs`` written (name -> path)."""

    frames: int
    people: int
    seconds: float
    outputs: dict[str, Path] = field(default_factory=dict)
    image_ids: list[int] = field(default_factory=list)

    @property
    def frames_per_s(self) -> float:
        return self.frames / max(self.seconds, 1e-9)


# ---------------------------------------------------------------------- inputs
@dataclass
class FrameBatch:
    """Decoded frames: ``images`` ``(H, W, 3)`` uint8 RGB each, their ``names`` (image file
    names, or the video stem), ``frame_index`` (0 for images, the frame number in a video) and
    COCO ``image_ids``."""

    images: list[np.ndarray]
    names: list[str]
    frame_index: list[int]
    image_ids: list[int]


def list_images(folder: str | Path) -> list[Path]:
    """The image files of ``folder`` (by extension, not recursive), sorted by name.

    Raises:
        ValueError: no image file in it (the message names the folder).
    """
    folder = Path(folder)
    files = sorted(
        p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS
    )
    if not files:
        raise ValueError(
            f"{folder}: no image files in this folder (looked for {', '.join(IMAGE_EXTENSIONS)})"
        )
    return files


def image_ids_from_names(names: Sequence[str]) -> list[int]:
    """COCO image ids from file names: the last number in each name's stem
    (``000000000790.jpg`` -> 790); positions ``0..n-1`` when a name has no number or two names
    share one."""
    nums = []
    for n in names:
        found = re.findall(r"\d+", Path(n).stem)
        nums.append(int(found[-1]) if found else None)
    if None in nums or len(set(nums)) != len(nums):
        return list(range(len(names)))
    return nums


def _video_capture(path: Path) -> cv2.VideoCapture:
    cap = cv2.VideoCapture(str(path))
    if not cap.isOpened():
        cap.release()
        raise ValueError(f"{path}: cannot open the video (truncated, corrupt or not a video)")
    return cap


def iter_frames(
    path: str | Path, batch_size: int = 16, image_ids: dict[str, int] | None = None
) -> Iterator[FrameBatch]:
    """Decode an image, a folder of images or a video, ``batch_size`` frames at a time.

    Args:
        path: the input.
        batch_size: frames per batch.
        image_ids: file name -> COCO id (e.g. from a boxes file); default
            :func:`image_ids_from_names`.

    Raises:
        FileNotFoundError: no such input.
        ValueError: an unreadable or truncated image or video (named), an empty folder, a video
            without frames or with fewer frames than its header declares, an unknown extension.
    """
    path = Path(path)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such image, folder or video")
    suffix = path.suffix.lower()
    if path.is_dir() or suffix in IMAGE_EXTENSIONS:
        files = list_images(path) if path.is_dir() else [path]
        names = [f.name for f in files]
        ids = _ids_for(names, image_ids)
        for s in range(0, len(files), batch_size):
            chunk = files[s : s + batch_size]
            yield FrameBatch(
                [read_image(f) for f in chunk],  # ImageReadError (a ValueError) names the file
                names[s : s + batch_size],
                [0] * len(chunk),
                ids[s : s + batch_size],
            )
        return
    if suffix not in VIDEO_EXTENSIONS:
        raise ValueError(
            f"{path}: not an image ({', '.join(IMAGE_EXTENSIONS)}) or video "
            f"({', '.join(VIDEO_EXTENSIONS)}) file"
        )
    cap = _video_capture(path)
    declared = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
    t = 0
    try:
        while True:
            frames = []
            while len(frames) < batch_size:
                ok, frame = cap.read()
                if not ok:
                    break
                frames.append(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))
            if not frames:
                break
            n = len(frames)
            yield FrameBatch(frames, [path.stem] * n, list(range(t, t + n)), list(range(t, t + n)))
            t += n
            if n < batch_size:
                break
    finally:
        cap.release()
    if t == 0:
        raise ValueError(f"{path}: no frame could be decoded (truncated, corrupt or empty video)")
    if declared > 0 and t < declared:
        raise ValueError(
            f"{path}: decoded {t} of the {declared} frames its header declares (truncated or "
            "corrupt video)"
        )


def _ids_for(names: list[str], mapping: dict[str, int] | None) -> list[int]:
    if mapping:
        known = [mapping.get(n) for n in names]
        if all(k is not None for k in known):
            return [int(k) for k in known]
    return image_ids_from_names(names)


def count_frames(path: str | Path) -> int | None:
    """Frames (images, or the video's declared count) for the progress bar; ``None``: unknown."""
    path = Path(path)
    if path.is_dir():
        return len(list_images(path))
    if path.suffix.lower() in IMAGE_EXTENSIONS:
        return 1
    cap = cv2.VideoCapture(str(path))
    n = int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) if cap.isOpened() else 0
    cap.release()
    return n or None


# ---------------------------------------------------------------------- boxes
def _num(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def load_detections(
    path: str | Path, category_id: int = 1
) -> tuple[dict[int, np.ndarray], dict[str, int]]:
    """Person boxes from a COCO detections JSON.

    Accepts the detection results list (``[{"image_id", "bbox": [x, y, w, h], "score",
    "category_id"}, ...]``; ``score`` defaults to 1, ``category_id`` to the person) or a COCO
    annotation file (``annotations`` with ``bbox``; crowds skipped; scores 1), whose ``images``
    list also maps file names to ids.

    Args:
        path: the JSON file.
        category_id: the person category; other categories are ignored.

    Returns:
        ``image_id -> (n, 5)`` float64 ``x, y, w, h, score``, and ``file name -> image_id``
        (empty for a results list).

    Raises:
        FileNotFoundError: no such file.
        ValueError: not JSON, not one of the two layouts, or an entry without a valid
            ``image_id``/``bbox``/``score`` (the message names the file and the entry).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such boxes file")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    names: dict[str, int] = {}
    if isinstance(data, dict):
        if not isinstance(data.get("annotations"), list):
            raise ValueError(
                f"{path}: expected a list of detections or a COCO file with 'annotations'"
            )
        for im in data.get("images", []) or []:
            if isinstance(im, dict) and isinstance(im.get("file_name"), str) and "id" in im:
                names[Path(im["file_name"]).name] = int(im["id"])
        entries = [a for a in data["annotations"] if not (isinstance(a, dict) and a.get("iscrowd"))]
    elif isinstance(data, list):
        entries = data
    else:
        raise ValueError(f"{path}: expected a list of detections or a COCO file with 'annotations'")
    dets: dict[int, list] = {}
    for i, d in enumerate(entries):
        if not isinstance(d, dict):
            raise ValueError(f"{path}: entry {i} is not an object")
        if d.get("category_id", category_id) != category_id:
            continue
        iid, box, score = d.get("image_id"), d.get("bbox"), d.get("score", 1.0)
        if not isinstance(iid, int) or isinstance(iid, bool):
            raise ValueError(f"{path}: entry {i} has no integer 'image_id' (got {iid!r})")
        if not (isinstance(box, list) and len(box) == 4 and all(_num(v) for v in box)):
            raise ValueError(f"{path}: entry {i} 'bbox' must be 4 numbers x, y, w, h, got {box!r}")
        if not _num(score):
            raise ValueError(f"{path}: entry {i} 'score' must be a number, got {score!r}")
        if box[2] > 0 and box[3] > 0:
            dets.setdefault(iid, []).append([*box, score])
    return {k: np.asarray(v, np.float64).reshape(-1, 5) for k, v in dets.items()}, names


# ---------------------------------------------------------------------- the device work
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


def _pad_frames(
    frames: list[np.ndarray], device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    Hm = max(f.shape[0] for f in frames)
    Wm = max(f.shape[1] for f in frames)
    host = torch.zeros(len(frames), Hm, Wm, 3, dtype=torch.uint8)
    for i, f in enumerate(frames):  # a copy per frame: assembling the batch
        host[i, : f.shape[0], : f.shape[1]] = torch.from_numpy(f)
    size = torch.tensor([[f.shape[1], f.shape[0]] for f in frames], dtype=torch.long)
    if device.type == "cuda":
        host = host.pin_memory()
    return host.to(device, non_blocking=True), size.to(device)


def _centernet_people(net: PoseModel, images, size, min_score: float) -> list[dict]:
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


# ---------------------------------------------------------------------- outputs
def to_coco18(keypoints: np.ndarray) -> np.ndarray:
    """COCO-17 ``(..., 17, 3)`` (x, y, confidence) -> OpenPose ``COCO_18`` ``(..., 18, 3)``:
    the same joints reordered plus ``neck`` = midpoint of the shoulders, with the smaller of the
    two shoulder confidences."""
    names = coco17().names
    kp = np.asarray(keypoints, np.float64)
    if kp.shape[-2:] != (17, 3):
        raise ValueError(f"keypoints must have shape (..., 17, 3), got {kp.shape}")
    ls, rs = kp[..., names.index("l_shoulder"), :], kp[..., names.index("r_shoulder"), :]
    neck = np.concatenate(
        [(ls[..., :2] + rs[..., :2]) / 2, np.minimum(ls[..., 2:], rs[..., 2:])], -1
    )
    cols = [neck if n == "neck" else kp[..., names.index(n), :] for n in LAYOUTS["COCO_18"]]
    return np.stack(cols, -2)


class _Outputs:
    """Outputs under a temporary folder inside ``out_dir``, moved into place by :meth:`commit`
    (removed by :meth:`abort`)."""

    def __init__(self, out_dir: Path, stem: str, video: bool, fps: float, draw: bool,
                 openpose: bool, coco: bool) -> None:  # fmt: skip
        out_dir.mkdir(parents=True, exist_ok=True)
        self.out_dir, self.stem, self.video, self.fps = out_dir, stem, video, fps
        self.tmp = Path(tempfile.mkdtemp(prefix=".predict-", suffix=".partial", dir=out_dir))
        self.draw, self.openpose, self.coco = draw, openpose, coco
        self.results: list[dict] = []
        self.writer: cv2.VideoWriter | None = None
        self.names: dict[str, Path] = {}
        if openpose:
            self.names["openpose"] = Path("openpose")
        if coco:
            self.names["results"] = Path("results.json")
        if draw:
            self.names["pictures"] = Path(f"{stem}.mp4") if video else Path("drawn")

    def add(self, frames: FrameBatch, people: list[dict], min_score: float, min_kp: float,
            skeleton) -> None:  # fmt: skip
        if self.coco:
            for iid, p in zip(frames.image_ids, people, strict=True):
                if len(p["scores"]):
                    self.results += coco_results(
                        [iid] * len(p["scores"]), p["keypoints"][..., :2],
                        p["keypoints"][..., 2].clamp(0, 1), p["scores"],
                    )  # fmt: skip
        shown = [{k: v[p["scores"] >= min_score] for k, v in p.items()} for p in people]
        if self.openpose:
            P = max((len(p["scores"]) for p in shown), default=0)
            kp = np.full((len(shown), max(P, 1), 18, 3), np.nan)
            for i, p in enumerate(shown):  # per frame: pad to the batch's most people
                kp[i, : len(p["scores"])] = to_coco18(p["keypoints"].numpy())
            names = [f"{Path(n).stem if not self.video else n}_{t:012d}_keypoints.json"
                     for n, t in zip(frames.names, frames.frame_index, strict=True)]  # fmt: skip
            write_openpose(torch.from_numpy(kp), self.tmp / "openpose", names)
        if self.draw:
            for img, name, p in zip(frames.images, frames.names, shown, strict=True):
                self._picture(_draw(img, p, min_kp, skeleton), name)

    def _picture(self, img: np.ndarray, name: str) -> None:
        bgr = cv2.cvtColor(img, cv2.COLOR_RGB2BGR)
        if self.video:
            if self.writer is None:
                path = self.tmp / self.names["pictures"]
                fourcc = cv2.VideoWriter_fourcc(*"mp4v")
                self.writer = cv2.VideoWriter(str(path), fourcc, self.fps, bgr.shape[1::-1])
                if not self.writer.isOpened():
                    raise ValueError(f"{path}: cannot write an mp4v video here")
            self.writer.write(bgr)
            return
        path = self.tmp / "drawn" / name
        path.parent.mkdir(exist_ok=True)
        if not cv2.imwrite(str(path), bgr):
            raise ValueError(f"{path}: could not write the picture")

    def commit(self) -> dict[str, Path]:
        if self.writer is not None:
            self.writer.release()
        if self.coco:
            (self.tmp / "results.json").write_text(json.dumps(self.results))
        if self.openpose:
            (self.tmp / "openpose").mkdir(exist_ok=True)
        if self.draw and not self.video:
            (self.tmp / "drawn").mkdir(exist_ok=True)
        done = {}
        for key, rel in self.names.items():
            src, dst = self.tmp / rel, self.out_dir / rel
            if not src.exists():
                continue
            if dst.is_dir() and not dst.is_symlink():
                shutil.rmtree(dst)
            os.replace(src, dst)
            done[key] = dst
        shutil.rmtree(self.tmp, ignore_errors=True)
        return done

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.release()
        shutil.rmtree(self.tmp, ignore_errors=True)


def _draw(img: np.ndarray, people: dict, min_kp: float, skeleton) -> np.ndarray:
    from .viz import draw_skeleton

    out = img
    thick = max(1, round(max(img.shape[:2]) / 400))
    for box, score, kp in zip(people["boxes"], people["scores"], people["keypoints"],
                              strict=True):  # fmt: skip
        shown = kp[:, 2] >= min_kp
        out = draw_skeleton(out, kp[:, :2], shown, skeleton, COCO_LINKS, thick)
        if int(shown.sum()) < 3:  # e.g. a CenterNet centre without joints: no trained box
            continue
        x, y, w, h = (round(float(v)) for v in box)
        cv2.rectangle(out, (x, y), (x + w, y + h), (255, 255, 0), thick)
        cv2.putText(out, f"{float(score):.2f}", (x, max(y - 3, 10)), cv2.FONT_HERSHEY_SIMPLEX,
                    0.4 * thick, (255, 255, 0), thick, cv2.LINE_AA)  # fmt: skip
    return np.ascontiguousarray(out)


# ---------------------------------------------------------------------- predict
@torch.no_grad()
def predict(
    input: str | Path,
    pose: PoseModel,
    out_dir: str | Path,
    *,
    boxes: str | Path | None = None,
    detector: PoseModel | None = None,
    batch_size: int = 8,
    box_threshold: float = 0.3,
    min_score: float = 0.1,
    min_keypoint_score: float = 0.2,
    coco: bool = True,
    openpose: bool = True,
    draw: bool = True,
    progress: bool = True,
) -> PredictResult:
    """Predict every person's keypoints in an image, a folder of images or a video.

    Args:
        input: image file, folder of images, or video file.
        pose: the pose model (:class:`PoseModel`), already on its device, in eval mode.
        out_dir: where outputs go (see the module docstring); created.
        boxes: COCO detections JSON (top-down models; see :func:`load_detections`).
        detector: a ``"centernet"`` :class:`PoseModel` used as person detector (top-down models).
        batch_size: frames per batch (and people per top-down forward pass: ``4 x`` this).
        box_threshold: boxes (file or detector) scoring less are not used (0: all).
        min_score: people scoring less are left out of the OpenPose JSON and the pictures (the
            COCO results keep everyone: AP ranks by score).
        min_keypoint_score: joints drawn from this confidence on.
        coco, openpose, draw: which outputs to write.
        progress: a tqdm progress bar over frames.

    Returns:
        :class:`PredictResult`.

    Raises:
        ValueError: a bad input (named), a top-down model without ``boxes``/``detector``, a
            CenterNet model with them, a ``detector`` that is not a CenterNet model, or a boxes
            file whose image ids match none of the input's frames.
    """
    from tqdm.auto import tqdm

    t0 = time.perf_counter()
    input = Path(input)
    topdown = pose.kind != "centernet"
    if topdown and (boxes is None) == (detector is None):
        raise ValueError(
            f"a top-down {pose.kind} model needs person boxes: give exactly one of boxes (a COCO "
            "detections JSON) or detector (a CenterNet model)"
        )
    if not topdown and (boxes is not None or detector is not None):
        raise ValueError("a centernet model finds people itself: boxes/detector are not used")
    if detector is not None and detector.kind != "centernet":
        raise ValueError(f"detector must be a centernet model, got kind {detector.kind!r}")
    dets, names = load_detections(boxes) if boxes is not None else ({}, {})
    if not input.exists():
        raise FileNotFoundError(f"{input}: no such image, folder or video")
    video = input.is_file() and input.suffix.lower() in VIDEO_EXTENSIONS
    fps = 30.0
    if video:
        cap = _video_capture(input)
        fps = cap.get(cv2.CAP_PROP_FPS) or 30.0
        cap.release()
    total = count_frames(input)
    sk = get_skeleton(pose.skeleton)
    device = pose.device
    stem = input.stem if input.is_file() else input.name
    outputs = _Outputs(Path(out_dir), stem, video, fps, draw, openpose, coco)
    frames_done, people_count, matched, ids_seen = 0, 0, False, []
    bar = tqdm(total=total, unit="frame", disable=not progress, desc=f"predict {input.name}")
    try:
        for fb in iter_frames(input, batch_size, names):
            images, size = _pad_frames(fb.images, device)
            if not topdown:
                people = _centernet_people(pose, images, size, 0.0)
            else:
                if detector is not None:
                    found = _centernet_people(detector, images, size, box_threshold)
                    per_frame = [torch.cat([p["boxes"], p["scores"][:, None]], -1) for p in found]
                else:
                    per_frame = []
                    for iid in fb.image_ids:  # per frame: a dictionary lookup
                        d = dets.get(iid)
                        matched |= d is not None
                        d = np.zeros((0, 5)) if d is None else d[d[:, 4] >= box_threshold]
                        per_frame.append(torch.from_numpy(d))
                people = _topdown_people(pose, images, per_frame, 4 * batch_size)
            outputs.add(fb, people, min_score, min_keypoint_score, sk)
            frames_done += len(fb.images)
            people_count += sum(len(p["scores"]) for p in people)
            ids_seen += fb.image_ids
            bar.update(len(fb.images))
        if boxes is not None and not matched:
            have = sorted(dets)[:5]
            raise ValueError(
                f"{boxes}: no detection for any of the {frames_done} input frames (their image "
                f"ids: {ids_seen[:5]}{' ...' if len(ids_seen) > 5 else ''}; the file has ids "
                f"{have}{' ...' if len(dets) > 5 else ''}); image ids come from the numbers in "
                "the file names, or from the boxes file's 'images' list"
            )
        done = outputs.commit()
    except BaseException:
        outputs.abort()
        raise
    finally:
        bar.close()
    return PredictResult(frames_done, people_count, time.perf_counter() - t0, done, ids_seen)


def _topdown_people(pose: PoseModel, images: torch.Tensor, per_frame: list[torch.Tensor],
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
